// Copyright 2026 The dtensor Authors.
//
// rules/propagation_cache.h (<dtensor/rules/propagation_cache.h>): propagation results cached per
// (operator, input specs, non-tensor arguments).
//
// The key holds the op, the spec of every DTensor argument, and an exact
// encoding of everything else in the call: every scalar, int list, string,
// dtype and None, and the dtype and shape of plain tensors. A view's shape
// argument, a reduction's dims and keepdim are therefore all in the key: two
// calls share a result only when the rule would see the same thing. Values
// that cannot be encoded exactly make the call uncacheable (it propagates
// every time) rather than risk a wrong hit.
//
// One cache per thread (the local backend runs ranks as threads); it empties
// itself when any registry changes (base/registry.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include <ATen/core/dispatch/Dispatcher.h>

#include <dtensor/rules/propagation.h>
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"

namespace dtensor {

// The spec of a DTensor argument, or null for a plain tensor: how the key
// reads DTensors, whose impl lives in a layer above (dispatch passes
// core's `dtensor_spec_or_null`).
using SpecOfTensor = const DTensorSpecPtr* (*)(const at::Tensor& tensor);

class PropagationKey {
 public:
  // The key of a call, or nullopt when an argument cannot be encoded exactly.
  // `mode_bits` distinguishes dispatch modes that change the result.
  static std::optional<PropagationKey> of(const c10::OperatorHandle& op,
                                          c10::ArrayRef<c10::IValue> arguments, uint64_t mode_bits,
                                          SpecOfTensor spec_of);

  friend bool operator==(const PropagationKey& a, const PropagationKey& b);
  template <typename H>
  friend H AbslHashValue(H h, const PropagationKey& key) {
    return H::combine(std::move(h), key.hash_);
  }

 private:
  PropagationKey() = default;
  bool encode(const c10::IValue& value, SpecOfTensor spec_of);
  void encode_tensor(const at::Tensor& tensor, SpecOfTensor spec_of);

  const void* op_ = nullptr;
  absl::InlinedVector<DTensorSpecPtr, 4> specs_;
  absl::InlinedVector<int64_t, 24> words_;
  size_t hash_ = 0;
};

class PropagationCache {
 public:
  // The calling thread's cache.
  static PropagationCache& for_this_thread();

  const Propagation* find(const PropagationKey& key);
  const Propagation* insert(PropagationKey key, std::unique_ptr<Propagation> result);
  size_t size() const { return entries_.size(); }
  void clear() { entries_.clear(); }

 private:
  void drop_if_stale();

  uint64_t generation_ = 0;
  absl::flat_hash_map<PropagationKey, std::unique_ptr<Propagation>> entries_;
};

}  // namespace dtensor
