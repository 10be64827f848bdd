// Copyright 2026 The dtensor Authors.
#include <dtensor/nn/parallel_style.h>

#include <optional>
#include <utility>
#include <vector>

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <absl/strings/str_join.h>
#include <dtensor/base/check.h>
#include <dtensor/dtensor.h>
#include <dtensor/nn/parallelize.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/placements/shard.h>

namespace dtensor::nn {

ParallelModule::ParallelModule(std::string path, std::shared_ptr<torch::nn::Module> module,
                               DeviceMesh mesh, ModuleLayouts layouts, Forward forward)
    : path_(std::move(path)),
      module_(std::move(module)),
      mesh_(std::move(mesh)),
      layouts_(std::move(layouts)),
      forward_(std::move(forward)) {}

at::Tensor ParallelModule::prepare_input(const at::Tensor& input) const {
  DTENSOR_CHECK(input.defined(), "prepare_input of '", path_,
                "': expected a tensor, found an undefined one");
  const int64_t ndim = input.dim();
  const DTensor laid_out = is_dtensor(input)
                               ? DTensor(input)
                               : from_local(input, mesh_, {layouts_.input->normalized(ndim)});
  DTENSOR_CHECK(laid_out.mesh() == mesh_, "prepare_input of '", path_, "': expected a DTensor on ",
                mesh_.to_string(), ", found one on ", laid_out.mesh().to_string());
  return laid_out.redistribute({layouts_.desired_input->normalized(ndim)}).tensor();
}

at::Tensor ParallelModule::prepare_output(const at::Tensor& output) const {
  DTENSOR_CHECK(output.defined() && is_dtensor(output), "prepare_output of '", path_,
                "': expected the DTensor that the module's forward() returned, found a plain "
                "tensor (was the input passed through prepare_input?)");
  const DTensor laid_out =
      DTensor(output).redistribute({layouts_.output->normalized(output.dim())});
  return layouts_.use_local_output ? laid_out.to_local() : laid_out.tensor();
}

at::Tensor ParallelModule::forward(const at::Tensor& input) const {
  DTENSOR_CHECK(forward_ != nullptr, "forward of '", path_,
                "': expected a module with a known forward, found ", module_type_name(*module_),
                "; call prepare_input and prepare_output around its forward() instead");
  return prepare_output(forward_(prepare_input(input)));
}

namespace {

enum class ModuleKind { kLinear, kEmbedding };

// A module type that the built-in styles support, and its forward.
struct SupportedModule {
  ModuleKind kind;
  ParallelModule::Forward forward;
};

std::optional<SupportedModule> supported_module(const std::shared_ptr<torch::nn::Module>& module) {
  if (auto linear = std::dynamic_pointer_cast<torch::nn::LinearImpl>(module)) {
    return SupportedModule{ModuleKind::kLinear,
                           [linear](const at::Tensor& x) { return linear->forward(x); }};
  }
  if (auto embedding = std::dynamic_pointer_cast<torch::nn::EmbeddingImpl>(module)) {
    return SupportedModule{ModuleKind::kEmbedding,
                           [embedding](const at::Tensor& x) { return embedding->forward(x); }};
  }
  return std::nullopt;
}

// How a style lays out one module type: its parameters' placements, the
// input layout it computes on, and its defaults for StyleOptions.
struct Recipe {
  std::vector<std::pair<std::string, PlacementPtr>> parameters;
  PlacementPtr desired_input;
  PlacementPtr default_input;
  PlacementPtr default_output;
};

ParallelModule apply_recipe(const std::string& style, const StyleOptions& options,
                            const std::string& path,
                            const std::shared_ptr<torch::nn::Module>& module,
                            const DeviceMesh& mesh, Recipe (*recipe_for)(ModuleKind)) {
  DTENSOR_CHECK(mesh.ndim() == 1, style, " at '", path, "': expected a 1-D mesh, found ",
                mesh.to_string());
  std::optional<SupportedModule> supported = supported_module(module);
  DTENSOR_CHECK(supported.has_value(), style, " at '", path,
                "': expected a torch::nn::Linear or torch::nn::Embedding (the module types it "
                "supports), found ",
                module_type_name(*module));
  const Recipe recipe = recipe_for(supported->kind);
  distribute_module(*module, mesh,
                    [&](const std::string& subpath, torch::nn::Module& m, const DeviceMesh& mesh) {
                      if (!subpath.empty()) return;
                      for (const auto& [name, placement] : recipe.parameters) {
                        if (!registered_parameter(m, name).defined()) continue;  // bias=false
                        distribute_parameter(m, name, mesh, {placement});
                      }
                    });
  ModuleLayouts layouts;
  layouts.input = options.input_layouts ? options.input_layouts : recipe.default_input;
  layouts.desired_input = recipe.desired_input;
  layouts.output = options.output_layouts ? options.output_layouts : recipe.default_output;
  layouts.use_local_output = options.use_local_output;
  return ParallelModule(path, module, mesh, std::move(layouts), std::move(supported->forward));
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

}  // namespace

ParallelModule ColwiseParallel::apply(const std::string& path,
                                      const std::shared_ptr<torch::nn::Module>& module,
                                      const DeviceMesh& mesh) const {
  return apply_recipe(name(), options_, path, module, mesh, colwise_recipe);
}

ParallelModule RowwiseParallel::apply(const std::string& path,
                                      const std::shared_ptr<torch::nn::Module>& module,
                                      const DeviceMesh& mesh) const {
  return apply_recipe(name(), options_, path, module, mesh, rowwise_recipe);
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
}

}  // namespace dtensor::nn
