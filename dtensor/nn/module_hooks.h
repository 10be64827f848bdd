// Copyright 2026 The dtensor Authors.
//
// dtensor/nn/module_hooks.h: forward hooks for torch::nn modules, and
// `call`, the one way to run a module with them.
//
// PyTorch moves activations between layouts in forward hooks that
// parallelize_module installs on each planned submodule. C++ modules have no
// hooks: a module's forward() calls its children's forward() directly. So a
// model that is to be parallelized by a plan calls its children through
// `call`, which runs the hooks registered on that child (none: exactly
// `child->forward(args...)`, so one-device runs are unchanged):
//
//   at::Tensor BlockImpl::forward(const at::Tensor& x) {
//     const at::Tensor h = x + dtensor::nn::call(attention, dtensor::nn::call(attention_norm, x));
//     return h + dtensor::nn::call(feed_forward, dtensor::nn::call(ffn_norm, h));
//   }
//
// Hooks belong to one module instance (not its type) and live as long as
// it does. Registering and calling are thread-safe (the local backend runs
// one model per rank thread).
#pragma once

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace dtensor::nn {

// Maps a module's first argument before its forward() runs.
using ForwardPreHook = std::function<at::Tensor(const at::Tensor& input)>;
// Maps a module's output after its forward() ran.
using ForwardHook = std::function<at::Tensor(const at::Tensor& output)>;

// Adds a hook that `call` runs on `module`'s first argument, after those
// registered before. `module` must be owned by a std::shared_ptr (every
// registered submodule and module holder is). Throws dtensor::Error otherwise.
void register_forward_pre_hook(torch::nn::Module& module, ForwardPreHook hook);
// Adds a hook that `call` runs on `module`'s output, after those registered
// before.
void register_forward_hook(torch::nn::Module& module, ForwardHook hook);
// Removes every hook of `module`.
void remove_forward_hooks(const torch::nn::Module& module);
// Whether `module` has hooks.
bool has_forward_hooks(const torch::nn::Module& module);

// `input` through `module`'s pre-hooks, in order.
at::Tensor run_forward_pre_hooks(const torch::nn::Module& module, at::Tensor input);
// `output` through `module`'s hooks, in order.
at::Tensor run_forward_hooks(const torch::nn::Module& module, at::Tensor output);

// The modules `call` is running on the calling thread, outermost first: what
// a debug trace (dtensor/debug/trace.h) groups ops by.
const std::vector<const torch::nn::Module*>& modules_being_called();

namespace nn_internal {
// Marks `module` as being called on this thread while it lives.
class ScopedModuleCall {
 public:
  explicit ScopedModuleCall(const torch::nn::Module& module);
  ~ScopedModuleCall();
  ScopedModuleCall(const ScopedModuleCall&) = delete;
  ScopedModuleCall& operator=(const ScopedModuleCall&) = delete;
};

// The module a holder or a shared_ptr points to (holders' operator-> is const
// on const holders, forward() is not).
template <typename Impl>
Impl& module_of(const torch::nn::ModuleHolder<Impl>& holder) {
  return *holder.ptr();
}
template <typename Impl>
Impl& module_of(const std::shared_ptr<Impl>& module) {
  return *module;
}
}  // namespace nn_internal

// `module->forward(input, rest...)` with `module`'s hooks around it. `module`
// is a module holder (torch::nn::Linear) or a std::shared_ptr to a module.
template <typename ModulePointer, typename... Rest>
at::Tensor call(const ModulePointer& module, const at::Tensor& input, Rest&&... rest) {
  auto& self = nn_internal::module_of(module);
  const nn_internal::ScopedModuleCall in_call(self);
  return run_forward_hooks(
      self, self.forward(run_forward_pre_hooks(self, input), std::forward<Rest>(rest)...));
}

}  // namespace dtensor::nn
