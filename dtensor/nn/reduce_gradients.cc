// Copyright 2026 The dtensor Authors.
#include <dtensor/nn/reduce_gradients.h>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <optional>

#include <dtensor/autograd/layout_functions.h>
#include <dtensor/dtensor.h>
#include <dtensor/redistribute/reduce_terms.h>

namespace dtensor::nn {
namespace {

// The gradients that reduce together, and how.
struct Bucket {
  DeviceMesh mesh;
  std::vector<int64_t> partial_dims;
  ReduceOp op;
  c10::ScalarType dtype;
  c10::Device device;
  std::vector<at::Tensor*> gradients;

  bool takes(const Bucket& other) const {
    return mesh == other.mesh && partial_dims == other.partial_dims && op == other.op &&
           dtype == other.dtype && device == other.device;
  }
};

// The bucket `grad` belongs to (with no gradient yet), or nothing when it
// has no Partial placement to reduce, or Partial dims that reduce by
// different ops.
std::optional<Bucket> bucket_of(const DTensor& grad) {
  std::vector<int64_t> partial_dims;
  std::optional<ReduceOp> op;
  for (size_t m = 0; m < grad.placements().size(); ++m) {
    const std::optional<ReduceOp> dim_op = grad.placements()[m]->partial_op();
    if (!dim_op) continue;
    if (op && *op != *dim_op) return std::nullopt;
    op = dim_op;
    partial_dims.push_back(static_cast<int64_t>(m));
  }
  if (!op) return std::nullopt;
  return Bucket{grad.mesh(),  std::move(partial_dims), *op,
                grad.dtype(), grad.tensor().device(),  {}};
}

void reduce_bucket(const Bucket& bucket) {
  std::vector<at::Tensor> locals, flat;
  for (at::Tensor* grad : bucket.gradients) {
    locals.push_back(DTensor(*grad).to_local());
    flat.push_back(locals.back().reshape(-1));
  }
  const at::Tensor reduced = reduce_terms(flat.size() == 1 ? flat.front() : at::cat(flat),
                                          bucket.mesh, bucket.partial_dims, bucket.op);
  int64_t offset = 0;
  for (size_t i = 0; i < locals.size(); ++i) {
    at::Tensor& grad = *bucket.gradients[i];
    const int64_t numel = locals[i].numel();
    // The reduced value, Partial read as Replicate.
    const DTensor gradient(grad);
    const DTensorSpec& spec = gradient.spec();
    grad = DTensor(reduced.slice(0, offset, offset + numel).view(locals[i].sizes()),
                   std::make_shared<const DTensorSpec>(
                       spec.with_placements(gradient_placements(spec.placements()))))
               .tensor();
    offset += numel;
  }
}

}  // namespace

int64_t reduce_gradients(const std::vector<at::Tensor>& parameters) {
  const c10::NoGradGuard no_grad;
  std::vector<Bucket> buckets;  // in first use: every rank reduces in one order
  for (const at::Tensor& parameter : parameters) {
    at::Tensor& grad = parameter.mutable_grad();
    if (!grad.defined() || !is_dtensor(grad)) continue;
    std::optional<Bucket> bucket = bucket_of(DTensor(grad));
    if (!bucket) continue;
    auto found = std::find_if(buckets.begin(), buckets.end(),
                              [&](const Bucket& b) { return b.takes(*bucket); });
    if (found == buckets.end()) found = buckets.insert(buckets.end(), std::move(*bucket));
    found->gradients.push_back(&grad);
  }
  for (const Bucket& bucket : buckets) reduce_bucket(bucket);
  return static_cast<int64_t>(buckets.size());
}

}  // namespace dtensor::nn
