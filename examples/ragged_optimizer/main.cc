// Copyright 2026 The dtensor Authors.
//
// ragged_optimizer: a Muon-style optimizer on 4 ranks of the in-process
// `local` backend (examples/ragged_optimizer/ragged_optimizer.h). Each step
// moves every parameter's momentum whole onto one owner rank with a one-hot
// Ragged placement, orthogonalizes it there, and moves the update back.
// Prints each step beside the same optimizer on one device; exits 1 if they
// disagree.
#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include <dtensor/mesh/local_communicator.h>
#include "examples/ragged_optimizer/ragged_optimizer.h"
#include "examples/support/one_device.h"

namespace {

using dtensor::examples::loss_matches;

constexpr double kParamDiffTolerance = 1e-5;
// The loss sums squares over every parameter: tens, so a larger absolute
// round-off than the other examples'.
constexpr double kLossAbsoluteTolerance = 1e-4;

bool agrees_with_one_device(const dtensor::examples::RaggedOptimizerStep& step) {
  if (!loss_matches(step.loss, step.reference_loss, kLossAbsoluteTolerance)) return false;
  for (const auto& u : step.updates) {
    if (!(u.max_param_diff < kParamDiffTolerance)) return false;
  }
  return true;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "x" : "") + std::to_string(shape[i]);
  return out;
}

}  // namespace

int main() {
  const dtensor::examples::RaggedOptimizerOptions options;
  std::atomic<bool> agree{true};
  dtensor::run_ranks(4, [&](int rank) {
    const dtensor::DeviceMesh mesh = dtensor::init_device_mesh("local", {4}, {"world"});
    const auto steps = dtensor::examples::run_ragged_optimizer(mesh, options);
    for (const auto& step : steps) {
      if (!agrees_with_one_device(step)) agree = false;
    }
    if (rank != 0) return;
    std::printf("Muon-style whole-matrix updates on %s\n", mesh.to_string().c_str());
    for (size_t s = 0; s < steps.size(); ++s) {
      std::printf("  step %zu: loss %.6f (one device %.6f)\n", s, steps[s].loss,
                  steps[s].reference_loss);
      for (size_t i = 0; i < steps[s].updates.size(); ++i) {
        const auto& u = steps[s].updates[i];
        const auto& p = options.parameters[i];
        std::printf(
            "    %-5s %-4s -> %-27s (rank 0 holds %s, %lld collectives) -> back "
            "(%lld)  max |param diff| %.2e\n",
            shape_string(p.shape).c_str(), p.placements.c_str(), u.whole_placements.c_str(),
            shape_string(u.whole_local_shape).c_str(),
            static_cast<long long>(u.collectives_to_owner),
            static_cast<long long>(u.collectives_back), u.max_param_diff);
      }
    }
  });
  std::printf(agree ? "whole-matrix updates match one device\n"
                    : "MISMATCH between distributed and one-device updates\n");
  return agree ? 0 : 1;
}
