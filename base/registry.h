// Copyright 2026 The dtensor Authors.
//
// base/registry.h (<dtensor/base/registry.h>): the one shape of every
// extension point.
//
// Strategies, decompositions and local kernels by operator, transitions by
// placement pair, placement parsers by name, parallel styles by name: each is
// a `Registry<Value>` with the same four verbs.
//
//   dtensor::strategies().add("aten::mm", my_strategy);          // register
//   dtensor::strategies().override("aten::mm", my_strategy);     // replace
//   auto found = dtensor::strategies().find("aten::mm");         // look up
//   std::vector<std::string> ops = dtensor::strategies().keys(); // list
//
// A registry either joins values under a key (strategies of one op are
// offered together) or holds one value per key (a second `add` throws
// naming the key; `override` replaces on purpose). Built-in values register
// at load time, in the file that defines them:
//
//   DTENSOR_REGISTER(pointwise_strategies) {
//     dtensor::strategies().add("aten::relu", unary_strategy());
//   }
//
// Every change bumps `registries_generation()`, which the caches derived from
// registries (propagation results, plans) compare to drop what is stale.
// Thread-safe: lookups take a shared lock and return a snapshot.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <dtensor/base/check.h>

namespace dtensor {

// Bumped by every change to any registry.
uint64_t registries_generation();

namespace base_internal {
void bump_registries_generation();
}  // namespace base_internal

template <typename Value>
class Registry {
 public:
  enum class PerKey { kOneValue, kJoinedValues };
  // Throws dtensor::Error for a malformed key (after naming the registry).
  using KeyCheck = std::function<void(std::string_view what, std::string_view key)>;
  using Values = std::vector<Value>;

  // `what` names the registry in errors ("strategy registry").
  Registry(std::string what, PerKey per_key, KeyCheck check_key = nullptr)
      : what_(std::move(what)), per_key_(per_key), check_key_(std::move(check_key)) {}
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Registers `value` under `key`: joins the values already there, or, for a
  // registry of one value per key, throws when the key has one.
  void add(std::string_view key, Value value) {
    check(key);
    std::unique_lock lock(mutex_);
    std::shared_ptr<const Values>& slot = values_[std::string(key)];
    DTENSOR_CHECK(per_key_ == PerKey::kJoinedValues || slot == nullptr, what_, ": \"", key,
                  "\": expected one value per key, found one registered already (override it "
                  "to replace it)");
    auto joined = slot ? std::make_shared<Values>(*slot) : std::make_shared<Values>();
    joined->push_back(std::move(value));
    slot = std::move(joined);
    changed();
  }

  // Replaces every value under `key` by `value`.
  void override(std::string_view key, Value value) {
    check(key);
    std::unique_lock lock(mutex_);
    values_[std::string(key)] = std::make_shared<const Values>(Values{std::move(value)});
    changed();
  }

  // Removes every value under `key` (tests).
  void remove(std::string_view key) {
    std::unique_lock lock(mutex_);
    values_.erase(std::string(key));
    changed();
  }

  // The values under `key` in registration order (a snapshot), or null.
  std::shared_ptr<const Values> find(const std::string& key) const {
    std::shared_lock lock(mutex_);
    auto it = values_.find(key);
    return it == values_.end() ? nullptr : it->second;
  }
  std::shared_ptr<const Values> find(std::string_view key) const {
    return find(std::string(key));
  }
  std::shared_ptr<const Values> find(const char* key) const { return find(std::string(key)); }

  // Bumped by every change to this registry.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

  // Every key with a value, sorted (the same order on every rank).
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    {
      std::shared_lock lock(mutex_);
      for (const auto& entry : values_) out.push_back(entry.first);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  void changed() {
    generation_.fetch_add(1, std::memory_order_acq_rel);
    base_internal::bump_registries_generation();
  }

  void check(std::string_view key) const {
    DTENSOR_CHECK(!key.empty(), what_, ": expected a key, found an empty one");
    if (check_key_) check_key_(what_, key);
  }

  const std::string what_;
  const PerKey per_key_;
  const KeyCheck check_key_;
  // Guards values_. A std::shared_mutex: Abseil's lock types changed their
  // constructors between the Abseil versions dtensor builds with.
  mutable std::shared_mutex mutex_;
  absl::flat_hash_map<std::string, std::shared_ptr<const Values>> values_;
  std::atomic<uint64_t> generation_{0};
};

}  // namespace dtensor

// Runs the block once, when the library or program defining it loads. The
// one way built-in (and plugin) values join a registry.
#define DTENSOR_REGISTER(name)                                   \
  static void dtensor_register_##name();                         \
  [[maybe_unused]] static const bool dtensor_registered_##name = \
      (dtensor_register_##name(), true);                         \
  static void dtensor_register_##name()
