// Copyright 2026 The dtensor Authors.
//
// dtensor/core/tensor_impl.h (<dtensor/core/tensor_impl.h>): the TensorImpl that makes a DTensor an
// at::Tensor.
//
// A `DTensorImpl` holds the calling rank's local shard and the spec, and
// reports the *global* sizes, strides, dtype and the local shard's device. It
// carries a private dispatch key (`kDTensorDispatchKey`) plus the matching
// autograd key, so ATen calls on it reach dtensor's boxed kernel
// (dtensor/dispatch/) below libtorch's autograd, which therefore
// differentiates through DTensors unchanged. It has no storage of its own:
// asking for its data pointer throws.
//
// Users rarely touch it directly; `dtensor::DTensor` (dtensor/dtensor.h) is
// the handle they use, and `is_dtensor(t)` tells a wrapped tensor apart.
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/TensorImpl.h>
#include <c10/util/DimVector.h>

#include <ATen/core/Tensor.h>

#include <dtensor/core/pending_work.h>
#include <dtensor/placements/spec.h>

namespace dtensor {

// The backend key DTensors carry. Its autograd counterpart is added by
// TensorImpl itself.
constexpr c10::DispatchKey kDTensorDispatchKey = c10::DispatchKey::PrivateUse3;

class DTensorImpl final : public c10::TensorImpl {
 public:
  // `local` may be non-contiguous (views); its sizes must be the spec's local
  // shape. Throws dtensor::Error otherwise.
  DTensorImpl(at::Tensor local, DTensorSpecPtr spec);

  // The shard. After an async redistribute the first call orders the current
  // stream after the pending collectives (dtensor/core/pending_work.h).
  const at::Tensor& local() const {
    if (has_pending_.load(std::memory_order_acquire)) settle();
    return local_;
  }
  const DTensorSpecPtr& spec() const { return spec_; }

  // Attaches work the shard waits for on first use (async redistribute).
  void set_pending(std::shared_ptr<const PendingWork> work);
  // Whether no attached work is still running on the device.
  bool ready() const;
  // In-place views (t_, squeeze_) change what the DTensor is: a new shard
  // and spec, checked like the constructor's, and the global sizes follow.
  void replace(at::Tensor local, DTensorSpecPtr spec);

  // A view op whose input had to be redistributed first returns a copy,
  // not a view: a write through it would not reach `source` (the DTensor
  // viewed). Marks this DTensor as such a copy; `how` says how it was made,
  // for the error a write raises while `source` lives.
  void mark_copied_view(const at::TensorBase& source, std::string how);
  // Takes `other`'s mark: a view of a copied view is one too.
  void inherit_copied_view(const DTensorImpl& other);
  // Why writing into this DTensor would be lost, when it would: it is a
  // copied view whose source is still alive (autograd's view tracking keeps
  // it alive as the base, outside inference mode). Null otherwise.
  const std::string* lost_write_reason() const;

  // Forms of this DTensor with some of its pending sums reduced (Partial ->
  // Replicate or Shard on those mesh dims, nothing else changed), made by
  // the dispatcher when an op needed them: later ops take a remembered form
  // instead of reducing again, as a hand-written plan reduces a value once
  // for all its uses. Valid while neither this DTensor nor its shard has been
  // written since (version counters); held until then or until this DTensor
  // dies, at most kMaxReducedForms (each no larger than this shard). Only
  // the rank's own thread uses them.
  static constexpr size_t kMaxReducedForms = 4;
  void remember_reduced_form(at::Tensor form);
  // The remembered form laid out as `placements`; null when none is valid.
  const at::Tensor* reduced_form(const std::vector<PlacementPtr>& placements) const;
  // The remembered form with every pending sum reduced to Replicate; null
  // when none is valid.
  const at::Tensor* fully_reduced_form() const;

