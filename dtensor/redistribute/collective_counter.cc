// Copyright 2026 The dtensor Authors.
#include <dtensor/redistribute/collective_counter.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include <dtensor/redistribute/trace_sink.h>

namespace dtensor {
namespace {

thread_local CollectiveCounter* innermost_counter = nullptr;

// Every live counter of the process, for collectives recorded on libtorch's
// device threads; the mutex also orders those records with the owners'.
std::mutex& live_mutex() {
  static std::mutex mutex;
  return mutex;
}
std::vector<CollectiveCounter*>& live_counters() {
  static std::vector<CollectiveCounter*> counters;
  return counters;
}

}  // namespace

CollectiveCounter::CollectiveCounter() : outer_(innermost_counter) {
  innermost_counter = this;
  const std::lock_guard<std::mutex> lock(live_mutex());
  live_counters().push_back(this);
}

CollectiveCounter::~CollectiveCounter() {
  innermost_counter = outer_;
  const std::lock_guard<std::mutex> lock(live_mutex());
  std::vector<CollectiveCounter*>& live = live_counters();
  live.erase(std::find(live.begin(), live.end(), this));
}

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

void CollectiveCounter::record(std::string_view collective, const at::Tensor& input,
                               int64_t began_ns) {
  record(collective, static_cast<int64_t>(input.nbytes()), input.is_cuda(), began_ns);
}

void CollectiveCounter::record(std::string_view collective, int64_t input_bytes, bool input_is_cuda,
                               int64_t began_ns) {
  if (TraceSink* sink = trace_sink()) {
    const int64_t now = trace_clock_ns();
    sink->on_collective(
        {std::string(collective), input_bytes, {began_ns < 0 ? now : began_ns, now}});
  }
  const auto add = [&](CollectiveCounter& counter) {
    ++counter.counts_[std::string(collective)];
    counter.bytes_[std::string(collective)] += input_bytes;
  };
  if (innermost_counter != nullptr) {
    const std::lock_guard<std::mutex> lock(live_mutex());
    for (CollectiveCounter* c = innermost_counter; c != nullptr; c = c->outer_) add(*c);
  } else if (input_is_cuda) {
    const std::lock_guard<std::mutex> lock(live_mutex());
    for (CollectiveCounter* counter : live_counters()) add(*counter);
  }
}

}  // namespace dtensor
