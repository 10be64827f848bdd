// Copyright 2026 The dtensor Authors.
#include <dtensor/nn/parallelize.h>

#include <algorithm>

#include <absl/strings/str_join.h>

#include <dtensor/base/check.h>
#include <dtensor/dtensor.h>
#include <dtensor/nn/module_hooks.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/redistribute/planner.h>

namespace dtensor::nn {
namespace {

using nn_internal::check_no_stale_references;
using nn_internal::walk;
using nn_internal::watch;
using nn_internal::WatchedParameter;

// The names of the parameters registered directly on `module` and defined
// (a Linear without bias registers an undefined "bias").
std::vector<std::string> defined_parameter_names(const torch::nn::Module& module) {
  std::vector<std::string> names;
  for (const auto& parameter : module.named_parameters(/*recurse=*/false)) {
    names.push_back(parameter.key());
  }
  return names;
}

void replicate_plain_parameters(torch::nn::Module& module, const DeviceMesh& mesh) {
  for (const std::string& name : defined_parameter_names(module)) {
    if (is_dtensor(registered_parameter(module, name))) continue;
    distribute_parameter(module, name, mesh,
                         std::vector<PlacementPtr>(mesh.ndim(), Replicate::make()));
  }
}

// A gradient reaching `parameter` in another layout takes the parameter's
// when that needs no communication: a replicated gradient of a sharded
// parameter (a parameter some op gathered in the forward, a softmax over its
// split dim, say) is sliced at once, so the full-size gradient does not
// outlive the backward pass. Changes that communicate stay for whoever uses the
// gradient (the optimizer's in-place update makes them).
void keep_gradients_in_parameter_layout(const at::Tensor& parameter) {
  if (!parameter.requires_grad()) return;
  parameter.register_hook([placements = DTensor(parameter).placements()](const at::Tensor& grad) {
    if (!grad.defined() || !is_dtensor(grad)) return grad;
    const DTensor gradient(grad);
    const DTensorSpec& from = gradient.spec();
    if (same_placements(from.placements(), placements) ||
        plan_redistribute(from, placements)->collectives() != 0) {
      return grad;
    }
    return gradient.redistribute(placements).tensor();
  });
}

}  // namespace

void distribute_parameter(torch::nn::Module& module, const std::string& name,
                          const DeviceMesh& mesh, const std::vector<PlacementPtr>& placements) {
  const at::Tensor& current = registered_parameter(module, name);
  DTENSOR_CHECK(!is_dtensor(current), "distribute_parameter: module ", module_type_name(module),
                ", parameter '", name, "': expected a plain tensor, found a DTensor laid out as ",
                is_dtensor(current) ? DTensor(current).spec().to_string() : "");
  // The first rank's values count, as PyTorch's src_data_rank=0: ranks whose
  // initializations differ (unseeded, or threads sharing one generator) still
  // build one model.
  at::Tensor laid_out = distribute_tensor(current, mesh, placements, mesh.ranks().front()).tensor();
  replace_parameter(module, name, std::move(laid_out));
  keep_gradients_in_parameter_layout(registered_parameter(module, name));
}

void distribute_module(torch::nn::Module& module, const DeviceMesh& mesh,
                       const PartitionFn& partition_fn) {
  walk(module, "", [&](const std::string& path, torch::nn::Module& submodule) {
    const std::vector<WatchedParameter> before = watch(submodule.named_parameters(false));
    if (partition_fn) partition_fn(path, submodule, mesh);
    replicate_plain_parameters(submodule, mesh);
    check_no_stale_references("distribute_module", "parameter", path,
                              submodule.named_parameters(false), before);
  });
}

void replicate_buffers(torch::nn::Module& module, const DeviceMesh& mesh) {
  const std::vector<PlacementPtr> replicated(mesh.ndim(), Replicate::make());
  walk(module, "", [&](const std::string& path, torch::nn::Module& submodule) {
    const std::vector<WatchedParameter> before = watch(submodule.named_buffers(false));
    for (const WatchedParameter& buffer : before) {
      const at::Tensor old = submodule.named_buffers(false)[buffer.name];
      if (is_dtensor(old)) continue;
      // The first rank's values, as for parameters.
      replace_buffer(submodule, buffer.name,
                     distribute_tensor(old, mesh, replicated, mesh.ranks().front()).tensor());
    }
    check_no_stale_references("replicate_buffers", "buffer", path, submodule.named_buffers(false),
                              before);
  });
}

const ParallelModule& ParallelModules::operator[](std::string_view path) const {
  auto found = std::find_if(modules_.begin(), modules_.end(),
                            [&](const ParallelModule& m) { return m.path() == path; });
  if (found == modules_.end()) {
    std::vector<std::string> paths;
    for (const ParallelModule& m : modules_) paths.push_back("'" + m.path() + "'");
    DTENSOR_CHECK(false, "ParallelModules: expected a parallelized module at '", path,
                  "', found only [", absl::StrJoin(paths, ", "), "]");
  }
  return *found;
}

bool ParallelModules::contains(std::string_view path) const {
  return std::any_of(modules_.begin(), modules_.end(),
                     [&](const ParallelModule& m) { return m.path() == path; });
}

namespace {

std::shared_ptr<torch::nn::Module> submodule_at(torch::nn::Module& root, const std::string& path) {
  if (path.empty()) return root.shared_from_this();
  const auto modules = root.named_modules(/*name_prefix=*/"", /*include_self=*/false);
  if (const std::shared_ptr<torch::nn::Module>* found = modules.find(path)) return *found;
  std::vector<std::string> paths;
  for (const std::string& key : modules.keys()) paths.push_back("'" + key + "'");
  DTENSOR_CHECK(false, "parallelize_module: expected a submodule at '", path, "' of ",
                module_type_name(root), ", found only [", absl::StrJoin(paths, ", "), "]");
  return nullptr;
}

void check_distinct_paths(const ParallelizePlan& plan) {
  for (size_t i = 0; i < plan.size(); ++i) {
    DTENSOR_CHECK(plan[i].style != nullptr, "parallelize_module: plan entry '", plan[i].path,
                  "': expected a style, found null");
    for (size_t j = 0; j < i; ++j) {
      DTENSOR_CHECK(plan[i].path != plan[j].path,
                    "parallelize_module: expected each path once "
                    "in the plan, found '",
                    plan[i].path, "' twice");
    }
  }
}

}  // namespace

namespace {

// Runs the module's layouts wherever dtensor::nn::call runs it. The hooks
// hold the boundary only: the table of hooks must not keep the module alive.
void register_layout_hooks(const ParallelModule& parallel) {
  const ModuleBoundary& boundary = parallel.boundary();
  if (boundary.layouts().desired_input) {
    register_forward_pre_hook(parallel.module(), [boundary](const at::Tensor& input) {
      return boundary.prepare_input(input);
    });
  }
  if (boundary.layouts().output) {
    register_forward_hook(parallel.module(), [boundary](const at::Tensor& output) {
      return boundary.prepare_output(output);
    });
  }
}

ParallelModules apply_plan(torch::nn::Module& module, const DeviceMesh& mesh,
                           const ParallelizePlan& plan, int64_t mesh_dim) {
  check_distinct_paths(plan);
  std::vector<ParallelModule> modules;
  for (const PlanEntry& entry : plan) {
    modules.push_back(
        entry.style->apply_on(entry.path, submodule_at(module, entry.path), mesh, mesh_dim));
    register_layout_hooks(modules.back());
  }
  return ParallelModules(std::move(modules));
}

}  // namespace

ParallelModules parallelize_module(torch::nn::Module& module, const DeviceMesh& mesh,
                                   const ParallelizePlan& plan) {
  DTENSOR_CHECK(mesh.ndim() == 1,
                "parallelize_module: expected a 1-D mesh, or the name or index "
                "of the mesh dim to parallelize over; found ",
                mesh.to_string());
  return apply_plan(module, mesh, plan, 0);
}

ParallelModules parallelize_module(torch::nn::Module& module, const DeviceMesh& mesh,
                                   const ParallelizePlan& plan, std::string_view mesh_dim,
                                   MeshScope scope) {
  if (scope == MeshScope::kPerGroup) return parallelize_module(module, mesh[mesh_dim], plan);
  return apply_plan(module, mesh, plan, mesh.dim_index(mesh_dim));
}

ParallelModules parallelize_module(torch::nn::Module& module, const DeviceMesh& mesh,
                                   const ParallelizePlan& plan, int64_t mesh_dim, MeshScope scope) {
  DTENSOR_CHECK(mesh_dim >= -mesh.ndim() && mesh_dim < mesh.ndim(),
                "parallelize_module: mesh_dim: expected a dim of ", mesh.to_string(), ", found ",
                mesh_dim);
  const int64_t dim = mesh_dim < 0 ? mesh_dim + mesh.ndim() : mesh_dim;
  return parallelize_module(module, mesh, plan, mesh.dim_names()[dim], scope);
}

}  // namespace dtensor::nn
