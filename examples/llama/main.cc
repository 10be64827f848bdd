// Copyright 2026 The dtensor Authors.
//
// Trains the Llama-style model of examples/llama under each parallel plan on
// 4 ranks of the local backend (no launcher), of MPI
// (mpirun -np 4 build/examples/llama --backend=mpi) or of NCCL (--backend=nccl,
// the model and data on each rank's GPU), beside the same training
// on one device, and prints every step's loss, its agreement with one device
// and the collectives it ran. Exits 1 when a step differs from one device.
#include <cmath>
#include <cstdio>
#include <string>

#include <dtensor/mesh/local_communicator.h>
#include "examples/llama/llama_parallel.h"

namespace {

using dtensor::examples::LlamaPlan;

std::string collectives_text(const std::map<std::string, int64_t>& counts) {
  std::string text;
  for (const auto& [kind, count] : counts) {
    text += (text.empty() ? "" : ", ") + std::to_string(count) + " " + kind;
  }
  return text.empty() ? "none" : text;
}

// Whether every step of every plan run so far equalled one device (float64:
// within 1e-9), on this process's rank 0.
bool all_equal_one_device = true;

void run(const std::string& backend, LlamaPlan plan, std::vector<int64_t> shape,
         std::vector<std::string> names) {
  const auto train = [&](int rank) {
    const dtensor::DeviceMesh mesh = dtensor::init_device_mesh(backend, shape, names);
    const auto steps = dtensor::examples::train_llama(mesh, plan, {});
    if (rank != 0) return;
    std::printf("%s on %s:\n", dtensor::examples::plan_name(plan).c_str(),
                mesh.to_string().c_str());
    for (size_t s = 0; s < steps.size(); ++s) {
      all_equal_one_device &= std::abs(steps[s].loss - steps[s].reference_loss) <= 1e-9 &&
                              steps[s].max_grad_diff <= 1e-9 && steps[s].max_param_diff <= 1e-9;
      std::printf(
          "  step %zu: loss %.6f (one device %.6f)  max |grad diff| %.1e  collectives: %s\n", s,
          steps[s].loss, steps[s].reference_loss, steps[s].max_grad_diff,
          collectives_text(steps[s].collectives).c_str());
    }
    std::fflush(stdout);
  };
  if (backend == "local") {
    dtensor::run_ranks(4, train);
  } else {
    train(static_cast<int>(dtensor::init_device_mesh(backend, {4}).world()->rank()));
  }
}

}  // namespace

// With no argument: 4 rank threads of the local backend. Under mpirun -np 4:
// --backend=mpi or --backend=nccl.
int main(int argc, char** argv) {
  const std::string flag = argc > 1 ? argv[1] : "--backend=local";
  const std::string backend = flag.substr(flag.find('=') + 1);
  if (argc > 2 || flag.rfind("--backend=", 0) != 0 ||
      (backend != "local" && backend != "mpi" && backend != "nccl")) {
    std::fprintf(stderr, "llama: expected no argument or --backend=local|mpi|nccl, found %s\n",
                 argc > 2 ? argv[2] : flag.c_str());
    return 2;
  }
  run(backend, LlamaPlan::kTensorParallel, {4}, {"tp"});
  run(backend, LlamaPlan::kSequenceParallel, {4}, {"tp"});
  run(backend, LlamaPlan::kLossParallel, {4}, {"tp"});
  run(backend, LlamaPlan::kPartialResidual, {4}, {"tp"});
  run(backend, LlamaPlan::kTensorParallel, {2, 2}, {"dp", "tp"});
  run(backend, LlamaPlan::kSequenceParallel, {2, 2}, {"dp", "tp"});
  run(backend, LlamaPlan::kFullyShard, {4}, {"dp"});
  if (!all_equal_one_device) std::fprintf(stderr, "llama: a step differed from one device\n");
  return all_equal_one_device ? 0 : 1;
}
