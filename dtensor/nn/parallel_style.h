// Copyright 2026 The dtensor Authors.
//
// dtensor/nn/parallel_style.h: how a tensor-parallel style lays out one
// module, and the module bound to those layouts.
//
// A `ParallelStyle` (ColwiseParallel, RowwiseParallel) decides three things
// for a module type: the placement of each parameter, the layout forward()
// computes on, and the layout its output leaves in. `apply` lays the
// parameters out and returns a `ParallelModule`, which holds the layouts.
// C++ modules have no forward hooks, so the caller's forward() moves
// activations itself, around the module's own forward:
//
//   x = fc1.prepare_input(x);    // plain: this rank's part, laid out as
//                                // `input_layouts`; then redistributed
//   x = fc1_module->forward(x);  // runs on DTensors
//   x = fc1.prepare_output(x);   // redistributed to `output_layouts`; the
//                                // local shard when `use_local_output`
//
// or `fc1.forward(x)` for the three at once (Linear and Embedding).
// See dtensor/nn/parallelize.h for the whole picture.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <dtensor/base/registry.h>
#include <dtensor/mesh/device_mesh.h>
#include <dtensor/placements/placement.h>

namespace dtensor::nn {

// A style's keyword arguments, as in PyTorch. Null layouts take the style's
// default.
struct StyleOptions {
  // How a plain input tensor is laid out: the placement it has, read as the
  // calling rank's part (e.g. Shard(0) for sequence parallelism: each rank
  // holds its rows, gathered before the module).
  PlacementPtr input_layouts;
  // What the output is redistributed to (e.g. Shard(0) after a row-wise
  // Linear: a reduce-scatter instead of an all-reduce).
  PlacementPtr output_layouts;
  // Return the output's local shard (a plain tensor) instead of the DTensor.
  bool use_local_output = true;
};

// The layouts of one parallelized module (one placement: the mesh is 1-D).
struct ModuleLayouts {
  PlacementPtr input;          // what a plain input is read as
  PlacementPtr desired_input;  // what forward() computes on
  PlacementPtr output;         // what prepare_output redistributes to
  bool use_local_output = true;
};

// A module parallelized by a style over a 1-D mesh: the calls its caller's
// forward() makes around it. Copyable; shares the module.
class ParallelModule {
 public:
  using Forward = std::function<at::Tensor(const at::Tensor&)>;

  ParallelModule(std::string path, std::shared_ptr<torch::nn::Module> module, DeviceMesh mesh,
                 ModuleLayouts layouts, Forward forward);

  // The module's input in the layout it computes on, as a DTensor. A plain
  // tensor is the calling rank's part of a DTensor laid out as
  // `layouts().input` (from_local, which checks the ranks' shapes with one
  // small all-gather); a DTensor (on this mesh) is taken as it is. Then
  // redistributed to `layouts().desired_input`. Differentiable.
  at::Tensor prepare_input(const at::Tensor& input) const;
  // The module's output (a DTensor) redistributed to `layouts().output`,
  // then its local shard when `layouts().use_local_output`. Differentiable.
  at::Tensor prepare_output(const at::Tensor& output) const;
  // prepare_output(module forward(prepare_input(input))).
  at::Tensor forward(const at::Tensor& input) const;

  // The dotted path of the module in the parallelized tree ("" for the root).
  const std::string& path() const { return path_; }
  torch::nn::Module& module() const { return *module_; }
  const DeviceMesh& mesh() const { return mesh_; }
  const ModuleLayouts& layouts() const { return layouts_; }

 private:
  std::string path_;
  std::shared_ptr<torch::nn::Module> module_;
  DeviceMesh mesh_;
  ModuleLayouts layouts_;
  Forward forward_;
};

class ParallelStyle {
 public:
  virtual ~ParallelStyle() = default;
  // "ColwiseParallel", for messages.
  virtual std::string name() const = 0;
  // Lays the parameters of `module` (at `path`) out over the 1-D `mesh`
  // (parameters the style does not name are replicated) and binds the
  // module to its layouts. Throws dtensor::Error for a module type the style
  // does not support, or a mesh that is not 1-D. Collective over `mesh`.
  virtual ParallelModule apply(const std::string& path,
                               const std::shared_ptr<torch::nn::Module>& module,
                               const DeviceMesh& mesh) const = 0;
};

// Shards a Linear's output features (weight [out, in] and bias: Shard(0)) or
// an Embedding's embedding dim (weight: Shard(1)). Input: Replicate (default
// input_layouts Replicate); output: Shard(-1) (default output_layouts).
class ColwiseParallel final : public ParallelStyle {
 public:
  explicit ColwiseParallel(StyleOptions options = {}) : options_(std::move(options)) {}
  std::string name() const override { return "ColwiseParallel"; }
  ParallelModule apply(const std::string& path, const std::shared_ptr<torch::nn::Module>& module,
                       const DeviceMesh& mesh) const override;

 private:
  StyleOptions options_;
};

// Shards a Linear's input features (weight: Shard(1), bias: Replicate; input
// Shard(-1), the default input_layouts) or an Embedding's vocabulary
// (weight: Shard(0); input Replicate). The output is Partial(sum) and leaves
// as output_layouts: Replicate (an all-reduce) by default, Shard(d) for
// sequence parallelism (a reduce-scatter).
class RowwiseParallel final : public ParallelStyle {
 public:
  explicit RowwiseParallel(StyleOptions options = {}) : options_(std::move(options)) {}
  std::string name() const override { return "RowwiseParallel"; }
  ParallelModule apply(const std::string& path, const std::shared_ptr<torch::nn::Module>& module,
                       const DeviceMesh& mesh) const override;

 private:
  StyleOptions options_;
};

// Makes a style from its options (a registry value).
using ParallelStyleFactory =
    std::function<std::shared_ptr<const ParallelStyle>(const StyleOptions& options)>;

// Parallel styles by name ("ColwiseParallel", "RowwiseParallel", and any a
// user registers), so plans can name their styles (read from a config, say):
//
//   DTENSOR_REGISTER(my_style) {
//     dtensor::nn::parallel_styles().add("MyParallel", [](const StyleOptions& o) {
//       return std::make_shared<MyParallel>(o);
//     });
//   }
//   plan = {{"mlp.fc1", dtensor::nn::parallel_style("ColwiseParallel")}};
Registry<ParallelStyleFactory>& parallel_styles();

// The style registered as `name`, made with `options`. Throws dtensor::Error
// naming the registered styles when there is none.
std::shared_ptr<const ParallelStyle> parallel_style(std::string_view name,
                                                    const StyleOptions& options = {});

}  // namespace dtensor::nn
