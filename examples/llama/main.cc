// Copyright 2026 The dtensor Authors.
//
// Trains the Llama-style model of examples/llama under each parallel plan on
// 4 ranks of the local backend (no launcher), beside the same training on
// one device, and prints every step's loss, its agreement with one device
// and the collectives it ran.
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

void run(LlamaPlan plan, std::vector<int64_t> shape, std::vector<std::string> names) {
  dtensor::run_ranks(4, [&](int rank) {
    const dtensor::DeviceMesh mesh = dtensor::init_device_mesh("local", shape, names);
    const auto steps = dtensor::examples::train_llama(mesh, plan, {});
    if (rank != 0) return;
    std::printf("%s on %s:\n", dtensor::examples::plan_name(plan).c_str(),
                mesh.to_string().c_str());
    for (size_t s = 0; s < steps.size(); ++s) {
      std::printf(
          "  step %zu: loss %.6f (one device %.6f)  max |grad diff| %.1e  collectives: %s\n", s,
          steps[s].loss, steps[s].reference_loss, steps[s].max_grad_diff,
          collectives_text(steps[s].collectives).c_str());
    }
  });
}

}  // namespace

int main() {
  run(LlamaPlan::kTensorParallel, {4}, {"tp"});
  run(LlamaPlan::kSequenceParallel, {4}, {"tp"});
  run(LlamaPlan::kLossParallel, {4}, {"tp"});
  run(LlamaPlan::kTensorParallel, {2, 2}, {"dp", "tp"});
  return 0;
}
