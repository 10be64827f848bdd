// Copyright 2026 The dtensor Authors.
#include <dtensor/spmd/type_table.h>

#include <utility>

#include <dtensor/base/check.h>

namespace dtensor::spmd {

void TypeTable::set(const at::Tensor& x, Types types) {
  DTENSOR_CHECK(static_cast<int64_t>(types.size()) == mesh_.ndim(),
                "spmd types: expected one per mesh dim of ", mesh_.to_string(), " (", mesh_.ndim(),
                "), found ", types.size());
  if (!x.defined()) return;
  if (++sets_since_sweep_ == kSetsBetweenSweeps) {
    sets_since_sweep_ = 0;
    absl::erase_if(entries_, [](const auto& entry) { return entry.second.impl.expired(); });
  }
  entries_.insert_or_assign(x.unsafeGetTensorImpl(),
                            Entry{WeakImpl(x.getIntrusivePtr()), std::move(types)});
}

const Types* TypeTable::find(const at::Tensor& x) const {
  if (!x.defined()) return nullptr;
  const auto it = entries_.find(x.unsafeGetTensorImpl());
  return it == entries_.end() ? nullptr : &it->second.types;
}

}  // namespace dtensor::spmd
