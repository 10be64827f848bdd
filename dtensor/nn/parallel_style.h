// Copyright 2026 The dtensor Authors.
//
// dtensor/nn/parallel_style.h: how a tensor-parallel style lays out one
// module, and the module bound to those layouts.
//
// A `ParallelStyle` decides, for one module, the placement of its parameters
// on one mesh dim, the layout its input is brought to before forward() and
// the layout its output leaves in:
//
//  - ColwiseParallel, RowwiseParallel: Linear and Embedding split by output
//    or input features (Megatron's column- and row-parallel layers).
//  - SequenceParallel: a module that works row by row (RMSNorm, LayerNorm,
//    dropout) on activations split along the sequence dim; its parameters
//    are replicated.
//  - PrepareModuleInput, PrepareModuleOutput: any module, parameters
//    untouched: only its input or its output changes layout (a transformer
//    block that gathers the sequence before attention, say).
//
// `apply` lays the parameters out and returns a `ParallelModule`, which holds
// the layouts. parallelize_module (dtensor/nn/parallelize.h) also registers
// them as the module's forward hooks (dtensor/nn/module_hooks.h), so a model
// that calls its children through dtensor::nn::call moves activations where
// the plan says and nowhere else.
//
// Gradients: each layout change sends the gradient back to the layout the
// activation came in (Partial read as Replicate). At PrepareModuleInput and
// PrepareModuleOutput, module boundaries, it does so even when the forward
// moved nothing: a replicated input to a block of column-parallel layers
// gets its gradient (their Partial sum) all-reduced right there, once for
// the block (Megatron's "f" operator), where the forward needed no
// collective. The split styles move gradients only where they moved
// activations, so q, k and v sharing one input do not reduce three times.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <dtensor/base/registry.h>
#include <dtensor/mesh/device_mesh.h>
#include <dtensor/placements/placement.h>

namespace dtensor::nn {

// A style's keyword arguments, as in PyTorch. Null layouts and an absent
// use_local_output take the style's defaults. Each layout is a placement on
// the mesh dim the plan parallelizes over; a DTensor's placements on the
// other dims of the mesh are kept.
struct StyleOptions {
  // How a plain input tensor is read: the placement it has, as the calling
  // rank's part (e.g. Shard(1) for sequence parallelism: each rank holds its
  // positions, gathered before the module). A DTensor input keeps its own.
  PlacementPtr input_layouts;
  // PrepareModuleInput: the layout the input is brought to.
  PlacementPtr desired_input_layouts;
  // Column- and row-parallel layers: what the output is redistributed to
  // (e.g. Shard(1) after a row-wise Linear: a reduce-scatter instead of an
  // all-reduce). PrepareModuleOutput: how a plain output is read.
  PlacementPtr output_layouts;
  // PrepareModuleOutput: the layout the output is brought to.
  PlacementPtr desired_output_layouts;
  // Return the output's local shard (a plain tensor) instead of the DTensor
  // (PrepareModuleInput: hand forward() the input's local shard).
  std::optional<bool> use_local_output;
};

// The layouts of one parallelized module, on mesh dim `mesh_dim`. A null
// `desired_input` leaves the input alone, a null `output` the output.
struct ModuleLayouts {
  int64_t mesh_dim = 0;
  PlacementPtr input;            // how a plain input is read
  PlacementPtr desired_input;    // what forward() computes on
  PlacementPtr plain_output;     // how a plain output is read (null: refused)
  PlacementPtr output;           // what the output is redistributed to
  bool use_local_input = false;  // forward() gets the input's local shard
  bool use_local_output = true;
  // Gradients go back to the layout the activation came in even when the
  // forward moved nothing (a module boundary; see the file comment).
  bool boundary = false;
};

// The layout changes around one module's forward(), without the module
// itself: what parallelize_module registers as the module's hooks (holding
// no reference to the module, so that it dies with its owner). Copyable.
class ModuleBoundary {
 public:
  ModuleBoundary(std::string path, DeviceMesh mesh, ModuleLayouts layouts);

  // The module's input in the layout it computes on, as a DTensor. A plain
  // tensor is the calling rank's part of a DTensor laid out as
  // `layouts().input` (from_local, which checks the ranks' shapes with one
  // small all-gather; on a 1-D mesh only); a DTensor (on this mesh) keeps its
  // placements but on `layouts().mesh_dim`. Then redistributed to
  // `layouts().desired_input` (the gradient: see the file comment). Its
  // local shard when `layouts().use_local_input`. Differentiable.
  at::Tensor prepare_input(const at::Tensor& input) const;
  // The module's output redistributed to `layouts().output` on the plan's
  // mesh dim, then its local shard when `layouts().use_local_output`.
  // Differentiable.
  at::Tensor prepare_output(const at::Tensor& output) const;

  // The dotted path of the module in the parallelized tree ("" for the root).
  const std::string& path() const { return path_; }
  const DeviceMesh& mesh() const { return mesh_; }
  const ModuleLayouts& layouts() const { return layouts_; }

 private:
  std::string path_;
  DeviceMesh mesh_;
  ModuleLayouts layouts_;
};

// A module parallelized by a style: its boundary and the module. Copyable;
// shares the module.
class ParallelModule {
 public:
  using Forward = std::function<at::Tensor(const at::Tensor&)>;

