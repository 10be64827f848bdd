// Copyright 2026 The dtensor Authors.
//
// dtensor/redistribute/collective_counter.h
// (<dtensor/redistribute/collective_counter.h>): counts the collectives dtensor
// runs for DTensors on the calling thread, for tests and debugging: every
// redistribute step (those of ops' inputs and of the kernels that reduce
// through redistribute, dtensor/redistribute/reduce_terms.h, included), and
// the broadcast, scatter and shape check of distribute_tensor and
// from_local.
//
//   dtensor::CollectiveCounter counter;
//   dt.redistribute(dtensor::parse_placements("S(1),S(0)"));
//   EXPECT_LE(counter.total(), 2);
//   counter.count("all_to_all_v");
//
// Counters nest: each counts what ran while it was alive. Every rank thread
// (local backend) or process counts its own. libtorch runs the backward of
// CUDA tensors on its own device threads, which have no counter: a
// collective on CUDA tensors recorded there counts into every live counter
// of the process (under NCCL a process is one rank; the local backend, whose
// rank threads share a process, is CPU-only).
#pragma once

#include <ATen/core/Tensor.h>

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
  // Bytes of the calling rank's input buffers to the collectives, by kind
  // (an all-gather's shard, an all-reduce's or reduce-scatter's whole
  // buffer): what a hand-written plan's calls would be handed.
  const std::map<std::string, int64_t, std::less<>>& bytes_by_collective() const { return bytes_; }
  int64_t total_bytes() const;

  // Called for each collective with the rank's input buffer (its bytes are
  // counted): by the redistribute executor, and by distribute_tensor and
  // from_local for theirs. Also reported to the thread's trace sink
  // (dtensor/redistribute/trace_sink.h) as a span from `began_ns`
  // (trace_clock_ns(); negative: now) to now.
  static void record(std::string_view collective, const at::Tensor& input, int64_t began_ns = -1);
  // The same from what is counted of the input: its bytes and whether it is
  // on a CUDA device (for a caller that gave the input away).
  static void record(std::string_view collective, int64_t input_bytes, bool input_is_cuda,
                     int64_t began_ns = -1);

 private:
  std::map<std::string, int64_t, std::less<>> counts_;
  std::map<std::string, int64_t, std::less<>> bytes_;
  CollectiveCounter* outer_;
};

}  // namespace dtensor
