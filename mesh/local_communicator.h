// Copyright 2026 The dtensor Authors.
//
// mesh/local_communicator.h: N ranks as threads of one process.
//
// The "local" backend runs every rank of a world as a thread and exchanges
// real data through the shared address space. It is what tests, examples and
// embedded users run on: no launcher, no network, exact same semantics as the
// other backends. Start the ranks with `run_ranks`; inside, the world is
// `make_world_communicator("local")` (or `local_world()`):
//
//   dtensor::run_ranks(4, [](int rank) {
//     auto world = dtensor::make_world_communicator("local");
//     at::Tensor t = at::full({2}, rank);
//     world->all_reduce(t, dtensor::ReduceOp::kSum);   // {6, 6} on every rank
//   });
//
// Because every rank is in one process, this backend also checks what the
// others cannot: at each collective all ranks compare what they were asked to
// do (call, dtype, root, reduce op, sizes and counts) and all of them throw
// the same dtensor::Error on a mismatch instead of hanging or corrupting data.
// When a rank's function throws, the ranks still waiting in a collective throw
// too ("rank R failed"), and run_ranks rethrows the first rank's exception.
// A collective waiting longer than DTENSOR_LOCAL_TIMEOUT_SECONDS (default 300)
// fails the whole world with a timeout error.
//
// A rank that reaches a collective before its peers polls for them, yielding
// its core, for up to 200 us and only then sleeps: small collectives take
// 10-35 us with 4 ranks on 2 cores, where sleeping at once and being woken
// cost 80-170 us (benchmarks/RESULTS.md, raw collectives).
#pragma once

#include <functional>
#include <memory>

#include <dtensor/mesh/communicator.h>

namespace dtensor {

// Runs `fn(rank)` on `world_size` threads, one per rank of a fresh local
// world, and returns when all have finished. Rethrows the exception of the
// first rank that failed.
void run_ranks(int world_size, const std::function<void(int rank)>& fn);

// The world communicator of the run_ranks call running the calling thread.
// Throws dtensor::Error outside run_ranks.
std::shared_ptr<Communicator> local_world();

}  // namespace dtensor
