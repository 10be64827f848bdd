// Copyright 2026 The dtensor Authors.
//
// dtensor/nn/parallelize.h: tensor parallelism for torch::nn modules.
//
// `distribute_module` turns a module's parameters into DTensors: a partition
// function you give lays out the ones it chooses, and the rest are
// replicated. `parallelize_module` does it with ready-made styles, after
// PyTorch's `torch.distributed.tensor.parallel`: `ColwiseParallel` and
// `RowwiseParallel` for Linear and Embedding, `SequenceParallel` for norms
// on a split sequence, `PrepareModuleInput` / `PrepareModuleOutput` for any
// module's boundaries (dtensor/nn/parallel_style.h; examples/llama has whole
// Megatron plans). Afterwards `module.parameters()` are the DTensors, so
// torch::optim optimizers built on them train the sharded model.
//
// C++ modules have no forward hooks: where PyTorch moves activations in
// hooks, your forward() either calls its children through
// `dtensor::nn::call` (dtensor/nn/module_hooks.h), which runs the layouts
// parallelize_module registered on them (examples/llama does), or calls
// `prepare_input` / `prepare_output` of the `ParallelModule`s that
// parallelize_module returns, or `forward` for both, as below.
//
//   // A Linear -> ReLU -> Linear MLP, tensor-parallel over the "tp" ranks.
//   struct MlpImpl : torch::nn::Module {
//     torch::nn::Linear fc1{register_module("fc1", torch::nn::Linear(16, 64))};
//     torch::nn::Linear fc2{register_module("fc2", torch::nn::Linear(64, 16))};
//     std::optional<dtensor::nn::ParallelModules> tp;
//     at::Tensor forward(const at::Tensor& x) {
//       if (!tp) return fc2(torch::relu(fc1(x)));
//       const at::Tensor h = (*tp)["fc1"].forward(x);  // x replicated; h: local S(-1) shard
//       return (*tp)["fc2"].forward(torch::relu(h));  // all-reduced: every rank's full output
//     }
//   };
//   TORCH_MODULE(Mlp);
//
//   Mlp mlp;
//   mlp->tp = dtensor::nn::parallelize_module(*mlp, mesh, {{"fc1", dtensor::nn::ColwiseParallel()},
//                                                        {"fc2", dtensor::nn::RowwiseParallel()}});
//   torch::optim::Adam adam(mlp->parameters(), 1e-3);  // DTensor parameters
//   mlp->forward(x).pow(2).mean().backward();           // grads: S(0), S(0), S(1), R
//   adam.step();
//
// Gradients: a parameter's gradient takes the parameter's layout whenever
// that needs no communication (a replicated gradient of a sharded parameter
// that some op gathered is sliced as it arrives); otherwise
// it keeps the layout the backward ops gave it (e.g. Partial(sum) for a
// replicated parameter used on sharded activations), and the optimizer's
// in-place update redistributes it.
//
// With `use_local_output = false` on the first style, DTensors flow from one
// module to the next, so a torch::nn::Sequential works unchanged between the
// first input and the last output:
//   y = tp["2"].prepare_output(seq->forward(tp["0"].prepare_input(x)));
//
// Contract for parameters (dtensor/nn/module_parameters.h): each registered
// parameter is replaced in place; Linear, Embedding and LayerNorm update the
// member copies their forward() reads, your own modules implement
// `ParameterMembers` or keep no copies. Parallelize before building an
// optimizer or running forward: distribute_module throws if an old parameter
// is still referenced afterwards (a member copy, an optimizer, a vector of
// parameters, a live autograd graph). Buffers stay plain tensors
// unless `replicate_buffers` makes them replicated DTensors.
//
// Every call here is collective over the mesh: all ranks make it, on the
// same module structure, in the same order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <torch/nn/module.h>

#include <dtensor/mesh/device_mesh.h>
#include <dtensor/nn/module_parameters.h>
#include <dtensor/nn/parallel_style.h>
#include <dtensor/placements/placement.h>

