// Copyright 2026 The dtensor Authors.
//
// tests/support/default_paths_communicator.h: a test backend that runs
// Communicator's default along-dim collectives and exchange.
//
// The local and MPI backends override those defaults (they move strided
// parts in place); NCCL runs them. This backend forwards only the flat
// collectives to the "local" backend, so the defaults NCCL relies on run,
// and are checked, on CPU:
//
//   run_ranks(4, [](int) {
//     auto world = dtensor::testing::default_paths_world();
//     dtensor::testing::run_all_collective_cases(*world);
//   });
//
// `register_default_paths_backend()` also makes it a named backend
// ("local_default_paths") for meshes: init_device_mesh("local_default_paths", ...).
#pragma once

#include <memory>

#include <dtensor/mesh/communicator.h>

namespace dtensor::testing {

// The calling run_ranks thread's world, through the default paths.
std::shared_ptr<Communicator> default_paths_world();

// Registers the backend under "local_default_paths" (once; later calls do nothing).
void register_default_paths_backend();

}  // namespace dtensor::testing
