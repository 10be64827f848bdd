// Copyright 2026 The dtensor Authors.
#include <dtensor/spmd/type_table.h>

#include <algorithm>
#include <utility>

#include <dtensor/base/check.h>

namespace dtensor::spmd {

namespace {

bool has_origin(const at::Tensor& x) { return x.defined() && x.has_storage(); }

}  // namespace

void TypeTable::set(const at::Tensor& x, Types types) {
  DTENSOR_CHECK(static_cast<int64_t>(types.size()) == mesh_.ndim(),
                "spmd types: expected one per mesh dim of ", mesh_.to_string(), " (", mesh_.ndim(),
                "), found ", types.size());
  if (!x.defined()) return;
  if (++sets_since_sweep_ == kSetsBetweenSweeps) {
    sets_since_sweep_ = 0;
    sweep();
  }
  const auto [entry, inserted] = entries_.insert_or_assign(
      x.unsafeGetTensorImpl(), Entry{WeakImpl(x.getIntrusivePtr()), std::move(types)});
  if (!has_origin(x)) return;
  std::vector<const c10::TensorImpl*>& same_origin =
      by_origin_[Origin(x.storage().unsafeGetStorageImpl(), x.storage_offset())];
  if (!inserted)
    same_origin.erase(std::remove(same_origin.begin(), same_origin.end(), entry->first),
                      same_origin.end());
  same_origin.push_back(entry->first);
}

const Types* TypeTable::find(const at::Tensor& x) const {
  if (!x.defined()) return nullptr;
  const auto it = entries_.find(x.unsafeGetTensorImpl());
  return it != entries_.end() ? &it->second.types : find_same_view(x);
}

const Types* TypeTable::find_same_view(const at::Tensor& x) const {
  if (!has_origin(x)) return nullptr;
  const auto same_origin =
      by_origin_.find(Origin(x.storage().unsafeGetStorageImpl(), x.storage_offset()));
  if (same_origin == by_origin_.end()) return nullptr;
  for (auto it = same_origin->second.rbegin(); it != same_origin->second.rend(); ++it) {
    const Entry& entry = entries_.at(*it);
    // A live entry's storage is alive too, so its address is not reused.
    if (entry.impl.expired()) continue;
    const c10::TensorImpl& typed = **it;
    if (typed.storage().unsafeGetStorageImpl() == x.storage().unsafeGetStorageImpl() &&
        typed.storage_offset() == x.storage_offset() && typed.sizes() == x.sizes() &&
        typed.strides() == x.strides()) {
      return &entry.types;
    }
  }
  return nullptr;
}

void TypeTable::sweep() {
  absl::erase_if(entries_, [](const auto& entry) { return entry.second.impl.expired(); });
  for (auto& [origin, impls] : by_origin_) {
    impls.erase(
        std::remove_if(impls.begin(), impls.end(),
                       [&](const c10::TensorImpl* impl) { return !entries_.contains(impl); }),
        impls.end());
  }
  absl::erase_if(by_origin_, [](const auto& origin) { return origin.second.empty(); });
}

}  // namespace dtensor::spmd
