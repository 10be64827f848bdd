// Copyright 2026 The dtensor Authors.
#include <dtensor/nn/fully_shard.h>

#include <algorithm>

#include <mutex>
#include <string>
#include <utility>

#include <ATen/ATen.h>
#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

#include <dtensor/base/check.h>
#include <dtensor/dtensor.h>
#include <dtensor/nn/fsdp_param_group.h>
#include <dtensor/nn/module_hooks.h>
#include <dtensor/nn/module_parameters.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/placements/shard.h>
#include <dtensor/placements/strided_shard.h>

namespace dtensor::nn {
namespace {

using nn_internal::FsdpParam;
using nn_internal::FsdpParamGroup;

// Which modules fully_shard was applied to (each rank thread of the local
// backend has its own model, so one table serves them all). Entries hold
// the module weakly: a new module at a dead one's address is not sharded.
class FsdpRegistry {
 public:
  static FsdpRegistry& instance() {
    static FsdpRegistry registry;
    return registry;
  }
  std::shared_ptr<FsdpParamGroup> find(const torch::nn::Module& module) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(&module);
    if (it == entries_.end() || it->second.module.expired()) return nullptr;
    return it->second.group.lock();
  }
  void add(torch::nn::Module& module, const std::shared_ptr<FsdpParamGroup>& group) {
    std::lock_guard<std::mutex> lock(mutex_);
    absl::erase_if(entries_, [](const auto& entry) { return entry.second.module.expired(); });
    entries_[&module] = {module.shared_from_this(), group};
  }

 private:
  struct Entry {
    std::weak_ptr<torch::nn::Module> module;
    std::weak_ptr<FsdpParamGroup> group;
  };
  std::mutex mutex_;
  absl::flat_hash_map<const torch::nn::Module*, Entry> entries_;
};

std::shared_ptr<torch::nn::Module> shared_module(torch::nn::Module& module,
                                                 const std::string& path) {
  try {
    return module.shared_from_this();
  } catch (const std::bad_weak_ptr&) {
    DTENSOR_CHECK(false, "fully_shard: module '", path.empty() ? module_type_name(module) : path,
                  "': expected a module owned by a std::shared_ptr (a module holder or a ",
                  "registered submodule), found one that is not");
  }
}

// A parameter to shard, before sharding.
struct ParameterSite {
  torch::nn::Module* owner;
  std::string name;
  std::string path;
};

// The parameters of `module` and its descendants, except under modules
// fully_shard'ed before (whose groups go to `children`).
void collect(torch::nn::Module& module, const std::string& path, bool top,
             std::vector<ParameterSite>& sites,
             std::vector<std::shared_ptr<FsdpParamGroup>>& children) {
  if (!top) {
    if (std::shared_ptr<FsdpParamGroup> group = FsdpRegistry::instance().find(module)) {
      children.push_back(std::move(group));
      return;
    }
  }
  for (const auto& parameter : module.named_parameters(/*recurse=*/false)) {
    sites.push_back(
        {&module, parameter.key(), path.empty() ? parameter.key() : path + "." + parameter.key()});
  }
  for (const auto& child : module.named_children()) {
    collect(*child.value(), path.empty() ? child.key() : path + "." + child.key(), false, sites,
            children);
  }
}

// Where a tp-split parameter is stored: on the mesh of `dp`'s dims and its
// tp dim (in the root's order), the tp placement kept, dp's shard dim (its
// last) splitting dim 0 of each tp piece, an HSDP replicate dim replicated.
std::shared_ptr<const DTensorSpec> composed_spec(const DTensor& parameter, const DeviceMesh& dp,
                                                 const std::string& path) {
  const DeviceMesh& tp = parameter.mesh();
  DTENSOR_CHECK(tp.ndim() == 1, "fully_shard: parameter '", path, "' is a DTensor on ",
                tp.to_string(), "; expected a 1-D tp mesh, found a ", tp.ndim(), "-D one");
  const DeviceMesh root = dp.root();
  DTENSOR_CHECK(tp.root() == root, "fully_shard: parameter '", path, "' is a DTensor on ",
                tp.to_string(), ", expected a slice of the data-parallel mesh's root ",
                root.to_string());
  const std::string& tp_name = tp.dim_names().front();
  const std::vector<std::string>& dp_names = dp.dim_names();
  DTENSOR_CHECK(std::find(dp_names.begin(), dp_names.end(), tp_name) == dp_names.end(),
                "fully_shard: parameter '", path,
                "' is already laid out over the data-parallel mesh dim \"", tp_name, "\"");
  std::vector<std::string> names = dp_names;
  names.push_back(tp_name);
  std::sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
    return root.dim_index(a) < root.dim_index(b);
  });
  const DeviceMesh mesh = root[names];
  DTENSOR_CHECK(mesh[dp_names] == dp && mesh[tp_name] == tp, "fully_shard: parameter '", path,
                "': expected its tp mesh and the data-parallel mesh to be slices of one mesh "
                "around the calling rank, found ",
                tp.to_string(), " and ", dp.to_string());
  const PlacementPtr& tp_placement = parameter.placements().front();
  const bool tp_splits_rows = tp_placement->split_dim() == std::optional<int64_t>(0);
  DTENSOR_CHECK(tp_placement->is_replicate() || tp_placement->equals(*Shard::make(0)) ||
                    (tp_placement->split_dim().has_value() && !tp_splits_rows &&
                     tp_placement->equals(*Shard::make(*tp_placement->split_dim()))),
                "fully_shard: parameter '", path, "': expected a tp placement R or S(d), found ",
                tp_placement->to_string());
  // dp rank d must hold piece d of every tp piece of dim 0: tp's pieces
  // first, then dp's, which read left to right is StridedShard (design.md 2).
  const std::string& shard_name = dp_names.back();
  const bool shard_first = root.dim_index(shard_name) < root.dim_index(tp_name);
  std::vector<PlacementPtr> placements;
  for (const std::string& name : names) {
    if (name == tp_name) {
      placements.push_back(tp_placement);
    } else if (name == shard_name) {
      placements.push_back(shard_first && tp_splits_rows ? StridedShard::make(0, tp.size(0))
                                                         : Shard::make(0));
    } else {
      placements.push_back(Replicate::make());
    }
  }
  return std::make_shared<const DTensorSpec>(mesh, std::move(placements), parameter.sizes(),
                                             parameter.dtype());
}

