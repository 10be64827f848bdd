// Copyright 2026 The dtensor Authors.
//
// base/compat.h (<dtensor/base/compat.h>): every difference between the
// libtorch versions dtensor builds against (Debian's 1.13 and 2.x), and
// between the compilers they come with, lives here, and only here.
//
// Code elsewhere asks `DTENSOR_TORCH_AT_LEAST(major, minor)` or uses one of
// the helpers below instead of spelling a version-specific API.
#pragma once

#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/version.h>

#define DTENSOR_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||          \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#if DTENSOR_TORCH_AT_LEAST(2, 0)
#include <ATen/ops/scaled_dot_product_attention.h>
#else
#include <ATen/ops/_scaled_dot_product_attention.h>
#endif

namespace dtensor {

// Autograd nodes are owned as libtorch owns them: by std::shared_ptr with
// torch::autograd::deleteNode (which frees long chains of nodes without deep
// recursion) until PyTorch moved them to c10::intrusive_ptr
// (pytorch/pytorch#181782; libtorch 2.14 has it, 2.6 does not). Told apart
// by the node's base class rather than a version number.
template <typename NodeT>
using AutogradNodePtr = std::conditional_t<std::is_base_of_v<c10::intrusive_ptr_target, NodeT>,
                                           c10::intrusive_ptr<NodeT>, std::shared_ptr<NodeT>>;

// A new node of type `NodeT` (a torch::autograd::Node), owned as above.
template <typename NodeT, typename... Args>
AutogradNodePtr<NodeT> make_autograd_node(Args&&... args) {
  if constexpr (std::is_base_of_v<c10::intrusive_ptr_target, NodeT>) {
    return c10::make_intrusive<NodeT>(std::forward<Args>(args)...);
  } else {
    // Argument-dependent lookup finds deleteNode in torch::autograd, where
    // it exists: this branch is never compiled where it does not.
    return std::shared_ptr<NodeT>(new NodeT(std::forward<Args>(args)...),
                                  [](NodeT* node) { deleteNode(node); });
  }
}

// The key of `parameter` in a torch::optim::Optimizer's state() map, whose
// type `StateMap` is passed: libtorch 1.13 keys it by the address of the
// parameter's TensorImpl printed as a string (c10::guts::to_string, an
// ostream's `<<`), 2.x by the address itself. Told apart by the map's key
// type rather than a version number, so the map need not be included here.
template <typename StateMap>
typename StateMap::key_type optimizer_state_key(const StateMap& /*state*/,
                                                const at::Tensor& parameter) {
  if constexpr (std::is_same_v<typename StateMap::key_type, std::string>) {
    std::ostringstream address;
    address << parameter.unsafeGetTensorImpl();
    return address.str();
  } else {
    return parameter.unsafeGetTensorImpl();
  }
}

// Drops the warnings libtorch raises on the calling thread while it lives.
// libtorch 2.0 moved the handler API into c10::WarningUtils and gave
// handlers one c10::Warning to process.
class SilencedWarnings {
 public:
  SilencedWarnings() : guard_(&handler_) {}
  SilencedWarnings(const SilencedWarnings&) = delete;
  SilencedWarnings& operator=(const SilencedWarnings&) = delete;

 private:
  class DropAll : public c10::WarningHandler {
#if DTENSOR_TORCH_AT_LEAST(2, 0)
    void process(const c10::Warning&) override {}
#else
    void process(const c10::SourceLocation&, const std::string&, bool) override {}
#endif
  };
  DropAll handler_;  // declared first: the guard installs it
#if DTENSOR_TORCH_AT_LEAST(2, 0)
  c10::WarningUtils::WarningHandlerGuard guard_;
#else
  c10::Warning::WarningHandlerGuard guard_;
#endif
};

// softmax(query key^T / sqrt(head dim) + mask) value, without dropout (a
// float mask is added to the scores; a boolean one keeps where true; the
// example passes a float one): libtorch 2.x's
// at::scaled_dot_product_attention, 1.13's at::_scaled_dot_product_attention
// (which also returns the weights).
inline at::Tensor scaled_dot_product_attention(const at::Tensor& query, const at::Tensor& key,
                                               const at::Tensor& value, const at::Tensor& mask) {
#if DTENSOR_TORCH_AT_LEAST(2, 0)
  return at::scaled_dot_product_attention(query, key, value, mask);
#else
  return std::get<0>(at::_scaled_dot_product_attention(query, key, value, mask, /*dropout_p=*/0.0,
                                                       /*need_attn_weights=*/false,
                                                       /*is_causal=*/false));
#endif
}

}  // namespace dtensor
