// Copyright 2026 The dtensor Authors.
#include "examples/ragged_optimizer/ragged_optimizer.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <dtensor/base/check.h>
#include <dtensor/dtensor.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/collective_counter.h>
#include "examples/ragged_optimizer/newton_schulz.h"
#include "examples/support/one_device.h"

namespace dtensor::examples {
namespace {

// Distinct deterministic values, the same on every rank.
at::Tensor wave(const std::vector<int64_t>& shape, double frequency, double phase,
                c10::Device device) {
  return at::arange(shape[0] * shape[1], at::kFloat)
      .mul(frequency)
      .add(phase)
      .sin()
      .reshape(shape)
      .to(device);
}

struct Parameter {
  at::Tensor value;     // a leaf; a DTensor on the distributed side
  at::Tensor target;    // what the loss pulls it to
  at::Tensor momentum;  // in the value's layout
};

std::vector<Parameter> make_parameters(const RaggedOptimizerOptions& o, const DeviceMesh* mesh,
                                       c10::Device device) {
  std::vector<Parameter> params;
  for (size_t i = 0; i < o.parameters.size(); ++i) {
    const std::vector<int64_t>& shape = o.parameters[i].shape;
    // A leaf that requires grad stays one when distributed.
    at::Tensor values[3] = {wave(shape, 0.7, 0.1 * i, device).requires_grad_(),
                            wave(shape, 1.3, 0.5 + i, device),
                            at::zeros(shape, at::TensorOptions(device))};
    if (mesh != nullptr) {
      const auto placements = parse_placements(o.parameters[i].placements);
      for (at::Tensor& v : values) v = distribute_tensor(v, *mesh, placements).tensor();
    }
    params.push_back({values[0], values[1], values[2]});
  }
  return params;
}

// Sum of squared distances to the targets: the gradient of each parameter
// depends on its current value, so the steps differ.
at::Tensor loss_of(const std::vector<Parameter>& params) {
  at::Tensor loss;
  for (const Parameter& p : params) {
    const at::Tensor term = (p.value - p.target).pow(2).sum();
    loss = loss.defined() ? loss + term : term;
  }
  return loss;
}

double loss_value(const at::Tensor& loss) {
  return is_dtensor(loss) ? DTensor(loss).full_tensor().item<double>() : loss.item<double>();
}

// Momentum, elementwise in the parameter's own layout.
void accumulate_momentum(Parameter& p, double momentum) {
  p.momentum = p.momentum * momentum + p.value.grad();
}

void apply_update(Parameter& p, const at::Tensor& update, double learning_rate) {
  c10::AutoGradMode no_grad(false);
  p.value.sub_(update * learning_rate);
  p.value.mutable_grad().zero_();
}

DTensor redistribute_counted(const DTensor& tensor, const std::vector<PlacementPtr>& placements,
                             int64_t& collectives) {
  CollectiveCounter counter;
  DTensor out = tensor.redistribute(placements);
  collectives = counter.total();
  return out;
}

// Gathers `matrix` whole onto `owner`, orthogonalizes it there, and lays the
// result out as `matrix` was. Non-owners hold [0, cols] and compute nothing.
DTensor orthogonalize_on_owner(const DTensor& matrix, int64_t owner, int64_t iterations,
                               WholeMatrixUpdate& record) {
  record.owner = owner;
  const DTensor whole =
      redistribute_counted(matrix, {whole_on_rank(matrix.sizes()[0], owner, matrix.mesh().size(0))},
                           record.collectives_to_owner);
  record.whole_placements = placements_to_string(whole.placements());
  const at::Tensor local = whole.to_local();
  record.whole_local_shape = local.sizes().vec();
  const at::Tensor updated =
      local.size(0) > 0 ? newton_schulz_orthogonalize(local, iterations) : local.clone();
  const DTensor back = redistribute_counted(DTensor(updated, whole.spec_ptr()), matrix.placements(),
                                            record.collectives_back);
  record.update_placements = placements_to_string(back.placements());
  return back;
}

}  // namespace

PlacementPtr whole_on_rank(int64_t rows, int64_t owner, int64_t n) {
  DTENSOR_CHECK(owner >= 0 && owner < n, "whole_on_rank: owner ", owner, " of ", n, " ranks");
  std::vector<int64_t> units(static_cast<size_t>(n), 0);
  units[static_cast<size_t>(owner)] = rows;
  return Ragged::make(1, std::move(units));
}

std::vector<RaggedOptimizerStep> run_ragged_optimizer(const DeviceMesh& mesh,
                                                      const RaggedOptimizerOptions& o) {
  DTENSOR_CHECK(mesh.ndim() == 1, "run_ragged_optimizer: expected a 1-D mesh, found ",
                mesh.to_string());
  std::vector<Parameter> reference = make_parameters(o, nullptr, mesh.device());
  std::vector<Parameter> distributed = make_parameters(o, &mesh, mesh.device());
  std::vector<RaggedOptimizerStep> steps;
  for (int64_t step = 0; step < o.steps; ++step) {
    RaggedOptimizerStep record;
    const at::Tensor reference_loss = loss_of(reference);
    reference_loss.backward();
    record.reference_loss = loss_value(reference_loss);
    const at::Tensor loss = loss_of(distributed);
    loss.backward();
    record.loss = loss_value(loss);

    for (size_t i = 0; i < distributed.size(); ++i) {
      WholeMatrixUpdate update;
      accumulate_momentum(reference[i], o.momentum);
      accumulate_momentum(distributed[i], o.momentum);
      apply_update(reference[i],
                   newton_schulz_orthogonalize(reference[i].momentum, o.newton_schulz_iterations),
                   o.learning_rate);
      // Round-robin owners spread the matrix work over the ranks.
      const int64_t owner = static_cast<int64_t>(i) % mesh.size(0);
      const DTensor orthogonal = orthogonalize_on_owner(DTensor(distributed[i].momentum), owner,
                                                        o.newton_schulz_iterations, update);
      apply_update(distributed[i], orthogonal.tensor(), o.learning_rate);
      update.max_param_diff = max_abs_diff(distributed[i].value, reference[i].value);
      record.updates.push_back(std::move(update));
    }
    steps.push_back(std::move(record));
  }
  return steps;
}

}  // namespace dtensor::examples
