// Copyright 2026 The dtensor Authors.
//
// fsdp_tp: trains the two-layer MLP with FSDP over tensor parallelism on a
// (dp=2, tp=2) mesh of the in-process `local` backend (examples/fsdp_tp/
// fsdp_tp.h), once with FSDP sharding dim 0 of every parameter and once with
// it sharding the dim TP split, and prints each step beside the same training
// on one device. Exits 1 if they disagree.
#include <atomic>
#include <cstdio>

#include <dtensor/mesh/local_communicator.h>
#include "examples/fsdp_tp/fsdp_tp.h"
#include "examples/support/one_device.h"

namespace {

// On gradients and updated parameters.
constexpr double kDiffTolerance = 1e-5;

void print_placements(const char* what, const dtensor::examples::ParameterPlacements& p) {
  std::printf("    %-13s", what);
  for (size_t i = 0; i < p.size(); ++i) {
    std::printf("  %s [%s]", dtensor::examples::kMlpParameterNames[i], p[i].c_str());
  }
  std::printf("\n");
}

}  // namespace

int main() {
  std::atomic<bool> agree{true};
  dtensor::run_ranks(4, [&](int rank) {
    const dtensor::DeviceMesh mesh = dtensor::init_device_mesh("local", {2, 2}, {"dp", "tp"});
    for (bool fsdp_shards_tp_dim : {false, true}) {
      dtensor::examples::FsdpTpOptions options;
      options.fsdp_shards_tp_dim = fsdp_shards_tp_dim;
      const auto steps = dtensor::examples::train_fsdp_tp(mesh, options);
      for (const auto& s : steps) {
        if (!dtensor::examples::step_agrees(s, kDiffTolerance)) agree = false;
      }
      if (rank != 0) continue;
      std::printf("FSDP + TP on %s, FSDP sharding %s\n", mesh.to_string().c_str(),
                  fsdp_shards_tp_dim ? "the TP dim" : "dim 0");
      print_placements("stored", steps.front().storage_placements);
      print_placements("gathered", steps.front().compute_placements);
      print_placements("gathered grad", steps.front().compute_grad_placements);
      print_placements("stored grad", steps.front().grad_placements);
      std::printf("    backward collectives:");
      for (const auto& [kind, count] : steps.front().backward_collectives) {
        std::printf(" %s x%lld", kind.c_str(), static_cast<long long>(count));
      }
      std::printf("\n");
      for (size_t i = 0; i < steps.size(); ++i) {
        const auto& s = steps[i];
        std::printf(
            "  step %zu: loss %.6f (one device %.6f)  max |grad diff| %.2e  "
            "max |param diff| %.2e\n",
            i, s.loss, s.reference_loss, s.max_grad_diff, s.max_param_diff);
      }
    }
  });
  std::printf(agree ? "FSDP + TP training matches one device\n"
                    : "MISMATCH between FSDP + TP and one-device training\n");
  return agree ? 0 : 1;
}