  // A view of a DTensor with pending sums (the transpose of a gradient that
  // autograd's mm backward takes, say) remembers the DTensor it views and how
  // its shard is made from that DTensor's shard, so that reducing the view
  // reduces the viewed DTensor once for both (dtensor/dispatch/op_runner.cc).
  using ShardView = std::function<at::Tensor(const at::Tensor& viewed_shard)>;
  void remember_view_origin(const at::Tensor& viewed, ShardView view);
  struct ViewOrigin {
    at::Tensor viewed;
    std::shared_ptr<const ShardView> view;
  };
  // The remembered origin while both DTensors live and neither has been
  // written or given another shard since; nullopt otherwise.
  std::optional<ViewOrigin> view_origin() const;

  // Autograd detaches gradients through these; they keep the local shard
  // (and the copied-view mark).
  c10::intrusive_ptr<c10::TensorImpl> shallow_copy_and_detach(
      const c10::VariableVersion& version_counter,
      bool allow_tensor_metadata_change) const override;
  c10::intrusive_ptr<c10::TensorImpl> shallow_copy_and_detach(
      c10::VariableVersion&& version_counter, bool allow_tensor_metadata_change) const override;
  void shallow_copy_from(const c10::intrusive_ptr<c10::TensorImpl>& impl) override;
  // Runs when the last strong reference goes; weak ones (a copied view's
  // mark) keep the object, so the shard is freed here, not in the destructor.
  void release_resources() override;

 private:
  const char* tensorimpl_type_name() const override { return "dtensor::DTensorImpl"; }
  template <typename Version>
  c10::intrusive_ptr<c10::TensorImpl> detached_copy(Version&& version_counter,
                                                    bool allow_tensor_metadata_change) const;
  void check_and_refresh();
  void settle() const;
  std::shared_ptr<const PendingWork> pending() const;

  at::Tensor local_;
  DTensorSpecPtr spec_;
  // Guarded by pending_mutex_; has_pending_ lets local() skip the lock.
  mutable std::mutex pending_mutex_;
  mutable std::shared_ptr<const PendingWork> pending_;
  mutable std::atomic<bool> has_pending_{false};
  // Set by mark_copied_view.
  using WeakImpl = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
  WeakImpl view_source_{c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>()};
  std::string view_note_;
  // Set by remember_view_origin: the viewed DTensor, the view, and what
  // must not have changed since: the versions of both DTensors and of their
  // shards, and the shards themselves (held, so that a shard replaced by
  // set_data is never mistaken for a new one at the same address).
  struct Origin {
    WeakImpl viewed{c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>()};
    std::shared_ptr<const ShardView> view;
    at::Tensor own_shard;
    at::Tensor viewed_shard;
    std::array<int64_t, 4> versions{};
  };
  std::array<int64_t, 4> origin_versions(const DTensorImpl& viewed) const;
  Origin origin_;
  // Set by remember_reduced_form: the forms (DTensors) and the versions of
  // this DTensor and of its shard they were made at.
  bool reduced_forms_valid() const;
  std::vector<at::Tensor> reduced_forms_;
  uint32_t reduced_version_ = 0;
  int64_t reduced_local_version_ = 0;
};

// Whether `tensor` is a DTensor (its impl is a DTensorImpl).
bool is_dtensor(const at::Tensor& tensor);
// The spec of a DTensor, null for any other tensor (one type check).
const DTensorSpecPtr* dtensor_spec_or_null(const at::Tensor& tensor);
// The DTensorImpl of `tensor`; throws dtensor::Error when it is not a DTensor.
DTensorImpl* dtensor_impl(const at::Tensor& tensor);
// Wraps `local` and `spec` into a new DTensor at::Tensor (no autograd history).
at::Tensor make_dtensor_tensor(at::Tensor local, DTensorSpecPtr spec);

// Global strides for a DTensor whose shard is `local`: the row-major strides
// of the global shape, taken in the order of the local strides, so a
// transposed shard gives a transposed (non-contiguous) DTensor and an
// expanded dim keeps stride 0. `min_local_sizes` (DTensorSpec) says which
// dims every rank holds more than one index of: only those are ordered by
// stride, so that every rank reports the same strides (a 1-wide shard's
// strides say nothing about the order of that dim).
c10::DimVector global_strides_like(const at::Tensor& local,
                                   const std::vector<int64_t>& global_shape,
                                   const std::vector<int64_t>& min_local_sizes);

}  // namespace dtensor