FsdpParam make_param(const ParameterSite& site, const DeviceMesh& mesh,
                     const FullyShardOptions& options) {
  const at::Tensor original = registered_parameter(*site.owner, site.name);
  DTENSOR_CHECK(original.dim() >= 1, "fully_shard: parameter '", site.path,
                "': expected at least one dim (sharding splits dim 0), found a 0-dim tensor");
  at::NoGradGuard no_grad;
  FsdpParam param;
  param.owner = shared_module(*site.owner, site.path);
  param.name = site.name;
  param.path = site.path;
  at::Tensor data = original.detach();
  std::shared_ptr<const DTensorSpec> spec;
  if (is_dtensor(original)) {
    const DTensor parameter(original);
    param.tp_spec = parameter.spec_ptr();
    data = parameter.to_local();
    spec = composed_spec(parameter, mesh, site.path);
  } else {
    std::vector<PlacementPtr> placements(mesh.ndim(), Replicate::make());
    placements.back() = Shard::make(0);
    spec = std::make_shared<const DTensorSpec>(mesh, std::move(placements), original.sizes().vec(),
                                               original.scalar_type());
  }
  DTENSOR_CHECK(data.device() == mesh.device(), "fully_shard: parameter '", site.path,
                "': expected it on the mesh's device ", mesh.device(), ", found it on ",
                data.device());
  const int64_t ranks = mesh.size(-1);
  param.rows = data.size(0);
  param.row_numel =
      param.rows == 0 ? c10::multiply_integers(data.sizes().slice(1)) : data.numel() / param.rows;
  param.chunk_rows = (param.rows + ranks - 1) / ranks;
  const int64_t begin = std::min(param.rows, param.chunk_rows * mesh.get_local_rank(-1));
  const int64_t end = std::min(param.rows, begin + param.chunk_rows);
  param.sharded =
      DTensor(data.narrow(0, begin, end - begin).clone(at::MemoryFormat::Contiguous), spec)
          .tensor();
  const c10::ScalarType dtype = options.mp_policy.param_dtype.value_or(original.scalar_type());
  const at::Tensor gathered = at::empty(data.sizes(), data.options().dtype(dtype));
  if (param.tp_spec) {
    param.unsharded = DTensor(gathered, std::make_shared<const DTensorSpec>(
                                            param.tp_spec->mesh(), param.tp_spec->placements(),
                                            param.tp_spec->shape(), dtype))
                          .tensor();
  } else {
    param.unsharded = gathered;
  }
  param.unsharded.set_requires_grad(original.requires_grad());
  param.unsharded_data = gathered;
  return param;
}

