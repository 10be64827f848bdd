// Copyright 2026 The dtensor Authors.
//
// dtensor/redistribute/collective_counter.h: counts the collectives that
// redistribute runs on the calling thread, for tests and debugging.
//
//   dtensor::CollectiveCounter counter;
//   dt.redistribute(dtensor::parse_placements("S(1),S(0)"));
//   EXPECT_LE(counter.total(), 2);
//   counter.count("all_to_all_v");
//
// Counters nest: each counts what ran while it was alive. Every rank thread
// (local backend) or process counts its own.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace dtensor {

class CollectiveCounter {
 public:
  CollectiveCounter();
  ~CollectiveCounter();
  CollectiveCounter(const CollectiveCounter&) = delete;
  CollectiveCounter& operator=(const CollectiveCounter&) = delete;

  int64_t total() const;
  int64_t count(std::string_view collective) const;
  const std::map<std::string, int64_t, std::less<>>& by_collective() const { return counts_; }

  // Called by the redistribute executor for each collective step.
  static void record(std::string_view collective);

 private:
  std::map<std::string, int64_t, std::less<>> counts_;
  CollectiveCounter* outer_;
};

}  // namespace dtensor
