// Copyright 2026 The dtensor Authors.
//
// dtensor/nn/fully_shard.h (<dtensor/nn/fully_shard.h>): sharded data
// parallelism for torch::nn modules, PyTorch's FSDP2 `fully_shard` in C++.
//
// `fully_shard(module, mesh)` turns the parameters of `module` (those not
// already taken by a fully_shard'ed submodule) into DTensors laid out
// Shard(0) over the data-parallel mesh: each rank stores 1/N of every
// parameter, and the optimizer, built afterwards, updates only that. Call it
// bottom-up, once per group, then on the root, as in PyTorch:
//
//   dtensor::nn::MixedPrecisionPolicy mp{.param_dtype = at::kBFloat16,
//                                        .reduce_dtype = at::kFloat};
//   for (auto& block : model->layers) dtensor::nn::fully_shard(*block, dp_mesh, {.mp_policy = mp});
//   dtensor::nn::FSDPModule root = dtensor::nn::fully_shard(*model, dp_mesh, {.mp_policy = mp});
//   torch::optim::AdamW opt(model->parameters(), {1e-3});
//   auto loss = model->forward(x).pow(2).mean();  // x: this rank's slice of the batch
//   loss.backward();                               // gradients reduce-scattered
//   opt.step();                                    // on the shards
//
// How it works. Each group's forward reads *unsharded* parameters: plain
// leaf tensors (or, under tensor parallelism, DTensors on the tp mesh) that
// the module's members (LinearImpl::weight, ParameterMembers) point at,
// while `parameters()` returns the sharded ones. Before a group computes,
// one all-gather of a flat buffer holding all its shards fills them; after
// its forward (reshard_after_forward) their storage is freed; before its
// backward they are gathered again; once its backward is done, their
// gradients are packed into one flat buffer and reduce-scattered (averaged
// over the data-parallel ranks, in `reduce_dtype`), added to the sharded
// parameters' gradients, and the storage freed again. Every collective is a
// redistribute of the flat buffer (planned, counted).
//
// C++ modules have no hooks, so the triggers are these:
//  - the group's module is called through `dtensor::nn::call`
//    (dtensor/nn/module_hooks.h), as parallelize_module's plans need too:
//    its pre-hook gathers, its hook reshards and marks the output, whose
//    gradient's arrival gathers again; the module's input is marked so that
//    the arrival of *its* gradient ends the group's backward;
//  - every module that owns one of the group's parameters also gathers
//    the group when it is called through `call` (the root's embedding,
//    norm and head, say, when the root's own forward() is called directly);
//  - a callback at the end of each backward reduces whatever is left.
// Limits: a parameter registered on a module that is never called through
// `call` (read directly in its parent's forward) is sharded when that
// forward reads it unless the group was gathered before (`unshard()`): the
// op then fails with a layout error, never computes with freed memory. A
// group that is not resharded after forward stays gathered until the end
// of backward.
//
// Tensor parallelism: apply parallelize_module on the "tp" slice of a 2-D
// mesh first, then fully_shard on the "dp" slice of the same mesh; the
// parameters become DTensors on the 2-D mesh, laid out as PyTorch's:
// [StridedShard(0, tp), Shard(0)] for a tp Shard(0) parameter, [Shard(0),
// Shard(1)] for a tp Shard(1) one, [Shard(0), Replicate] for a replicated
// one. A 2-D `mesh` is HSDP: replicated over its first dim (gradients
// all-reduced there), sharded over the second. Both at once (HSDP over
// tensor parallelism) take a 3-D mesh, e.g. ("replicate", "shard", "tp"):
// parallelize_module on mesh["tp"], fully_shard on mesh[{"replicate",
// "shard"}]; a tp Shard(0) parameter is then [Replicate, StridedShard(0,
// tp), Shard(0)]. A replicated tp parameter used on split activations (a
// norm weight under sequence parallelism) has a gradient pending over tp:
// it stays pending through the reduce-scatter over dp (a sum commutes with
// it), and the end of backward reduces every group's in one bucket
// (dtensor/nn/reduce_gradients.h): one all-reduce per model, of the shards.
//
// Collective: every rank of the mesh calls fully_shard on the same modules
// in the same order, and runs the same forward and backward.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <torch/nn/module.h>

#include <dtensor/mesh/device_mesh.h>

namespace dtensor::nn {

// Dtypes of the data-parallel step, as PyTorch's MixedPrecisionPolicy.
struct MixedPrecisionPolicy {
  // What forward and backward compute with and the all-gather moves; the
  // sharded parameters (the optimizer's) keep their own dtype. Default:
  // each parameter's own.
  std::optional<c10::ScalarType> param_dtype = std::nullopt;
  // What gradients are reduced in. Default: param_dtype.
  std::optional<c10::ScalarType> reduce_dtype = std::nullopt;
};

struct FullyShardOptions {
  // Free the gathered parameters after forward and gather them again for
  // backward (less memory, one more all-gather per group and step).
  bool reshard_after_forward = true;
  MixedPrecisionPolicy mp_policy = {};
};

namespace nn_internal {
class FsdpParamGroup;
}

// What fully_shard returns: a handle on one group's state (copyable; it
// keeps the state alive, not the module).
class FSDPModule {
 public:
  explicit FSDPModule(std::shared_ptr<nn_internal::FsdpParamGroup> group);

  // Gathers the group's parameters now (one all-gather), e.g. before a
  // forward that reads them outside `call`. Collective over the mesh.
  void unshard() const;
  // Frees the gathered parameters (the next use gathers them again).
  void reshard() const;
  // Whether backward reduces gradients. false accumulates each micro-batch's
  // unsharded gradients locally; the first backward with true reduces the sum.
  // Applies to this group and every group fully_shard'ed inside it.
  void set_requires_gradient_sync(bool requires_gradient_sync) const;
  // Whether the gathered parameters are freed when the group's backward is
  // done (default true).
  void set_reshard_after_backward(bool reshard_after_backward) const;
  // Whether each group issues its neighbour's all-gather (the next in
  // forward, the previous in backward) before it computes, from the second
  // step on (default true; on CUDA the gather then runs beside the group's
  // kernels). Applies to every group of the model (a group fully_shard'ed
  // later into a model with it off keeps it off). Turn it off only to
  // measure what prefetching hides (benchmarks/fsdp_step_bench.cc).
  void set_prefetch(bool prefetch) const;
  // The parameters this call sharded (DTensors), in registration order.
  std::vector<at::Tensor> sharded_parameters() const;
  // Bytes of gathered (unsharded) parameters now held by this group and the
  // groups sharing its model, and the most held at once so far.
  int64_t unsharded_bytes() const;
  int64_t peak_unsharded_bytes() const;

 private:
  std::shared_ptr<nn_internal::FsdpParamGroup> group_;
};

// Shards `module`'s parameters over `mesh` (1-D: FSDP; 2-D: HSDP, see the
// file comment). Throws dtensor::Error, on every rank, for a module already
// fully_shard'ed, a mesh of more than two dims, parameters on several
// devices or not on the mesh's, 0-dim parameters, parameters still
// referenced elsewhere (an optimizer built before), and DTensor parameters
// that are not on a tp slice of `mesh`'s root.
FSDPModule fully_shard(torch::nn::Module& module, const DeviceMesh& mesh,
                       FullyShardOptions options = {});

// The handle of a module fully_shard'ed before; throws dtensor::Error if it
// was not.
FSDPModule fsdp_module(const torch::nn::Module& module);

}  // namespace dtensor::nn
