// Copyright 2026 The dtensor Authors.
#include "examples/fsdp_tp/fsdp_tp.h"

#include <ATen/ATen.h>

#include <dtensor/base/check.h>
#include <dtensor/dtensor.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/collective_counter.h>

namespace dtensor::examples {
namespace {

void check_dp_tp_mesh(const DeviceMesh& mesh) {
  const std::vector<std::string> names = {"dp", "tp"};
  DTENSOR_CHECK(mesh.dim_names() == names,
                "train_fsdp_tp: expected a 2-D mesh named (dp, tp), found ", mesh.to_string());
}

MlpParameters distribute_storage(const MlpParameters& init, const DeviceMesh& mesh,
                                 const std::array<FsdpTpLayout, 4>& layouts) {
  MlpParameters storage;
  for (size_t i = 0; i < storage.size(); ++i) {
    storage[i] =
        distribute_tensor(init[i].clone().requires_grad_(), mesh, layouts[i].storage).tensor();
  }
  return storage;
}

// FSDP's pre-forward all-gather, differentiable: its backward reduces the
// gradients' pending sums over dp onto the storage layout.
MlpParameters all_gather_over_dp(const MlpParameters& storage,
                                 const std::array<FsdpTpLayout, 4>& layouts) {
  MlpParameters gathered;
  for (size_t i = 0; i < storage.size(); ++i) {
    gathered[i] = DTensor(storage[i]).redistribute(layouts[i].compute).tensor();
    gathered[i].retain_grad();  // to show the pending sum the backward reduces
  }
  return gathered;
}

ParameterPlacements placements_of(const MlpParameters& tensors) {
  ParameterPlacements out;
  for (size_t i = 0; i < tensors.size(); ++i) {
    out[i] = placements_to_string(DTensor(tensors[i]).placements());
  }
  return out;
}

ParameterPlacements gradient_placements_of(const MlpParameters& tensors) {
  MlpParameters grads;
  for (size_t i = 0; i < tensors.size(); ++i) grads[i] = tensors[i].grad();
  return placements_of(grads);
}

}  // namespace

std::array<FsdpTpLayout, 4> fsdp_tp_layouts(const DeviceMesh& mesh, const FsdpTpOptions& o) {
  check_dp_tp_mesh(mesh);
  const int64_t tp = mesh.size(mesh.dim_index("tp"));
  // TP as in examples/tp_mlp: w1, b1 colwise; w2 rowwise; b2 replicated.
  const PlacementPtr tp_placements[4] = {Shard::make(0), Shard::make(0), Shard::make(1),
                                         Replicate::make()};
  std::array<FsdpTpLayout, 4> layouts;
  for (size_t i = 0; i < layouts.size(); ++i) {
    const auto tp_dim = tp_placements[i]->split_dim();
    const int64_t fsdp_dim = o.fsdp_shards_tp_dim && tp_dim ? *tp_dim : 0;
    layouts[i] = fsdp_tp_layout(tp_placements[i], fsdp_dim, tp);
  }
  return layouts;
}

std::vector<FsdpTpStep> train_fsdp_tp(const DeviceMesh& mesh, const FsdpTpOptions& o) {
  const std::array<FsdpTpLayout, 4> layouts = fsdp_tp_layouts(mesh, o);
  // The reference trains on the mesh's device too, so both sides run the same kernels.
  const MlpParameters init = initial_mlp_parameters(o.shape, mesh.device());
  MlpParameters reference = reference_copies(init);
  MlpParameters storage = distribute_storage(init, mesh, layouts);

  const at::Tensor x = mlp_input(o.shape, mesh.device());
  const at::Tensor y = mlp_target(o.shape, mesh.device());
  // Data parallel: each dp rank its own rows, the same rows on every tp rank.
  const std::vector<PlacementPtr> batch_layout = parse_placements("S(0),R");
  const DTensor dx = distribute_tensor(x, mesh, batch_layout);
  const DTensor dy = distribute_tensor(y, mesh, batch_layout);

  std::vector<FsdpTpStep> steps;
  for (int64_t step = 0; step < o.steps; ++step) {
    FsdpTpStep record;
    record.reference_loss = one_device_forward_backward(x, reference, y);

    const MlpParameters gathered = all_gather_over_dp(storage, layouts);
    record.compute_placements = placements_of(gathered);
    const DTensor dloss(mean_squared_error(mlp_output(mlp_hidden(dx, gathered), gathered), dy));
    {
      CollectiveCounter counter;
      dloss.tensor().backward();
      record.backward_collectives = counter.by_collective();
    }
    record.loss = dloss.full_tensor().item<double>();
    record.compute_grad_placements = gradient_placements_of(gathered);
    record.grad_placements = gradient_placements_of(storage);
    record.max_grad_diff = max_grad_diff(storage, reference);

    sgd_step(reference, o.learning_rate);
    sgd_step(storage, o.learning_rate);
    record.max_param_diff = max_param_diff(storage, reference);
    record.storage_placements = placements_of(storage);
    record.local_input = dx.to_local();
    record.input_offset = dx.spec().local_layout().global_offset[0];
    steps.push_back(record);
  }
  return steps;
}

}  // namespace dtensor::examples
