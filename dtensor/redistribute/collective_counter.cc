// Copyright 2026 The dtensor Authors.
#include <dtensor/redistribute/collective_counter.h>

namespace dtensor {
namespace {

thread_local CollectiveCounter* innermost_counter = nullptr;

}  // namespace

CollectiveCounter::CollectiveCounter() : outer_(innermost_counter) { innermost_counter = this; }

CollectiveCounter::~CollectiveCounter() { innermost_counter = outer_; }

int64_t CollectiveCounter::total() const {
  int64_t sum = 0;
  for (const auto& [name, count] : counts_) sum += count;
  return sum;
}

int64_t CollectiveCounter::count(std::string_view collective) const {
  auto it = counts_.find(collective);
  return it == counts_.end() ? 0 : it->second;
}

int64_t CollectiveCounter::total_bytes() const {
  int64_t sum = 0;
  for (const auto& [name, bytes] : bytes_) sum += bytes;
  return sum;
}

void CollectiveCounter::record(std::string_view collective, int64_t bytes) {
  for (CollectiveCounter* c = innermost_counter; c != nullptr; c = c->outer_) {
    ++c->counts_[std::string(collective)];
    c->bytes_[std::string(collective)] += bytes;
  }
}

}  // namespace dtensor