namespace dtensor::nn {

// Called once per module of the tree, parents before children, with the
// module's dotted path ("" for the root). It may replace parameters
// registered directly on `module` by DTensors (distribute_parameter,
// replace_parameter).
using PartitionFn =
    std::function<void(const std::string& path, torch::nn::Module& module, const DeviceMesh& mesh)>;

// Walks `module`'s tree, calls `partition_fn` (if any) on each module and
// replicates over `mesh` every parameter it leaves plain. requires_grad is
// kept. Throws dtensor::Error when an old parameter is still referenced
// afterwards (see the file comment).
void distribute_module(torch::nn::Module& module, const DeviceMesh& mesh,
                       const PartitionFn& partition_fn = {});

// Replaces every plain buffer of `module`'s tree (rotary tables, causal
// masks) by a DTensor replicated over `mesh`, from the mesh's first rank's
// values, so that forward() mixes no plain tensor with DTensors. Member copies
// follow through ParameterMembers::rebind_buffer; like distribute_module, it
// throws if an old buffer is still referenced afterwards. Collective.
void replicate_buffers(torch::nn::Module& module, const DeviceMesh& mesh);

// Replaces the parameter `name` of `module` by its value laid out over `mesh`
// as `placements`, the value of the mesh's first rank scattered to the others
// (PyTorch's src_data_rank=0): ranks may initialize differently.
void distribute_parameter(torch::nn::Module& module, const std::string& name,
                          const DeviceMesh& mesh, const std::vector<PlacementPtr>& placements);

// One line of a plan: the dotted path of a submodule and its style, e.g.
// {"mlp.fc1", ColwiseParallel()}.
struct PlanEntry {
  template <typename Style,
            typename = std::enable_if_t<std::is_base_of_v<ParallelStyle, std::decay_t<Style>>>>
  PlanEntry(std::string path, Style&& style)
      : path(std::move(path)),
        style(std::make_shared<std::decay_t<Style>>(std::forward<Style>(style))) {}
  PlanEntry(std::string path, std::shared_ptr<const ParallelStyle> style)
      : path(std::move(path)), style(std::move(style)) {}

  std::string path;
  std::shared_ptr<const ParallelStyle> style;
};
using ParallelizePlan = std::vector<PlanEntry>;

// What parallelize_module returns: the parallelized modules by path.
class ParallelModules {
 public:
  explicit ParallelModules(std::vector<ParallelModule> modules) : modules_(std::move(modules)) {}

  // The module parallelized at `path`; throws dtensor::Error naming the
  // planned paths when there is none.
  const ParallelModule& operator[](std::string_view path) const;
  bool contains(std::string_view path) const;
  // In plan order.
  const std::vector<ParallelModule>& modules() const { return modules_; }

 private:
  std::vector<ParallelModule> modules_;
};

// How a plan over one dim of an N-D mesh (e.g. "tp" of (dp, tp)) uses the
// mesh's other dims.
enum class MeshScope {
  // Every group of ranks along the dim parallelizes its own copy of the
  // module over that 1-D sub-mesh: parameters and activations are DTensors
  // of the sub-mesh, or plain tensors (PyTorch's
  // parallelize_module(model, mesh["tp"], plan)). Whatever the groups share
  // (a data-parallel gradient sum) is up to the caller.
  kPerGroup,
  // Parameters are DTensors of the whole mesh, replicated over the other
  // dims, and so are activations (a batch split over "dp", say); the styles
  // change only the dim's placement. Data parallelism over the other dims
  // then follows from DTensor semantics: replicated parameters get Partial
  // gradients, reduced by reduce_gradients (dtensor/nn/reduce_gradients.h)
  // or by the optimizer's update. Plain inputs are refused: their layout
  // over the other dims is unknown.
  kWholeMesh,
};

// Applies each style of `plan` to the submodule at its path, over the 1-D
// `mesh`, and registers the styles' layouts as the submodules' forward
// hooks (dtensor/nn/module_hooks.h): a forward() that calls its children
// through dtensor::nn::call moves activations as the plan says. Parameters
// outside the plan stay as they are. Throws dtensor::Error for a mesh that is
// not 1-D, an unknown path (naming the module's paths), a path planned twice,
// or a style given a module type it does not support. Every planned module
// (the root "" too) must be owned by a std::shared_ptr, as torch::nn's module
// holders are.
ParallelModules parallelize_module(torch::nn::Module& module, const DeviceMesh& mesh,
                                   const ParallelizePlan& plan);
// The same over one dim of an N-D mesh, by name or index (see MeshScope).
// Throws dtensor::Error for a dim the mesh does not have, naming its dims.
ParallelModules parallelize_module(torch::nn::Module& module, const DeviceMesh& mesh,
                                   const ParallelizePlan& plan, std::string_view mesh_dim,
                                   MeshScope scope = MeshScope::kPerGroup);
ParallelModules parallelize_module(torch::nn::Module& module, const DeviceMesh& mesh,
                                   const ParallelizePlan& plan, int64_t mesh_dim,
                                   MeshScope scope = MeshScope::kPerGroup);

}  // namespace dtensor::nn
