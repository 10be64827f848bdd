// Copyright 2026 The dtensor Authors.
#include <dtensor/spmd/type_table.h>

#include <algorithm>
#include <optional>
#include <utility>

#include <dtensor/base/check.h>

namespace dtensor::spmd {

namespace {

// Where `x`'s elements live, when it has strided storage of its own.
const c10::StorageImpl* storage_of(const c10::TensorImpl& x) {
  if (x.layout() != at::kStrided || !x.has_storage()) return nullptr;
  return x.unsafe_storage().unsafeGetStorageImpl();
}

// The bytes [first, last] of its storage `x` can touch; nullopt for none.
std::optional<std::pair<int64_t, int64_t>> byte_span(const c10::TensorImpl& x) {
  if (x.numel() == 0) return std::nullopt;
  int64_t low = x.storage_offset(), high = x.storage_offset();
  for (int64_t d = 0; d < x.dim(); ++d) {
    const int64_t reach = (x.sizes()[d] - 1) * x.strides()[d];
    (reach < 0 ? low : high) += reach;
  }
  const auto item = static_cast<int64_t>(x.itemsize());
  return std::make_pair(low * item, (high + 1) * item - 1);
}

bool overlap(const c10::TensorImpl& a, const c10::TensorImpl& b) {
  const auto x = byte_span(a), y = byte_span(b);
  return x && y && x->first <= y->second && y->first <= x->second;
}

bool same_view(const c10::TensorImpl& a, const c10::TensorImpl& b) {
  return a.storage_offset() == b.storage_offset() && a.sizes() == b.sizes() &&
         a.strides() == b.strides();
}

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
  const c10::TensorImpl* impl = x.unsafeGetTensorImpl();
  const auto [entry, inserted] =
      entries_.insert_or_assign(impl, Entry{WeakImpl(x.getIntrusivePtr()), std::move(types)});
  const c10::StorageImpl* storage = storage_of(*impl);
  if (storage == nullptr) return;
  std::vector<const c10::TensorImpl*>& on_storage = by_storage_[storage];
  if (!inserted)
    on_storage.erase(std::remove(on_storage.begin(), on_storage.end(), impl), on_storage.end());
  on_storage.push_back(impl);
}

const Types* TypeTable::find(const at::Tensor& x) const {
  if (!x.defined()) return nullptr;
  const c10::TensorImpl& impl = *x.unsafeGetTensorImpl();
  const auto it = entries_.find(&impl);
  if (it != entries_.end()) return &it->second.types;
  for (const c10::TensorImpl* typed : live_on_storage_of(impl)) {
    if (same_view(*typed, impl)) return &entries_.at(typed).types;
  }
  return nullptr;
}

std::vector<TypeTable::Retype> TypeTable::retype_after_write(const std::string& op,
                                                             const at::Tensor& written,
                                                             const Types& types) const {
  std::vector<Retype> retypes;
  const c10::TensorImpl& impl = *written.unsafeGetTensorImpl();
  for (const c10::TensorImpl* other : live_on_storage_of(impl)) {
    if (other == &impl || !overlap(*other, impl)) continue;
    const Types& before = entries_.at(other).types;
    Types after = before;
    for (size_t m = 0; m < before.size(); ++m) {
      if (before[m] == types[m]) continue;
      const bool varying = (before[m] == Type::kReplicate && types[m] == Type::kVarying) ||
                           (before[m] == Type::kVarying && types[m] == Type::kReplicate);
      DTENSOR_CHECK(varying, op, " over mesh dim \"", mesh_.dim_names()[m], "\": writes ",
                    type_name(types[m]), " over memory a ", type_name(before[m]),
                    " tensor views, which would then hold two types; expected the tensors ",
                    "sharing that memory to have the written type (write into a tensor of its ",
                    "own, or convert the others first)");
      after[m] = Type::kVarying;
    }
    if (after != before) retypes.push_back({other, std::move(after)});
  }
  return retypes;
}

void TypeTable::apply(const std::vector<Retype>& retypes) {
  for (const Retype& retype : retypes) {
    const auto it = entries_.find(retype.impl);
    if (it != entries_.end()) it->second.types = retype.types;
  }
}

std::vector<const c10::TensorImpl*> TypeTable::live_on_storage_of(const c10::TensorImpl& x) const {
  std::vector<const c10::TensorImpl*> live;
  const c10::StorageImpl* storage = storage_of(x);
  const auto it = storage == nullptr ? by_storage_.end() : by_storage_.find(storage);
  if (it == by_storage_.end()) return live;
  for (auto typed = it->second.rbegin(); typed != it->second.rend(); ++typed) {
    // A live entry's storage is alive too, so its address is not reused;
    // an entry set again on new storage is listed under that one.
    if (entries_.at(*typed).impl.expired() || storage_of(**typed) != storage) continue;
    live.push_back(*typed);
  }
  return live;
}

void TypeTable::sweep() {
  absl::erase_if(entries_, [](const auto& entry) { return entry.second.impl.expired(); });
  for (auto& [storage, impls] : by_storage_) {
    impls.erase(
        std::remove_if(impls.begin(), impls.end(),
                       [&](const c10::TensorImpl* impl) { return !entries_.contains(impl); }),
        impls.end());
  }
  absl::erase_if(by_storage_, [](const auto& storage) { return storage.second.empty(); });
}

}  // namespace dtensor::spmd
