// Copyright 2026 The dtensor Authors.
#include <dtensor/core/tensor_impl.h>

#include <algorithm>
#include <numeric>
#include <typeinfo>

#include <c10/util/strides.h>

#include <dtensor/base/check.h>
#include "absl/strings/str_join.h"

namespace dtensor {
DTensorImpl::DTensorImpl(at::Tensor local, DTensorSpecPtr spec)
    // TensorImpl adds the key's autograd counterpart (outside inference mode).
    : c10::TensorImpl(c10::DispatchKeySet(kDTensorDispatchKey), local.dtype(), local.device()),
      local_(std::move(local)),
      spec_(std::move(spec)) {
  set_storage_access_should_throw();
  check_and_refresh();
}

void DTensorImpl::replace(at::Tensor local, DTensorSpecPtr spec) {
  settle();  // the new shard views the old one: wait for its collectives first
  reduced_forms_.clear();
  local_ = std::move(local);
  spec_ = std::move(spec);
  check_and_refresh();
}

void DTensorImpl::check_and_refresh() {
  DTENSOR_CHECK(spec_ != nullptr, "DTensor: expected a spec, found null");
  DTENSOR_CHECK(local_.scalar_type() == spec_->dtype(), "DTensor: local tensor dtype: expected ",
                spec_->dtype(), ", found ", local_.scalar_type());
  DTENSOR_CHECK(local_.sizes() == c10::IntArrayRef(spec_->local_layout().local_shape),
                "DTensor: local tensor shape: expected [",
                absl::StrJoin(spec_->local_layout().local_shape, ", "), "] for ",
                spec_->to_string(), ", found ", local_.sizes());
  DTENSOR_CHECK(!local_.requires_grad(),
                "DTensor: expected a local tensor without autograd history (use from_local to "
                "differentiate through the wrap)");
  const std::vector<int64_t>& shape = spec_->shape();
  if (local_.dim() == static_cast<int64_t>(shape.size())) {
    set_sizes_and_strides(shape, global_strides_like(local_, shape, spec_->min_local_sizes()));
  } else {
    // Ragged merging leading dims: the shard's dims are not the global dims.
    set_sizes_and_strides(shape, spec_->stride());
  }
}

template <typename Version>
c10::intrusive_ptr<c10::TensorImpl> DTensorImpl::detached_copy(
    Version&& version_counter, bool allow_tensor_metadata_change) const {
  auto copy = c10::make_intrusive<DTensorImpl>(local_, spec_);
  c10::TensorImpl::copy_tensor_metadata(this, copy.get(), std::forward<Version>(version_counter),
                                        allow_tensor_metadata_change);
  copy->set_pending(pending());  // autograd's detached copies wait too
  copy->inherit_copied_view(*this);
  return copy;
}

c10::intrusive_ptr<c10::TensorImpl> DTensorImpl::shallow_copy_and_detach(
    const c10::VariableVersion& version_counter, bool allow_tensor_metadata_change) const {
  return detached_copy(version_counter, allow_tensor_metadata_change);
}

c10::intrusive_ptr<c10::TensorImpl> DTensorImpl::shallow_copy_and_detach(
    c10::VariableVersion&& version_counter, bool allow_tensor_metadata_change) const {
  return detached_copy(std::move(version_counter), allow_tensor_metadata_change);
}

void DTensorImpl::shallow_copy_from(const c10::intrusive_ptr<c10::TensorImpl>& impl) {
  auto* other = dynamic_cast<DTensorImpl*>(impl.get());
  DTENSOR_CHECK(other != nullptr,
                "DTensor: can only take the data of another DTensor, found a plain tensor");
  c10::TensorImpl::copy_tensor_metadata(other, this, version_counter(),
                                        allow_tensor_metadata_change());
  settle();
  local_ = other->local_;
  spec_ = other->spec_;
  set_pending(other->pending());
  inherit_copied_view(*other);
}

void DTensorImpl::mark_copied_view(const at::TensorBase& source, std::string how) {
  view_source_ = WeakImpl(source.getIntrusivePtr());
  view_note_ = std::move(how);
}

void DTensorImpl::inherit_copied_view(const DTensorImpl& other) {
  // Most DTensors carry no mark (every view op's result asks): nothing to
  // lock or copy then.
  if (other.view_source_.expired()) {
    view_source_.reset();
    view_note_.clear();
    return;
  }
  // set_data(x.view(..)) on x itself would make x its own source.
  if (other.view_source_.lock().get() == this) return;
  view_source_ = other.view_source_;
  view_note_ = other.view_note_;
}

const std::string* DTensorImpl::lost_write_reason() const {
  return view_source_.expired() ? nullptr : &view_note_;
}

std::array<int64_t, 4> DTensorImpl::origin_versions(const DTensorImpl& viewed) const {
  return {version_counter().current_version(), local_._version(),
          viewed.version_counter().current_version(), viewed.local_._version()};
}

void DTensorImpl::remember_view_origin(const at::Tensor& viewed, ShardView view) {
  const DTensorImpl& impl = *dtensor_impl(viewed);
  origin_ =
      Origin{WeakImpl(viewed.getIntrusivePtr()), std::make_shared<const ShardView>(std::move(view)),
             local_, impl.local_, origin_versions(impl)};
}

std::optional<DTensorImpl::ViewOrigin> DTensorImpl::view_origin() const {
  if (!origin_.view) return std::nullopt;
  at::Tensor viewed(origin_.viewed.lock());
  if (!viewed.defined()) return std::nullopt;
  const DTensorImpl& impl = *dtensor_impl(viewed);
  if (!local_.is_same(origin_.own_shard) || !impl.local_.is_same(origin_.viewed_shard) ||
      origin_versions(impl) != origin_.versions) {
    return std::nullopt;
  }
  return ViewOrigin{std::move(viewed), origin_.view};
}

bool DTensorImpl::reduced_forms_valid() const {
  return reduced_version_ == version_counter().current_version() &&
         reduced_local_version_ == local_._version();
}

void DTensorImpl::remember_reduced_form(at::Tensor form) {
  if (!reduced_forms_valid() || reduced_forms_.size() == kMaxReducedForms) reduced_forms_.clear();
  reduced_forms_.push_back(std::move(form));
  reduced_version_ = version_counter().current_version();
  reduced_local_version_ = local_._version();
}

const at::Tensor* DTensorImpl::reduced_form(const std::vector<PlacementPtr>& placements) const {
  if (reduced_forms_.empty() || !reduced_forms_valid()) return nullptr;
  for (const at::Tensor& form : reduced_forms_) {
    if (same_placements(dtensor_impl(form)->spec()->placements(), placements)) return &form;
  }
  return nullptr;
}

const at::Tensor* DTensorImpl::fully_reduced_form() const {
  if (reduced_forms_.empty() || !reduced_forms_valid()) return nullptr;
  const std::vector<PlacementPtr>& mine = spec_->placements();
  for (const at::Tensor& form : reduced_forms_) {
    const std::vector<PlacementPtr>& theirs = dtensor_impl(form)->spec()->placements();
    bool replicated = true;
    for (size_t i = 0; i < mine.size(); ++i) {
      replicated = replicated && (!mine[i]->is_partial() || theirs[i]->is_replicate());
    }
    if (replicated) return &form;
  }
  return nullptr;
}

void DTensorImpl::release_resources() {
  local_ = at::Tensor();
  reduced_forms_.clear();
  // Unlocked: without a strong reference, no other thread can reach it.
  pending_.reset();
  view_source_.reset();
  if (origin_.view) origin_ = Origin();
  c10::TensorImpl::release_resources();
}

void DTensorImpl::set_pending(std::shared_ptr<const PendingWork> work) {
  std::lock_guard<std::mutex> lock(pending_mutex_);
  pending_ = std::move(work);
  has_pending_.store(pending_ != nullptr, std::memory_order_release);
}

std::shared_ptr<const PendingWork> DTensorImpl::pending() const {
  std::lock_guard<std::mutex> lock(pending_mutex_);
  return pending_;
}

bool DTensorImpl::ready() const {
  const std::shared_ptr<const PendingWork> work = pending();
  return work == nullptr || work->ready();
}

void DTensorImpl::settle() const {
  std::lock_guard<std::mutex> lock(pending_mutex_);
  if (pending_ == nullptr) return;
  pending_->wait(local_);
  pending_.reset();
  has_pending_.store(false, std::memory_order_release);
}

namespace {

// `impl` as a DTensorImpl, or null. DTensorImpl is final, so comparing type
// infos is exact, and cheaper than a dynamic_cast on every op's arguments.
DTensorImpl* as_dtensor_impl(c10::TensorImpl* impl) {
  return typeid(*impl) == typeid(DTensorImpl) ? static_cast<DTensorImpl*>(impl) : nullptr;
}

}  // namespace

bool is_dtensor(const at::Tensor& tensor) {
  return tensor.defined() && tensor.key_set().has(kDTensorDispatchKey) &&
         as_dtensor_impl(tensor.unsafeGetTensorImpl()) != nullptr;
}

const DTensorSpecPtr* dtensor_spec_or_null(const at::Tensor& tensor) {
  if (!tensor.defined() || !tensor.key_set().has(kDTensorDispatchKey)) return nullptr;
  const DTensorImpl* impl = as_dtensor_impl(tensor.unsafeGetTensorImpl());
  return impl == nullptr ? nullptr : &impl->spec();
}

DTensorImpl* dtensor_impl(const at::Tensor& tensor) {
  DTENSOR_CHECK(tensor.defined(), "expected a DTensor, found an undefined tensor");
  DTensorImpl* impl = as_dtensor_impl(tensor.unsafeGetTensorImpl());
  DTENSOR_CHECK(impl != nullptr, "expected a DTensor, found a plain tensor of shape ",
                tensor.sizes(), " on ", tensor.device());
  return impl;
}

at::Tensor make_dtensor_tensor(at::Tensor local, DTensorSpecPtr spec) {
  return at::Tensor(c10::make_intrusive<DTensorImpl>(std::move(local), std::move(spec)));
}

namespace {

// Dims outermost first. A dim that some rank holds at most one index of has
// a meaningless stride on that rank, so only dims every rank holds more of
// are ordered by their local strides (larger first, ties in dim order); the
// others go before the first ordered dim that follows them in dim order.
// Every rank then derives the same order from its own shard. Small vectors
// and an insertion sort, without allocating: a tensor has few dims, and
// every wrap of a non-contiguous shard (a transpose's) comes here.
c10::DimVector memory_order(const at::Tensor& local, const std::vector<int64_t>& min_local_sizes) {
  c10::DimVector order, unordered;
  const c10::IntArrayRef strides = local.strides();
  for (int64_t d = 0; d < local.dim(); ++d) {
    if (min_local_sizes[d] <= 1) {
      unordered.push_back(d);
      continue;
    }
    // After every dim of a larger or equal stride: stable, ties in dim order.
    auto slot = std::find_if(order.begin(), order.end(),
                             [&](int64_t o) { return strides[o] < strides[d]; });
    order.insert(slot, d);
  }
  for (int64_t d : unordered) {
    auto next = std::find_if(order.begin(), order.end(),
                             [&](int64_t o) { return min_local_sizes[o] > 1 && o > d; });
    order.insert(next, d);
  }
  return order;
}

}  // namespace

c10::DimVector global_strides_like(const at::Tensor& local,
                                   const std::vector<int64_t>& global_shape,
                                   const std::vector<int64_t>& min_local_sizes) {
  // The common case, without ordering dims: a contiguous non-empty shard
  // (its dims of more than one element have strictly falling strides, so
  // the order below is the dims' own). An empty one may carry any strides.
  if (local.numel() > 0 && local.is_contiguous()) return c10::contiguous_strides(global_shape);
  const int64_t ndim = static_cast<int64_t>(global_shape.size());
  const c10::DimVector order = memory_order(local, min_local_sizes);
  c10::DimVector strides(ndim, 0);
  int64_t running = 1;
  for (int64_t i = ndim - 1; i >= 0; --i) {
    const int64_t d = order[i];
    const bool expanded = min_local_sizes[d] > 1 && local.stride(d) == 0;
    strides[d] = expanded ? 0 : running;
    if (!expanded) running *= std::max<int64_t>(global_shape[d], 1);
  }
  return strides;
}

}  // namespace dtensor
