// Copyright 2026 The dtensor Authors.
#include "examples/tp_mlp/tp_mlp.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <array>

#include "dtensor/dtensor.h"
#include "placements/placements.h"

namespace dtensor::examples {
namespace {

struct Parameters {
  std::array<at::Tensor, 4> tensors;  // w1, b1, w2, b2
};

Parameters initial_parameters(const TpMlpOptions& o, c10::Device device) {
  auto values = [device](std::vector<int64_t> shape, double phase) {
    int64_t numel = 1;
    for (int64_t s : shape) numel *= s;
    return at::arange(numel, at::kFloat).add(phase).sin().mul(0.5).reshape(shape).to(device);
  };
  return {{values({o.hidden, o.in}, 0.1), values({o.hidden}, 0.2), values({o.out, o.hidden}, 0.3),
           values({o.out}, 0.4)}};
}

at::Tensor mlp_loss(const at::Tensor& x, const std::array<at::Tensor, 4>& p, const at::Tensor& y) {
  const at::Tensor hidden = at::relu(at::linear(x, p[0], p[1]));
  const at::Tensor out = at::linear(hidden, p[2], p[3]);
  return (out - y).pow(2).mean();
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

void sgd_step(std::array<at::Tensor, 4>& params, double lr) {
  c10::AutoGradMode no_grad(false);
  for (at::Tensor& p : params) {
    p.sub_(p.grad() * lr);
    p.mutable_grad().zero_();
  }
}

}  // namespace

std::vector<TpMlpStep> train_tp_mlp(const DeviceMesh& mesh, const TpMlpOptions& o) {
  // The reference trains on the mesh's device too, so both sides run the same kernels.
  const Parameters init = initial_parameters(o, mesh.device());
  std::array<at::Tensor, 4> reference, sharded;
  const char* layouts[4] = {"S(0)", "S(0)", "S(1)", "R"};
  for (size_t i = 0; i < 4; ++i) {
    reference[i] = init.tensors[i].clone().requires_grad_();
    sharded[i] =
        distribute_tensor(init.tensors[i].clone().requires_grad_(), mesh, parse_placements(layouts[i]))
            .tensor();
  }
  const at::Tensor x =
      at::arange(o.batch * o.in, at::kFloat).cos().reshape({o.batch, o.in}).to(mesh.device());
  const at::Tensor y =
      at::arange(o.batch * o.out, at::kFloat).sin().reshape({o.batch, o.out}).to(mesh.device());
  const char* activation_layout = o.sequence_parallel ? "S(0)" : "R";
  const DTensor dx = distribute_tensor(x, mesh, parse_placements(activation_layout));
  const DTensor dy = distribute_tensor(y, mesh, parse_placements(activation_layout));

  std::vector<TpMlpStep> steps;
  for (int64_t step = 0; step < o.steps; ++step) {
    TpMlpStep record;
    at::Tensor loss = mlp_loss(x, reference, y);
    loss.backward();
    record.reference_loss = loss.item<double>();

    // Sequence parallel: gather the rows before the MLP, scatter them after.
    const DTensor input = o.sequence_parallel ? dx.redistribute(parse_placements("R")) : dx;
    const at::Tensor hidden = at::relu(at::linear(input, sharded[0], sharded[1]));
    DTensor out(at::linear(hidden, sharded[2], sharded[3]));
    record.output_placements = placements_to_string(out.placements());
    if (o.sequence_parallel) out = out.redistribute(parse_placements("S(0)"));
    const DTensor dloss(((out.tensor() - dy.tensor()).pow(2)).mean());
    dloss.tensor().backward();
    record.loss = dloss.full_tensor().item<double>();
    record.weight_grad_placements =
        placements_to_string(DTensor(sharded[0].grad()).placements());
    for (size_t i = 0; i < 4; ++i) {
      record.max_grad_diff = std::max(
          record.max_grad_diff,
          max_abs_diff(DTensor(sharded[i].grad()).full_tensor(), reference[i].grad()));
    }
    sgd_step(reference, o.learning_rate);
    sgd_step(sharded, o.learning_rate);
    for (size_t i = 0; i < 4; ++i) {
      record.max_param_diff = std::max(
          record.max_param_diff, max_abs_diff(DTensor(sharded[i]).full_tensor(), reference[i]));
    }
    steps.push_back(record);
  }
  return steps;
}

}  // namespace dtensor::examples
