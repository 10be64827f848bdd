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
// One cache per thread (the local backend runs ranks as threads), bounded: it
// keeps the propagation_cache_capacity() most recently used results (4096
// unless DTENSOR_PROPAGATION_CACHE_CAPACITY, read at first use, says
// otherwise) and empties itself when any registry changes (base/registry.h)
// or clear_propagation_cache() is called. Results are shared: one evicted
// while an op still runs with it stays valid.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>

#include <dtensor/base/lru_cache.h>
#include <dtensor/rules/propagation.h>
#include "absl/container/inlined_vector.h"

namespace dtensor {

// The spec of a DTensor argument, or null for a plain tensor: how the key
// reads DTensors, whose impl lives in a layer above (dispatch passes
// core's `dtensor_spec_or_null`).
using SpecOfTensor = const DTensorSpecPtr* (*)(const at::Tensor& tensor);

class PropagationKey {
 public:
  // The key of a call, or nullopt when an argument cannot be encoded exactly.
  // `mode_bits` distinguishes dispatch modes that change the result. The key
  // borrows the DTensor arguments' specs (a lookup costs no reference
  // counting): it is valid while they are, unless it holds them.
  static std::optional<PropagationKey> of(const c10::OperatorHandle& op,
                                          c10::ArrayRef<c10::IValue> arguments, uint64_t mode_bits,
                                          SpecOfTensor spec_of);

  // Takes shares of the specs the key borrows, so that it outlives the call.
  void hold_specs();
  bool holds_specs() const { return borrowed_.empty(); }

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
  absl::InlinedVector<const DTensorSpec*, 4> specs_;
  // Where the borrowed specs are owned (the arguments' DTensors); empty once
  // `held_` owns them.
  absl::InlinedVector<const DTensorSpecPtr*, 4> borrowed_;
  std::vector<DTensorSpecPtr> held_;
  absl::InlinedVector<int64_t, 24> words_;
  size_t hash_ = 0;
};

using PropagationPtr = std::shared_ptr<const Propagation>;

class PropagationCache {
 public:
  // The calling thread's cache, brought up to date with the registries and
  // the limits below.
  static PropagationCache& for_this_thread();

  // The result cached under `key`, now the most recently used; null when
  // absent.
  PropagationPtr find(const PropagationKey& key);
  // Caches `result` under `key`, which must hold its specs (evicting the
  // least recently used result when full), and returns it, or the result
  // cached there already.
  PropagationPtr insert(PropagationKey key, PropagationPtr result);
  int64_t size() const { return entries_.size(); }

 private:
  explicit PropagationCache(int64_t capacity) : entries_(capacity) {}

  LruCache<PropagationKey, PropagationPtr> entries_;
};

inline constexpr int64_t kDefaultPropagationCacheCapacity = 4096;

// The number of results cached on the calling thread.
int64_t propagation_cache_size();
// How many results each thread's cache holds at most.
int64_t propagation_cache_capacity();
// Every thread's cache holds at most `capacity` results (at least 1;
// dtensor::Error otherwise) from its next use.
void set_propagation_cache_capacity(int64_t capacity);
// Empties every thread's cache at its next use.
void clear_propagation_cache();

}  // namespace dtensor
