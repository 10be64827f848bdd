// Copyright 2026 The dtensor Authors.
#include "examples/tp_mlp/tp_mlp.h"

#include <ATen/ATen.h>

#include <dtensor/dtensor.h>
#include <dtensor/placements/placements.h>
#include "examples/mlp/mlp.h"

namespace dtensor::examples {

std::vector<TpMlpStep> train_tp_mlp(const DeviceMesh& mesh, const TpMlpOptions& o) {
  const MlpShape shape{o.batch, o.in, o.hidden, o.out};
  // The reference trains on the mesh's device too, so both sides run the same kernels.
  const MlpParameters init = initial_mlp_parameters(shape, mesh.device());
  MlpParameters reference = reference_copies(init), sharded;
  const char* layouts[4] = {"S(0)", "S(0)", "S(1)", "R"};
  for (size_t i = 0; i < 4; ++i) {
    sharded[i] =
        distribute_tensor(init[i].clone().requires_grad_(), mesh, parse_placements(layouts[i]))
            .tensor();
  }
  const at::Tensor x = mlp_input(shape, mesh.device());
  const at::Tensor y = mlp_target(shape, mesh.device());
  const char* activation_layout = o.sequence_parallel ? "S(0)" : "R";
  const DTensor dx = distribute_tensor(x, mesh, parse_placements(activation_layout));
  const DTensor dy = distribute_tensor(y, mesh, parse_placements(activation_layout));

  std::vector<TpMlpStep> steps;
  for (int64_t step = 0; step < o.steps; ++step) {
    TpMlpStep record;
    record.reference_loss = one_device_forward_backward(x, reference, y);

    // Sequence parallel: gather the rows before the MLP, scatter them after.
    const DTensor input = o.sequence_parallel ? dx.redistribute(parse_placements("R")) : dx;
    DTensor out(mlp_output(mlp_hidden(input, sharded), sharded));
    record.output_placements = placements_to_string(out.placements());
    if (o.sequence_parallel) out = out.redistribute(parse_placements("S(0)"));
    const DTensor dloss(mean_squared_error(out, dy));
    dloss.tensor().backward();
    record.loss = dloss.full_tensor().item<double>();
    record.weight_grad_placements = placements_to_string(DTensor(sharded[0].grad()).placements());
    record.max_grad_diff = max_grad_diff(sharded, reference);
    sgd_step(reference, o.learning_rate);
    sgd_step(sharded, o.learning_rate);
    record.max_param_diff = max_param_diff(sharded, reference);
    steps.push_back(record);
  }
  return steps;
}

}  // namespace dtensor::examples
