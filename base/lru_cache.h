// Copyright 2026 The dtensor Authors.
//
// base/lru_cache.h (<dtensor/base/lru_cache.h>): a bounded cache that drops
// its least recently used entry, and the process-wide limits of caches kept
// per thread.
//
// The library's caches (redistribute plans, propagation results) are kept per
// thread, because the local backend runs each rank as a thread. Each is an
// `LruCache` under one `CacheLimits`: a capacity every thread's cache keeps
// to, and a way to empty every thread's cache. A cache applies its limits and
// the generation of what its values derive from (base/registry.h) in `sync`,
// which it calls before each use:
//
//   LruCache<Key, std::shared_ptr<const Plan>, KeyHash, KeyEq>& cache = ...;
//   cache.sync(limits, transitions().generation());
//   if (const std::shared_ptr<const Plan>* hit = cache.find(key)) return *hit;
//   return cache.insert(std::move(key), make_plan());
//
// Values are meant to be shared_ptrs: a value evicted while a caller holds it
// stays valid for that caller. A hit moves one list node to the front and
// allocates nothing; an insert allocates one list node and may grow the index.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <utility>

#include <absl/container/flat_hash_set.h>
#include <absl/hash/hash.h>
#include <dtensor/base/check.h>

namespace dtensor {

// The limits shared by every thread's copy of one cache: how many entries each
// copy holds at most, and requests to empty them all. Thread-safe.
class CacheLimits {
 public:
  // `default_capacity` entries per thread, unless the environment variable
  // `env_var` holds another (a positive whole number; anything else throws
  // dtensor::Error naming the variable).
  CacheLimits(const char* env_var, int64_t default_capacity);

  int64_t capacity() const { return capacity_.load(std::memory_order_relaxed); }
  // Throws dtensor::Error unless `capacity` is at least 1. Every thread's
  // cache keeps to it from its next use.
  void set_capacity(int64_t capacity);

  // The number of `clear_all` calls so far.
  uint64_t clears() const { return clears_.load(std::memory_order_acquire); }
  // Empties every thread's cache at its next use.
  void clear_all() { clears_.fetch_add(1, std::memory_order_acq_rel); }

 private:
  std::atomic<int64_t> capacity_;
  std::atomic<uint64_t> clears_{0};
};

// At most `capacity()` entries: inserting into a full cache first evicts the
// entry used least recently (found or inserted). Lookups take any key type
// that `Hash` and `Eq` accept alongside `Key` (both must then declare
// `is_transparent`), so a lookup can borrow what a stored key owns. Not
// thread-safe: one per thread.
template <typename Key, typename Value, typename Hash = absl::Hash<Key>,
          typename Eq = std::equal_to<Key>>
class LruCache {
 public:
  explicit LruCache(int64_t capacity) { set_capacity(capacity); }
  // The index holds iterators into the list: never copied or moved.
  LruCache(const LruCache&) = delete;
  LruCache& operator=(const LruCache&) = delete;

  // The value under `key`, now the most recently used; nullptr when absent.
  template <typename K>
  const Value* find(const K& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    entries_.splice(entries_.begin(), entries_, *it);
    return &(*it)->second;
  }

  // Stores `value` under `key` as the most recently used entry, evicting the
  // least recently used one when the cache is full, and returns it. When
  // `key` is present already, keeps (and returns) the value stored.
  const Value& insert(Key key, Value value) {
    if (const Value* found = find(key)) return *found;
    while (size() >= capacity_) evict_least_recent();
    entries_.emplace_front(std::move(key), std::move(value));
    index_.insert(entries_.begin());
    return entries_.front().second;
  }

  int64_t size() const { return static_cast<int64_t>(entries_.size()); }
  int64_t capacity() const { return capacity_; }

  // Throws dtensor::Error unless `capacity` is at least 1; evicts the least
  // recently used entries beyond it.
  void set_capacity(int64_t capacity) {
    DTENSOR_CHECK(capacity >= 1, "cache capacity: expected at least 1 entry, found ", capacity);
    capacity_ = capacity;
    while (size() > capacity_) evict_least_recent();
  }

  void clear() {
    index_.clear();
    entries_.clear();
  }

  // Applies `limits` and the `generation` of what the values derive from:
  // empties the cache when either changed since the last call (a clear
  // requested, a registry changed), and keeps to the capacity. Costs two
  // comparisons when nothing changed.
  void sync(const CacheLimits& limits, uint64_t generation) {
    const uint64_t clears = limits.clears();
    if (generation != generation_ || clears != clears_) {
      clear();
      generation_ = generation;
      clears_ = clears;
    }
    if (limits.capacity() != capacity_) set_capacity(limits.capacity());
  }

 private:
  using Entry = std::pair<Key, Value>;
  using Iterator = typename std::list<Entry>::iterator;

  static const Key& key_of(Iterator it) { return it->first; }
  template <typename K>
  static const K& key_of(const K& key) {
    return key;
  }

  // The index hashes and compares the keys its iterators point to.
  struct IndexHash {
    using is_transparent = void;
    template <typename K>
    size_t operator()(const K& key) const {
      return Hash()(key_of(key));
    }
  };
  struct IndexEq {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return Eq()(key_of(a), key_of(b));
    }
  };

  void evict_least_recent() {
    index_.erase(std::prev(entries_.end()));
    entries_.pop_back();
  }

  int64_t capacity_ = 0;
  uint64_t generation_ = 0;
  uint64_t clears_ = 0;
  std::list<Entry> entries_;  // most recently used first
  absl::flat_hash_set<Iterator, IndexHash, IndexEq> index_;
};

}  // namespace dtensor