  ParallelModule(ModuleBoundary boundary, std::shared_ptr<torch::nn::Module> module,
                 Forward forward);

  at::Tensor prepare_input(const at::Tensor& input) const { return boundary_.prepare_input(input); }
  at::Tensor prepare_output(const at::Tensor& output) const {
    return boundary_.prepare_output(output);
  }
  // prepare_output(module forward(prepare_input(input))), for the module
  // types the style knows the forward() of (Linear, Embedding).
  at::Tensor forward(const at::Tensor& input) const;

  const ModuleBoundary& boundary() const { return boundary_; }
  const std::string& path() const { return boundary_.path(); }
  torch::nn::Module& module() const { return *module_; }
  const DeviceMesh& mesh() const { return boundary_.mesh(); }
  const ModuleLayouts& layouts() const { return boundary_.layouts(); }

 private:
  ModuleBoundary boundary_;
  std::shared_ptr<torch::nn::Module> module_;
  Forward forward_;
};

class ParallelStyle {
 public:
  virtual ~ParallelStyle() = default;
  // "ColwiseParallel", for messages.
  virtual std::string name() const = 0;
  // Lays the parameters of `module` (at `path`) that the style places over
  // `mesh_dim` of `mesh`, replicated over the other dims, and binds the
  // module to its layouts. Throws dtensor::Error for a module type the style
  // does not support. Collective over `mesh`.
  virtual ParallelModule apply_on(const std::string& path,
                                  const std::shared_ptr<torch::nn::Module>& module,
                                  const DeviceMesh& mesh, int64_t mesh_dim) const = 0;
  // The same over a 1-D mesh; throws dtensor::Error for another one.
  ParallelModule apply(const std::string& path, const std::shared_ptr<torch::nn::Module>& module,
                       const DeviceMesh& mesh) const;
};

// Shards a Linear's output features (weight [out, in] and bias: Shard(0)) or
// an Embedding's embedding dim (weight: Shard(1)). Input: Replicate (default
// input_layouts Replicate); output: Shard(-1) (default output_layouts).
class ColwiseParallel final : public ParallelStyle {
 public:
  explicit ColwiseParallel(StyleOptions options = {}) : options_(std::move(options)) {}
  std::string name() const override { return "ColwiseParallel"; }
  ParallelModule apply_on(const std::string& path, const std::shared_ptr<torch::nn::Module>& module,
                          const DeviceMesh& mesh, int64_t mesh_dim) const override;

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
  ParallelModule apply_on(const std::string& path, const std::shared_ptr<torch::nn::Module>& module,
                          const DeviceMesh& mesh, int64_t mesh_dim) const override;

 private:
  StyleOptions options_;
};

// A module that computes each position on its own (a norm over the hidden
// dim, dropout), run on the sequence split over the mesh dim: its input is
// brought to Shard(sequence_dim) (a plain input is read as that rank's
// positions), its parameters are replicated, and its output stays split
// (use_local_output: false by default). Replicated weights get Partial
// gradients: reduce them with reduce_gradients (dtensor/nn/reduce_gradients.h).
class SequenceParallel final : public ParallelStyle {
 public:
  explicit SequenceParallel(int64_t sequence_dim = 1, bool use_local_output = false)
      : sequence_dim_(sequence_dim), use_local_output_(use_local_output) {}
  std::string name() const override { return "SequenceParallel"; }
  ParallelModule apply_on(const std::string& path, const std::shared_ptr<torch::nn::Module>& module,
                          const DeviceMesh& mesh, int64_t mesh_dim) const override;

 private:
  int64_t sequence_dim_;
  bool use_local_output_;
};

// Brings any module's input from `input_layouts` (how a plain input is read;
// a DTensor keeps its own) to `desired_input_layouts` (required) before its
// forward(), a module boundary for gradients (see the file comment);
// parameters untouched, use_local_output false by default.
class PrepareModuleInput final : public ParallelStyle {
 public:
  explicit PrepareModuleInput(StyleOptions options) : options_(std::move(options)) {}
  std::string name() const override { return "PrepareModuleInput"; }
  ParallelModule apply_on(const std::string& path, const std::shared_ptr<torch::nn::Module>& module,
                          const DeviceMesh& mesh, int64_t mesh_dim) const override;

 private:
  StyleOptions options_;
};

// Brings any module's output to `desired_output_layouts` (required) after
// its forward(), a module boundary for gradients (see the file comment); a
// plain output is read as `output_layouts`. Parameters untouched,
// use_local_output true by default.
class PrepareModuleOutput final : public ParallelStyle {
 public:
  explicit PrepareModuleOutput(StyleOptions options) : options_(std::move(options)) {}
  std::string name() const override { return "PrepareModuleOutput"; }
  ParallelModule apply_on(const std::string& path, const std::shared_ptr<torch::nn::Module>& module,
                          const DeviceMesh& mesh, int64_t mesh_dim) const override;

 private:
  StyleOptions options_;
};

// Makes a style from its options (a registry value).
using ParallelStyleFactory =
    std::function<std::shared_ptr<const ParallelStyle>(const StyleOptions& options)>;

// Parallel styles by name ("ColwiseParallel", "RowwiseParallel",
// "SequenceParallel", "PrepareModuleInput", "PrepareModuleOutput", and any a
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
