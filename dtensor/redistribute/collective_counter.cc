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

void CollectiveCounter::record(std::string_view collective) {
  for (CollectiveCounter* c = innermost_counter; c != nullptr; c = c->outer_) {
    ++c->counts_[std::string(collective)];
  }
}

}  // namespace dtensor
