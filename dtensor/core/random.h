// Copyright 2026 The dtensor Authors.
//
// dtensor/core/random.h (<dtensor/core/random.h>): random ops on DTensors that equal one device's.
//
// Random ops on DTensors (dropout, rand_like, randn_like, bernoulli_,
// uniform_, normal_ and the other in-place samplers) draw from one generator
// per rank, seeded with the same value on every rank. Each op draws the
// *global* tensor on the CPU, exactly as one device would, and keeps the
// calling rank's part of it, so the result equals the single-device op run
// after `at::manual_seed(seed)` on the CPU, whatever the mesh and placements
// (for CUDA meshes the values are the CPU generator's, copied to the device).
// The price is drawing every element on every rank.
//
//   dtensor::manual_seed(1234);                 // on every rank, same seed
//   at::Tensor y = at::dropout(x_dtensor, 0.1, /*train=*/true);
//
// "Rank" means the caller's thread on the local backend (each run_ranks
// thread seeds its own generator) and the process under MPI and NCCL. An op
// given an explicit generator uses it instead; it must then be in the same
// state on every rank. Without either, a random op on a DTensor throws:
// unseeded ranks would draw different numbers and silently disagree.
#pragma once

#include <cstdint>

#include <ATen/core/Generator.h>

namespace dtensor {

// Seeds the calling rank's DTensor generator (a CPU generator, as
// at::manual_seed seeds the default one).
void manual_seed(uint64_t seed);

// The calling rank's DTensor generator. Throws dtensor::Error when
// manual_seed has not been called on this rank.
at::Generator rank_generator();

}  // namespace dtensor
