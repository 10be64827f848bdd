// Copyright 2026 The dtensor Authors.
#include <dtensor/nn/parallel_style.h>

#include <optional>
#include <utility>
#include <vector>

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <absl/strings/str_join.h>
#include <dtensor/autograd/layout_functions.h>
#include <dtensor/base/check.h>
#include <dtensor/dtensor.h>
#include <dtensor/nn/parallelize.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/placements/shard.h>

namespace dtensor::nn {
namespace {

// `placements` with the entry of `mesh_dim` replaced by `placement` (for a
// tensor of `ndim` dims).
std::vector<PlacementPtr> with_mesh_dim(std::vector<PlacementPtr> placements, int64_t mesh_dim,
                                        const PlacementPtr& placement, int64_t ndim) {
  placements[mesh_dim] = placement->normalized(ndim);
  return placements;
}

// A module's input or output as a DTensor of `mesh`: a DTensor as it is, a
// plain tensor read as the calling rank's part of `plain_layout` (1-D
// meshes only: on more dims, what a plain tensor holds along the others is
// unknown).
DTensor as_dtensor(const at::Tensor& tensor, const DeviceMesh& mesh,
                   const PlacementPtr& plain_layout, const std::string& path, const char* what) {
  DTENSOR_CHECK(tensor.defined(), what, " of '", path,
                "': expected a tensor, found an undefined one");
  if (is_dtensor(tensor)) {
    const DTensor dtensor(tensor);
    DTENSOR_CHECK(dtensor.mesh() == mesh, what, " of '", path, "': expected a DTensor on ",
                  mesh.to_string(), ", found one on ", dtensor.mesh().to_string());
    return dtensor;
  }
  DTENSOR_CHECK(mesh.ndim() == 1, what, " of '", path, "': expected a DTensor on ",
                mesh.to_string(),
                " (a plain tensor's layout over the mesh's other dims is unknown), found a plain "
                "tensor of shape ",
                tensor.sizes());
  DTENSOR_CHECK(plain_layout != nullptr, what, " of '", path,
                "': expected a DTensor (the style has no layout for a plain tensor), found a plain "
                "tensor of shape ",
                tensor.sizes());
  return from_local(tensor, mesh, {plain_layout->normalized(tensor.dim())});
}

// `tensor` with `placement` on `mesh_dim`; at a module boundary, the gradient
// goes back to `tensor`'s layout even when nothing moves.
DTensor relayout(const DTensor& tensor, int64_t mesh_dim, const PlacementPtr& placement,
                 bool boundary) {
  RedistributeOptions options;
  if (boundary) options.grad_placements = gradient_placements(tensor.placements());
  return tensor.redistribute(
      with_mesh_dim(tensor.placements(), mesh_dim, placement, tensor.tensor().dim()), options);
}

}  // namespace

ModuleBoundary::ModuleBoundary(std::string path, DeviceMesh mesh, ModuleLayouts layouts)
    : path_(std::move(path)), mesh_(std::move(mesh)), layouts_(std::move(layouts)) {}

ParallelModule::ParallelModule(ModuleBoundary boundary, std::shared_ptr<torch::nn::Module> module,
                               Forward forward)
    : boundary_(std::move(boundary)), module_(std::move(module)), forward_(std::move(forward)) {}

at::Tensor ModuleBoundary::prepare_input(const at::Tensor& input) const {
  if (!layouts_.desired_input) return input;
  const DTensor prepared =
      relayout(as_dtensor(input, mesh_, layouts_.input, path_, "prepare_input"), layouts_.mesh_dim,
               layouts_.desired_input, layouts_.boundary);
  return layouts_.use_local_input ? prepared.to_local() : prepared.tensor();
}

at::Tensor ModuleBoundary::prepare_output(const at::Tensor& output) const {
  if (!layouts_.output) return output;
  DTENSOR_CHECK(layouts_.plain_output != nullptr || (output.defined() && is_dtensor(output)),
                "prepare_output of '", path_,
                "': expected the DTensor that the module's forward() returned, found a plain "
                "tensor (was the input passed through prepare_input?)");
  const DTensor prepared =
      relayout(as_dtensor(output, mesh_, layouts_.plain_output, path_, "prepare_output"),
               layouts_.mesh_dim, layouts_.output, layouts_.boundary);
  return layouts_.use_local_output ? prepared.to_local() : prepared.tensor();
}

at::Tensor ParallelModule::forward(const at::Tensor& input) const {
  DTENSOR_CHECK(forward_ != nullptr, "forward of '", path(),
                "': expected a module with a known forward, found ", module_type_name(*module_),
                "; call it through dtensor::nn::call (the plan's hooks run there) instead");
  return prepare_output(forward_(prepare_input(input)));
}

ParallelModule ParallelStyle::apply(const std::string& path,
                                    const std::shared_ptr<torch::nn::Module>& module,
                                    const DeviceMesh& mesh) const {
  DTENSOR_CHECK(mesh.ndim() == 1, name(), " at '", path, "': expected a 1-D mesh, found ",
                mesh.to_string());
  return apply_on(path, module, mesh, 0);
}

namespace {

enum class ModuleKind { kLinear, kEmbedding, kOther };

// A module's kind and, for the types the built-in styles split, its forward.
struct KnownModule {
  ModuleKind kind = ModuleKind::kOther;
  ParallelModule::Forward forward;
};

KnownModule known_module(const std::shared_ptr<torch::nn::Module>& module) {
  if (auto linear = std::dynamic_pointer_cast<torch::nn::LinearImpl>(module)) {
    return {ModuleKind::kLinear, [linear](const at::Tensor& x) { return linear->forward(x); }};
  }
  if (auto embedding = std::dynamic_pointer_cast<torch::nn::EmbeddingImpl>(module)) {
    return {ModuleKind::kEmbedding,
            [embedding](const at::Tensor& x) { return embedding->forward(x); }};
  }
  return {};
}

// Lays the named parameters registered directly on `module` out as
// `placement` on `mesh_dim`, replicated on the other dims; the module's
// other parameters replicated. Missing or undefined ones (a Linear without
// bias) are skipped. Throws when an old parameter is still referenced.
void place_parameters(torch::nn::Module& module, const DeviceMesh& mesh, int64_t mesh_dim,
                      const std::vector<std::pair<std::string, PlacementPtr>>& parameters) {
  distribute_module(module, mesh,
                    [&](const std::string& subpath, torch::nn::Module& m, const DeviceMesh& on) {
                      if (!subpath.empty()) return;
                      for (const auto& [name, placement] : parameters) {
                        if (m.named_parameters(/*recurse=*/false).find(name) == nullptr) continue;
                        std::vector<PlacementPtr> placements(on.ndim(), Replicate::make());
                        placements[mesh_dim] = placement;
                        distribute_parameter(m, name, on, placements);
                      }
                    });
}

// How a split style lays out one module type: its parameters' placements,
// the input layout it computes on, and its defaults for StyleOptions.
struct Recipe {
  std::vector<std::pair<std::string, PlacementPtr>> parameters;
  PlacementPtr desired_input;
  PlacementPtr default_input;
  PlacementPtr default_output;
};

ParallelModule apply_recipe(const std::string& style, const StyleOptions& options,
                            const std::string& path,
                            const std::shared_ptr<torch::nn::Module>& module,
                            const DeviceMesh& mesh, int64_t mesh_dim,
                            Recipe (*recipe_for)(ModuleKind)) {
  KnownModule known = known_module(module);
  DTENSOR_CHECK(known.kind != ModuleKind::kOther, style, " at '", path,
                "': expected a torch::nn::Linear or torch::nn::Embedding (the module types it "
                "supports), found ",
                module_type_name(*module));
  const Recipe recipe = recipe_for(known.kind);
  place_parameters(*module, mesh, mesh_dim, recipe.parameters);
  ModuleLayouts layouts;
  layouts.mesh_dim = mesh_dim;
  layouts.input = options.input_layouts ? options.input_layouts : recipe.default_input;
  layouts.desired_input = recipe.desired_input;
  layouts.output = options.output_layouts ? options.output_layouts : recipe.default_output;
  layouts.use_local_output = options.use_local_output.value_or(true);
  return ParallelModule(ModuleBoundary(path, mesh, std::move(layouts)), module,
                        std::move(known.forward));
}

Recipe colwise_recipe(ModuleKind kind) {
  const PlacementPtr features = Shard::make(-1);
  if (kind == ModuleKind::kLinear) {
    // weight [out, in]: each rank computes its slice of the output features.
    return {{{"weight", Shard::make(0)}, {"bias", Shard::make(0)}},
            Replicate::make(),
            Replicate::make(),
            features};
  }
  // weight [vocab, dim]: each rank looks up its slice of the embedding dim.
  return {{{"weight", Shard::make(1)}}, Replicate::make(), Replicate::make(), features};
}

Recipe rowwise_recipe(ModuleKind kind) {
  if (kind == ModuleKind::kLinear) {
    // Each rank contracts its slice of the input features: Partial(sum)
    // outputs, to which the replicated bias is added once.
    return {{{"weight", Shard::make(1)}, {"bias", Replicate::make()}},
            Shard::make(-1),
            Shard::make(-1),
            Replicate::make()};
  }
  // Each rank looks up the ids in its vocabulary rows: a masked Partial(sum).
  return {{{"weight", Shard::make(0)}}, Replicate::make(), Replicate::make(), Replicate::make()};
}

// The layouts of a style that moves activations only.
ParallelModule activations_only(const std::string& path,
                                const std::shared_ptr<torch::nn::Module>& module,
                                const DeviceMesh& mesh, ModuleLayouts layouts) {
  return ParallelModule(ModuleBoundary(path, mesh, std::move(layouts)), module,
                        known_module(module).forward);
}

}  // namespace

ParallelModule ColwiseParallel::apply_on(const std::string& path,
                                         const std::shared_ptr<torch::nn::Module>& module,
                                         const DeviceMesh& mesh, int64_t mesh_dim) const {
  return apply_recipe(name(), options_, path, module, mesh, mesh_dim, colwise_recipe);
}

ParallelModule RowwiseParallel::apply_on(const std::string& path,
                                         const std::shared_ptr<torch::nn::Module>& module,
                                         const DeviceMesh& mesh, int64_t mesh_dim) const {
  return apply_recipe(name(), options_, path, module, mesh, mesh_dim, rowwise_recipe);
}

ParallelModule SequenceParallel::apply_on(const std::string& path,
                                          const std::shared_ptr<torch::nn::Module>& module,
                                          const DeviceMesh& mesh, int64_t mesh_dim) const {
  place_parameters(*module, mesh, mesh_dim, {});  // all replicated
  ModuleLayouts layouts;
  layouts.mesh_dim = mesh_dim;
  layouts.input = Shard::make(sequence_dim_);
  layouts.desired_input = Shard::make(sequence_dim_);
  layouts.use_local_output = use_local_output_;
  if (use_local_output_) layouts.output = Shard::make(sequence_dim_);
  return activations_only(path, module, mesh, std::move(layouts));
}

ParallelModule PrepareModuleInput::apply_on(const std::string& path,
                                            const std::shared_ptr<torch::nn::Module>& module,
                                            const DeviceMesh& mesh, int64_t mesh_dim) const {
  DTENSOR_CHECK(options_.desired_input_layouts != nullptr, name(), " at '", path,
                "': expected desired_input_layouts, found none");
  ModuleLayouts layouts;
  layouts.mesh_dim = mesh_dim;
  layouts.input = options_.input_layouts;
  layouts.desired_input = options_.desired_input_layouts;
  layouts.use_local_input = options_.use_local_output.value_or(false);
  layouts.boundary = true;
  return activations_only(path, module, mesh, std::move(layouts));
}

ParallelModule PrepareModuleOutput::apply_on(const std::string& path,
                                             const std::shared_ptr<torch::nn::Module>& module,
                                             const DeviceMesh& mesh, int64_t mesh_dim) const {
  DTENSOR_CHECK(options_.desired_output_layouts != nullptr, name(), " at '", path,
                "': expected desired_output_layouts, found none");
  ModuleLayouts layouts;
  layouts.mesh_dim = mesh_dim;
  layouts.plain_output = options_.output_layouts;
  layouts.output = options_.desired_output_layouts;
  layouts.use_local_output = options_.use_local_output.value_or(true);
  layouts.boundary = true;
  return activations_only(path, module, mesh, std::move(layouts));
}

Registry<ParallelStyleFactory>& parallel_styles() {
  static auto* registry = new Registry<ParallelStyleFactory>(
      "parallel style registry", Registry<ParallelStyleFactory>::PerKey::kOneValue);
  return *registry;
}

std::shared_ptr<const ParallelStyle> parallel_style(std::string_view name,
                                                    const StyleOptions& options) {
  const auto factory = parallel_styles().find(name);
  DTENSOR_CHECK(factory != nullptr, "parallel_style: expected a registered style (",
                absl::StrJoin(parallel_styles().keys(), ", "), "), found \"", name, "\"");
  return factory->front()(options);
}

DTENSOR_REGISTER(builtin_parallel_styles) {
  parallel_styles().add("ColwiseParallel", [](const StyleOptions& options) {
    return std::make_shared<const ColwiseParallel>(options);
  });
  parallel_styles().add("RowwiseParallel", [](const StyleOptions& options) {
    return std::make_shared<const RowwiseParallel>(options);
  });
  parallel_styles().add("SequenceParallel", [](const StyleOptions& options) {
    DTENSOR_CHECK(!options.input_layouts && !options.desired_input_layouts &&
                      !options.output_layouts && !options.desired_output_layouts,
                  "parallel_style(\"SequenceParallel\"): expected use_local_output only (the "
                  "sequence dim is 1), found layouts");
    return std::make_shared<const SequenceParallel>(1, options.use_local_output.value_or(false));
  });
  parallel_styles().add("PrepareModuleInput", [](const StyleOptions& options) {
    return std::make_shared<const PrepareModuleInput>(options);
  });
  parallel_styles().add("PrepareModuleOutput", [](const StyleOptions& options) {
    return std::make_shared<const PrepareModuleOutput>(options);
  });
}

}  // namespace dtensor::nn
