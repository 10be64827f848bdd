// Copyright 2026 The dtensor Authors.
//
// dtensor/spmd/type_table.h: where a ScopedTypeCheck (dtensor/spmd/types.h)
// keeps the SPMD types of the calling thread's local tensors. Internal to
// the spmd layer: the op kernel (op_types.cc) and the public calls
// (types.cc) share it.
#pragma once

#include <c10/core/DispatchKey.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/intrusive_ptr.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include <dtensor/mesh/device_mesh.h>
#include <dtensor/spmd/types.h>
#include "absl/container/flat_hash_map.h"

namespace dtensor::spmd {

// The key a scope adds to the calling thread's dispatch: a backend key, so
// that it outranks CPU and CUDA (the DTensor key, PrivateUse3, outranks it:
// DTensor ops run first and their local ops reach the checker).
constexpr c10::DispatchKey kTypeCheckKey = c10::DispatchKey::PrivateUse2;

// Types by tensor. An entry holds its tensor weakly: the tensor's memory is
// not reused while the entry lives, so a live tensor never finds a dead
// one's types; dead entries are swept from time to time. A tensor without an
// entry of its own takes the types of the newest live typed tensor viewing
// the same memory the same way (same storage, offset, sizes and strides):
// what autograd makes anew around a result (x.detach(), a view's shallow
// copy) keeps its types. A write retypes every typed tensor whose memory
// overlaps what it writes (see retype_after_write).
class TypeTable {
 public:
  explicit TypeTable(DeviceMesh mesh) : mesh_(std::move(mesh)) {}

  const DeviceMesh& mesh() const { return mesh_; }
  // Throws unless `types` has one entry per mesh dim.
  void set(const at::Tensor& x, Types types);
  // Null when `x` is untyped (or undefined).
  const Types* find(const at::Tensor& x) const;

  // The other typed tensors whose memory overlaps `written`'s, with the
  // types they take once `types` is written there: R meeting V is V
  // (replicated values are a case of varying ones). Throws, naming `op`,
  // for any other mix (a pending sum or an invariant written over memory of
  // another type would leave one tensor of two types). Nothing changes
  // until `apply` is called with the result, after the write.
  struct Retype {
    const c10::TensorImpl* impl;
    Types types;
  };
  std::vector<Retype> retype_after_write(const std::string& op, const at::Tensor& written,
                                         const Types& types) const;
  void apply(const std::vector<Retype>& retypes);

  // Whether ops are checked now (not inside a Pause).
  bool checking() const { return pauses_ == 0; }
  // While one lives, ops pass the checker unchecked. The key cannot simply
  // be excluded from dispatch: a backend key's exclusion drops its whole
  // functionality (Dense) for every tensor.
  class Pause {
   public:
    explicit Pause(TypeTable& table) : table_(table) { ++table_.pauses_; }
    ~Pause() { --table_.pauses_; }
    Pause(const Pause&) = delete;
    Pause& operator=(const Pause&) = delete;

   private:
    TypeTable& table_;
  };

 private:
  using WeakImpl = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
  struct Entry {
    WeakImpl impl;
    Types types;
  };
  static constexpr size_t kSetsBetweenSweeps = 4096;

  // The live typed tensors on `x`'s storage, newest first (none for a
  // tensor without strided storage).
  std::vector<const c10::TensorImpl*> live_on_storage_of(const c10::TensorImpl& x) const;
  void sweep();

  DeviceMesh mesh_;
  absl::flat_hash_map<const c10::TensorImpl*, Entry> entries_;
  // Typed tensors by storage, oldest first.
  absl::flat_hash_map<const c10::StorageImpl*, std::vector<const c10::TensorImpl*>> by_storage_;
  size_t sets_since_sweep_ = 0;
  int pauses_ = 0;
};

// The innermost scope's table on the calling thread; null when none.
TypeTable* current_type_table();

}  // namespace dtensor::spmd
