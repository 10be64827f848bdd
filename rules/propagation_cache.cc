// Copyright 2026 The dtensor Authors.
#include <dtensor/rules/propagation_cache.h>

#include <cstring>

#include <dtensor/base/check.h>
#include <dtensor/base/registry.h>
#include "absl/hash/hash.h"

namespace dtensor {
namespace {

// Tags keep encodings of different types apart ([1], [2] vs [1, 2]).
enum Tag : int64_t {
  kDTensor = 1,
  kPlainTensor,
  kUndefinedTensor,
  kList,
  kNone,
  kInt,
  kDouble,
  kBool,
  kString,
  kDevice,
  kComplex,
  kGenerator,
};

int64_t bits_of(double value) {
  int64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

}  // namespace

std::optional<PropagationKey> PropagationKey::of(const c10::OperatorHandle& op,
                                                 c10::ArrayRef<c10::IValue> arguments,
                                                 uint64_t mode_bits, SpecOfTensor spec_of) {
  PropagationKey key;
  key.op_ = &op.operator_name();
  key.words_.push_back(static_cast<int64_t>(mode_bits));
  for (const c10::IValue& value : arguments) {
    if (!key.encode(value, spec_of)) return std::nullopt;
  }
  size_t h = absl::HashOf(key.op_, absl::Span<const int64_t>(key.words_.data(), key.words_.size()));
  for (const DTensorSpec* spec : key.specs_) h = absl::HashOf(h, spec->hash());
  key.hash_ = h;
  return key;
}

void PropagationKey::hold_specs() {
  for (const DTensorSpecPtr* spec : borrowed_) held_.push_back(*spec);
  borrowed_.clear();
}

void PropagationKey::encode_tensor(const at::Tensor& tensor, SpecOfTensor spec_of) {
  if (!tensor.defined()) {
    words_.push_back(kUndefinedTensor);
  } else if (const DTensorSpecPtr* spec = spec_of(tensor)) {
    words_.push_back(kDTensor);
    specs_.push_back(spec->get());
    borrowed_.push_back(spec);
  } else {
    words_.push_back(kPlainTensor);
    words_.push_back(static_cast<int64_t>(tensor.scalar_type()));
    words_.push_back(static_cast<int64_t>(tensor.device().type()));
    words_.push_back(tensor.dim());
    for (int64_t size : tensor.sizes()) words_.push_back(size);
  }
}

bool PropagationKey::encode(const c10::IValue& value, SpecOfTensor spec_of) {
  if (value.isTensor()) {
    encode_tensor(value.toTensor(), spec_of);
  } else if (value.isNone()) {
    words_.push_back(kNone);
  } else if (value.isInt()) {
    words_.insert(words_.end(), {kInt, value.toInt()});
  } else if (value.isDouble()) {
    words_.insert(words_.end(), {kDouble, bits_of(value.toDouble())});
  } else if (value.isBool()) {
    words_.insert(words_.end(), {kBool, value.toBool()});
  } else if (value.isComplexDouble()) {
    const c10::complex<double> z = value.toComplexDouble();
    words_.insert(words_.end(), {kComplex, bits_of(z.real()), bits_of(z.imag())});
  } else if (value.isString()) {
    const std::string& s = value.toStringRef();
    words_.insert(words_.end(), {kString, static_cast<int64_t>(s.size())});
    for (char c : s) words_.push_back(c);
  } else if (value.isDevice()) {
    words_.insert(words_.end(), {kDevice, static_cast<int64_t>(value.toDevice().type()),
                                 value.toDevice().index()});
  } else if (value.isGenerator()) {
    // Identity only: another generator is another key.
    words_.insert(
        words_.end(),
        {kGenerator, reinterpret_cast<intptr_t>(value.toGenerator().unsafeGetGeneratorImpl())});
  } else if (value.isList()) {
    const auto elements = value.toListRef();
    words_.insert(words_.end(), {kList, static_cast<int64_t>(elements.size())});
    for (const c10::IValue& element : elements) {
      if (!encode(element, spec_of)) return false;
    }
  } else {
    return false;
  }
  return true;
}

bool operator==(const PropagationKey& a, const PropagationKey& b) {
  if (a.hash_ != b.hash_ || a.op_ != b.op_ || a.words_ != b.words_ ||
      a.specs_.size() != b.specs_.size()) {
    return false;
  }
  for (size_t i = 0; i < a.specs_.size(); ++i) {
    if (a.specs_[i] != b.specs_[i] && *a.specs_[i] != *b.specs_[i]) return false;
  }
  return true;
}

namespace {

CacheLimits& propagation_cache_limits() {
  static CacheLimits limits("DTENSOR_PROPAGATION_CACHE_CAPACITY", kDefaultPropagationCacheCapacity);
  return limits;
}

}  // namespace

PropagationCache& PropagationCache::for_this_thread() {
  thread_local PropagationCache cache(propagation_cache_limits().capacity());
  cache.entries_.sync(propagation_cache_limits(), registries_generation());
  return cache;
}

PropagationPtr PropagationCache::find(const PropagationKey& key) {
  const PropagationPtr* found = entries_.find(key);
  return found == nullptr ? nullptr : *found;
}

PropagationPtr PropagationCache::insert(PropagationKey key, PropagationPtr result) {
  DTENSOR_CHECK(key.holds_specs(), "PropagationCache::insert: internal: the key borrows its specs");
  return entries_.insert(std::move(key), std::move(result));
}

int64_t propagation_cache_size() { return PropagationCache::for_this_thread().size(); }

int64_t propagation_cache_capacity() { return propagation_cache_limits().capacity(); }

void set_propagation_cache_capacity(int64_t capacity) {
  propagation_cache_limits().set_capacity(capacity);
}

void clear_propagation_cache() { propagation_cache_limits().clear_all(); }

}  // namespace dtensor
