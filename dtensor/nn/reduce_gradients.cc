// Copyright 2026 The dtensor Authors.
#include <dtensor/nn/reduce_gradients.h>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <map>
#include <optional>
#include <string>
#include <tuple>

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
  std::vector<at::Tensor*> gradients;
};

// What a gradient must share with the others of its bucket, or nothing when
// it has no Partial placement to reduce. Gradients whose Partial dims reduce
// by different ops stay apart.
std::optional<std::string> bucket_key(const DTensor& grad, std::vector<int64_t>& partial_dims,
                                      std::optional<ReduceOp>& op) {
  for (size_t m = 0; m < grad.placements().size(); ++m) {
    const std::optional<ReduceOp> dim_op = grad.placements()[m]->partial_op();
    if (!dim_op) continue;
    if (op && *op != *dim_op) return std::nullopt;
    op = dim_op;
    partial_dims.push_back(static_cast<int64_t>(m));
  }
  if (!op) return std::nullopt;
  std::string key = grad.mesh().to_string() + "|" + std::to_string(static_cast<int>(*op)) + "|" +
                    std::string(c10::toString(grad.dtype())) + "|" + grad.tensor().device().str();
  for (int64_t m : partial_dims) key += "|" + std::to_string(m);
  return key;
}

// `grad` with its Partial placements read as Replicate, holding `local`.
at::Tensor reduced_gradient(const DTensor& grad, const at::Tensor& local) {
  auto spec = std::make_shared<const DTensorSpec>(
      grad.spec().with_placements(gradient_placements(grad.placements())));
  return DTensor(local, std::move(spec)).tensor();
}

void reduce_bucket(const Bucket& bucket) {
  std::vector<at::Tensor> locals;
  for (at::Tensor* grad : bucket.gradients) locals.push_back(DTensor(*grad).to_local().reshape(-1));
  const at::Tensor flat = locals.size() == 1 ? locals.front() : at::cat(locals);
  const at::Tensor reduced = reduce_terms(flat, bucket.mesh, bucket.partial_dims, bucket.op);
  int64_t offset = 0;
  for (at::Tensor* grad : bucket.gradients) {
    const DTensor partial(*grad);
    const at::Tensor local = partial.to_local();
    const at::Tensor mine = reduced.slice(0, offset, offset + local.numel()).view(local.sizes());
    offset += local.numel();
    *grad = reduced_gradient(partial, mine);
  }
}

}  // namespace

int64_t reduce_gradients(const std::vector<at::Tensor>& parameters) {
  const c10::NoGradGuard no_grad;
  std::map<std::string, Bucket> buckets;
  std::vector<std::string> order;  // first use: every rank reduces in one order
  for (const at::Tensor& parameter : parameters) {
    at::Tensor& grad = parameter.mutable_grad();
    if (!grad.defined() || !is_dtensor(grad)) continue;
    const DTensor gradient(grad);
    std::vector<int64_t> partial_dims;
    std::optional<ReduceOp> op;
    const std::optional<std::string> key = bucket_key(gradient, partial_dims, op);
    if (!key) continue;
    auto [found, added] = buckets.try_emplace(*key, Bucket{gradient.mesh(), partial_dims, *op, {}});
    if (added) order.push_back(*key);
    found->second.gradients.push_back(&grad);
  }
  for (const std::string& key : order) reduce_bucket(buckets.at(key));
  return static_cast<int64_t>(order.size());
}

}  // namespace dtensor::nn
