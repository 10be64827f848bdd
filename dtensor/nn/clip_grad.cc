// Copyright 2026 The dtensor Authors.
#include <dtensor/nn/clip_grad.h>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <optional>

#include <dtensor/autograd/layout_functions.h>
#include <dtensor/base/check.h>
#include <dtensor/dtensor.h>
#include <dtensor/nn/reduce_gradients.h>
#include <dtensor/redistribute/reduce_terms.h>

namespace dtensor::nn {
namespace {

// The rank's part of a norm: sum |x|^p, or max |x| for p = infinity (0 for
// an empty tensor).
at::Tensor part_of_norm(const at::Tensor& x, double p) {
  const at::Tensor magnitude = x.abs().to(at::kDouble);
  if (std::isinf(p))
    return magnitude.numel() == 0 ? at::zeros({}, magnitude.options()) : magnitude.max();
  return magnitude.pow(p).sum();
}

// Whether the calling rank holds the copy of `grad`'s elements that counts:
// its coordinate is 0 on every mesh dim that replicates them.
bool counts_here(const DTensor& grad) {
  const std::vector<PlacementPtr>& placements = grad.placements();
  for (size_t m = 0; m < placements.size(); ++m) {
    if (placements[m]->is_replicate() && grad.mesh().coordinate()[m] != 0) return false;
  }
  return true;
}

// `grad` with every pending reduction carried out (the norm of a sum is not
// the sum of norms).
DTensor without_partials(const DTensor& grad) {
  const std::vector<PlacementPtr> placements = gradient_placements(grad.placements());
  return same_placements(placements, grad.placements()) ? grad : grad.redistribute(placements);
}

}  // namespace

double clip_grad_norm_(const std::vector<at::Tensor>& parameters, double max_norm,
                       double norm_type) {
  DTENSOR_CHECK(norm_type > 0,
                "clip_grad_norm_: norm_type: expected a value > 0 or infinity, "
                "found ",
                norm_type);
  const c10::NoGradGuard no_grad;
  // The norm of a sum is not the sum of norms. Reduced once, here, in one
  // collective per kind: the optimizer then finds the sums, not the terms.
  reduce_gradients(parameters);
  const bool max_norm_type = std::isinf(norm_type);
  std::optional<DeviceMesh> mesh;
  std::vector<at::Tensor> plain;
  at::Tensor total = at::zeros({}, at::kDouble);
  auto combine = [&](const at::Tensor& part) {
    total = max_norm_type ? at::maximum(total, part.cpu()) : total + part.cpu();
  };
  for (const at::Tensor& parameter : parameters) {
    const at::Tensor& grad = parameter.grad();
    if (!grad.defined()) continue;
    if (!is_dtensor(grad)) {
      plain.push_back(grad);
      continue;
    }
    // What reduce_gradients leaves Partial (mesh dims reducing by different
    // ops) is reduced here, alone.
    const DTensor resolved = without_partials(DTensor(grad));
    if (!resolved.tensor().is_same(grad)) parameter.mutable_grad() = resolved.tensor();
    DTENSOR_CHECK(!mesh || *mesh == resolved.mesh(),
                  "clip_grad_norm_: expected every DTensor "
                  "gradient on one mesh, found ",
                  mesh ? mesh->to_string() : "", " and ", resolved.mesh().to_string());
    mesh = resolved.mesh();
    if (counts_here(resolved)) combine(part_of_norm(resolved.to_local(), norm_type));
  }
  // Plain gradients are whole on every rank: they count on the first.
  const bool first_rank = !mesh || mesh->coordinate() == std::vector<int64_t>(mesh->ndim(), 0);
  if (first_rank) {
    for (const at::Tensor& grad : plain) combine(part_of_norm(grad, norm_type));
  }
  if (mesh) {
    std::vector<int64_t> every_dim(mesh->ndim());
    for (int64_t m = 0; m < mesh->ndim(); ++m) every_dim[m] = m;
    total = reduce_terms(total.to(mesh->device()), *mesh, every_dim,
                         max_norm_type ? ReduceOp::kMax : ReduceOp::kSum)
                .cpu();
  }
  const double norm =
      max_norm_type ? total.item<double>() : std::pow(total.item<double>(), 1.0 / norm_type);
  const double coefficient = max_norm / (norm + 1e-6);
  if (coefficient < 1) {
    for (const at::Tensor& parameter : parameters) {
      if (parameter.grad().defined()) parameter.grad().mul_(coefficient);
    }
  }
  return norm;
}

}  // namespace dtensor::nn
