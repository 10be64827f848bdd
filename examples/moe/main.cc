// Copyright 2026 The dtensor Authors.
//
// Trains the expert-parallel MoE layer of examples/moe on 4 ranks of the
// local backend (no launcher) or of MPI (mpirun -np 4 build/examples/moe
// --backend=mpi), beside the same layer on one device, and prints every
// step's loss, its agreement with one device and the collectives it ran.
// Exits 1 when a step differs from one device by more than 1e-9.
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>

#include <dtensor/mesh/local_communicator.h>
#include "examples/moe/moe.h"

namespace {

constexpr int kRanks = 4;
constexpr double kTolerance = 1e-9;

std::string collectives_text(const std::map<std::string, int64_t>& counts) {
  std::string text;
  for (const auto& [kind, count] : counts) {
    text += (text.empty() ? "" : ", ") + std::to_string(count) + " " + kind;
  }
  return text.empty() ? "none" : text;
}

// Trains on this rank and prints rank 0's steps; whether every step of this
// rank equalled one device.
bool train(const std::string& backend) {
  const dtensor::DeviceMesh mesh = dtensor::init_device_mesh(backend, {kRanks}, {"ep"});
  const auto steps = dtensor::examples::train_moe(mesh, {});
  bool equal = true;
  for (size_t s = 0; s < steps.size(); ++s) {
    equal &= std::abs(steps[s].loss - steps[s].reference_loss) <= kTolerance &&
             steps[s].max_grad_diff <= kTolerance && steps[s].max_param_diff <= kTolerance;
    if (mesh.get_local_rank("ep") != 0) continue;
    std::printf("step %zu: loss %.9f (one device %.9f)  max |grad diff| %.1e  collectives: %s\n", s,
                steps[s].loss, steps[s].reference_loss, steps[s].max_grad_diff,
                collectives_text(steps[s].collectives).c_str());
  }
  std::fflush(stdout);
  return equal;
}

}  // namespace

// With no argument: 4 rank threads of the local backend. Under mpirun -np 4:
// --backend=mpi.
int main(int argc, char** argv) {
  const std::string flag = argc > 1 ? argv[1] : "--backend=local";
  const std::string backend = flag.substr(flag.find('=') + 1);
  if (argc > 2 || flag.rfind("--backend=", 0) != 0 || (backend != "local" && backend != "mpi")) {
    std::fprintf(stderr, "moe: expected no argument or --backend=local|mpi, found %s\n",
                 argc > 2 ? argv[2] : flag.c_str());
    return 2;
  }
  bool equal = true;
  if (backend == "local") {
    std::mutex mutex;
    dtensor::run_ranks(kRanks, [&](int) {
      const bool mine = train(backend);
      const std::lock_guard<std::mutex> lock(mutex);
      equal &= mine;
    });
  } else {
    equal = train(backend);
  }
  if (!equal) std::fprintf(stderr, "moe: a step differed from one device\n");
  return equal ? 0 : 1;
}
