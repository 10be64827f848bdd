// Copyright 2026 The dtensor Authors.
//
// Trains the Llama-style model of examples/llama under each parallel plan on
// 4 ranks of the local backend (no launcher), of MPI
// (mpirun -np 4 build/examples/llama --backend=mpi) or of NCCL (--backend=nccl,
// the model and data on each rank's GPU), beside the same training
// on one device, and prints every step's loss, its agreement with one device
// and the collectives it ran. Exits 1 when a step differs from one device
// (float64: by more than 1e-9; with --dtype=float32, by more than 1e-4:
// libtorch 2.x's SDPA then picks a fused attention kernel, CUDA's under
// NCCL, the CPU flash one on the local and MPI backends).
#include <cmath>
#include <cstdio>
#include <optional>
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

// Whether every step of every plan run so far equalled one device (within
// the dtype's tolerance), on this process's rank 0.
bool all_equal_one_device = true;

struct Flags {
  std::string backend = "local";
  at::ScalarType dtype = at::kDouble;
};

void run(const Flags& flags, LlamaPlan plan, std::vector<int64_t> shape,
         std::vector<std::string> names) {
  const std::string& backend = flags.backend;
  const double tolerance = flags.dtype == at::kDouble ? 1e-9 : 1e-4;
  const auto train = [&](int rank) {
    const dtensor::DeviceMesh mesh = dtensor::init_device_mesh(backend, shape, names);
    dtensor::examples::LlamaTrainOptions options;
    options.dtype = flags.dtype;
    const auto steps = dtensor::examples::train_llama(mesh, plan, options);
    if (rank != 0) return;
    std::printf("%s on %s:\n", dtensor::examples::plan_name(plan).c_str(),
                mesh.to_string().c_str());
    for (size_t s = 0; s < steps.size(); ++s) {
      all_equal_one_device &= std::abs(steps[s].loss - steps[s].reference_loss) <= tolerance &&
                              steps[s].max_grad_diff <= tolerance &&
                              steps[s].max_param_diff <= tolerance;
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

// The flags, or nullopt (after saying why) for anything else.
std::optional<Flags> parse_flags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const std::string value = flag.substr(flag.find('=') + 1);
    if (flag.rfind("--backend=", 0) == 0 &&
        (value == "local" || value == "mpi" || value == "nccl")) {
      flags.backend = value;
    } else if (flag.rfind("--dtype=", 0) == 0 && (value == "float32" || value == "float64")) {
      flags.dtype = value == "float32" ? at::kFloat : at::kDouble;
    } else {
      std::fprintf(stderr,
                   "llama: expected --backend=local|mpi|nccl and --dtype=float32|float64, "
                   "found %s\n",
                   flag.c_str());
      return std::nullopt;
    }
  }
  return flags;
}

}  // namespace

// With no argument: 4 rank threads of the local backend, float64. Under
// mpirun -np 4: --backend=mpi or --backend=nccl.
int main(int argc, char** argv) {
  const std::optional<Flags> flags = parse_flags(argc, argv);
  if (!flags.has_value()) return 2;
  run(*flags, LlamaPlan::kTensorParallel, {4}, {"tp"});
  run(*flags, LlamaPlan::kSequenceParallel, {4}, {"tp"});
  run(*flags, LlamaPlan::kLossParallel, {4}, {"tp"});
  run(*flags, LlamaPlan::kPartialResidual, {4}, {"tp"});
  run(*flags, LlamaPlan::kTensorParallel, {2, 2}, {"dp", "tp"});
  run(*flags, LlamaPlan::kSequenceParallel, {2, 2}, {"dp", "tp"});
  run(*flags, LlamaPlan::kFullyShard, {4}, {"dp"});
  if (!all_equal_one_device) std::fprintf(stderr, "llama: a step differed from one device\n");
  return all_equal_one_device ? 0 : 1;
}