void check_options(const DeviceMesh& mesh, const std::vector<ParameterSite>& sites) {
  DTENSOR_CHECK(mesh.ndim() == 1 || mesh.ndim() == 2,
                "fully_shard: expected a 1-D mesh (FSDP) or a 2-D one (HSDP: replicate, shard), "
                "found ",
                mesh.to_string());
  absl::flat_hash_set<const c10::TensorImpl*> seen;
  for (const ParameterSite& site : sites) {
    const at::Tensor& parameter = registered_parameter(*site.owner, site.name);
    DTENSOR_CHECK(seen.insert(parameter.unsafeGetTensorImpl()).second, "fully_shard: parameter '",
                  site.path, "' is registered twice in the group (tied parameters): expected ",
                  "each parameter once");
  }
}

void register_hooks(torch::nn::Module& module, const std::shared_ptr<FsdpParamGroup>& group) {
  register_forward_pre_hook(module,
                            [group](const at::Tensor& input) { return group->pre_forward(input); });
  register_forward_hook(module,
                        [group](const at::Tensor& output) { return group->post_forward(output); });
  absl::flat_hash_set<const torch::nn::Module*> owners{&module};
  for (const FsdpParam& param : group->params()) {
    std::shared_ptr<torch::nn::Module> owner = param.owner.lock();
    if (!owners.insert(owner.get()).second) continue;
    // A weak reference: the owner's hooks must not keep the group's
    // parameters alive after the module is gone.
    register_forward_pre_hook(
        *owner, [weak = std::weak_ptr<FsdpParamGroup>(group)](const at::Tensor& input) {
          if (std::shared_ptr<FsdpParamGroup> alive = weak.lock()) alive->unshard();
          return input;
        });
  }
}

}  // namespace

FSDPModule fully_shard(torch::nn::Module& module, const DeviceMesh& mesh,
                       FullyShardOptions options) {
  DTENSOR_CHECK(FsdpRegistry::instance().find(module) == nullptr, "fully_shard: module ",
                module_type_name(module), ": expected a module not fully_shard'ed yet, found one ",
                "that is");
  shared_module(module, "");
  std::vector<ParameterSite> sites;
  std::vector<std::shared_ptr<FsdpParamGroup>> children;
  collect(module, "", /*top=*/true, sites, children);
  check_options(mesh, sites);
  std::vector<FsdpParam> params;
  for (const ParameterSite& site : sites) params.push_back(make_param(site, mesh, options));
  std::shared_ptr<FsdpParamGroup> group = FsdpParamGroup::create(mesh, options, std::move(params));
  for (size_t i = 0; i < sites.size(); ++i) {
    const ParameterSite& site = sites[i];
    const std::vector<nn_internal::WatchedParameter> before =
        nn_internal::watch(site.owner->named_parameters(false));
    replace_parameter(*site.owner, site.name, group->params()[i].sharded);
    nn_internal::check_no_stale_references("fully_shard", "parameter", site.path,
                                           site.owner->named_parameters(false), before);
  }
  for (const std::shared_ptr<FsdpParamGroup>& child : children) {
    child->join(group->model_state());
    group->add_child(child);
  }
  register_hooks(module, group);
  FsdpRegistry::instance().add(module, group);
  return FSDPModule(group);
}

FSDPModule fsdp_module(const torch::nn::Module& module) {
  std::shared_ptr<FsdpParamGroup> group = FsdpRegistry::instance().find(module);
  DTENSOR_CHECK(group != nullptr, "fsdp_module: module ", module_type_name(module),
                ": expected a module fully_shard'ed before, found one that is not");
  return FSDPModule(std::move(group));
}

FSDPModule::FSDPModule(std::shared_ptr<nn_internal::FsdpParamGroup> group)
    : group_(std::move(group)) {}

void FSDPModule::unshard() const { group_->unshard(); }

void FSDPModule::reshard() const { group_->reshard(); }

void FSDPModule::set_requires_gradient_sync(bool requires_gradient_sync) const {
  group_->for_each_in_subtree(
      [&](FsdpParamGroup& group) { group.set_requires_gradient_sync(requires_gradient_sync); });
}

void FSDPModule::set_reshard_after_backward(bool reshard_after_backward) const {
  group_->for_each_in_subtree(
      [&](FsdpParamGroup& group) { group.set_reshard_after_backward(reshard_after_backward); });
}

void FSDPModule::set_prefetch(bool prefetch) const { group_->model_state()->prefetch = prefetch; }

std::vector<at::Tensor> FSDPModule::sharded_parameters() const {
  std::vector<at::Tensor> parameters;
  for (const FsdpParam& param : group_->params()) parameters.push_back(param.sharded);
  return parameters;
}

int64_t FSDPModule::unsharded_bytes() const { return group_->model_state()->unsharded_bytes; }

int64_t FSDPModule::peak_unsharded_bytes() const {
  return group_->model_state()->peak_unsharded_bytes;
}

}  // namespace dtensor::nn
