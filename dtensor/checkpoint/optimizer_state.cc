// Copyright 2026 The dtensor Authors.
//
// The optimizer half of checkpoint.h: torch::optim state as a checkpoint
// state, named after the module's parameters.
#include <ATen/ATen.h>
#include <c10/util/Type.h>
#include <torch/nn/module.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/sgd.h>

#include <map>
#include <memory>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include <dtensor/base/check.h>
#include <dtensor/base/compat.h>
#include <dtensor/checkpoint/checkpoint.h>

namespace dtensor::checkpoint {
namespace {

using State = std::map<std::string, at::Tensor>;
using torch::optim::OptimizerOptions;
using torch::optim::OptimizerParamState;

// One parameter's state: the optimizer's own entry, or, where it has none
// yet, a new one as its first step would create it (zeros, step 0), kept in
// `created` until it is installed.
struct ParamEntry {
  std::string name;  // the parameter's in the module
  at::Tensor parameter;
  const OptimizerOptions* options;
  OptimizerParamState* state = nullptr;
  std::unique_ptr<OptimizerParamState> created;
};

// Adam's and AdamW's state, `ParamState` (AdamParamState or
// AdamWParamState) and `Options`: the same members under other types.
template <typename ParamState, typename Options>
struct AdamFamily {
  static std::unique_ptr<OptimizerParamState> fresh(const at::Tensor& parameter,
                                                    const OptimizerOptions& options) {
    auto state = std::make_unique<ParamState>();
    state->step(0);
    state->exp_avg(at::zeros_like(parameter, at::MemoryFormat::Preserve));
    state->exp_avg_sq(at::zeros_like(parameter, at::MemoryFormat::Preserve));
    if (static_cast<const Options&>(options).amsgrad())
      state->max_exp_avg_sq(at::zeros_like(parameter, at::MemoryFormat::Preserve));
    return state;
  }

  static void add(const ParamEntry& entry, const std::string& prefix, State& out) {
    auto& state = static_cast<ParamState&>(*entry.state);
    out.emplace(prefix + "exp_avg", state.exp_avg());
    out.emplace(prefix + "exp_avg_sq", state.exp_avg_sq());
    if (static_cast<const Options&>(*entry.options).amsgrad())
      out.emplace(prefix + "max_exp_avg_sq", state.max_exp_avg_sq());
    out.emplace(prefix + "step", at::scalar_tensor(state.step(), at::kLong));
  }

  static void set_step(const ParamEntry& entry, const std::string& prefix, const State& loaded) {
    static_cast<ParamState&>(*entry.state).step(loaded.at(prefix + "step").item<int64_t>());
  }
};

using AdamState = AdamFamily<torch::optim::AdamParamState, torch::optim::AdamOptions>;
using AdamWState = AdamFamily<torch::optim::AdamWParamState, torch::optim::AdamWOptions>;

// SGD keeps a momentum buffer where its momentum is not 0, nothing else.
struct SgdState {
  static std::unique_ptr<OptimizerParamState> fresh(const at::Tensor& parameter,
                                                    const OptimizerOptions& options) {
    if (static_cast<const torch::optim::SGDOptions&>(options).momentum() == 0) return nullptr;
    auto state = std::make_unique<torch::optim::SGDParamState>();
    state->momentum_buffer(at::zeros_like(parameter, at::MemoryFormat::Preserve));
    return state;
  }

  static void add(const ParamEntry& entry, const std::string& prefix, State& out) {
    if (entry.state == nullptr) return;
    out.emplace(prefix + "momentum_buffer",
                static_cast<torch::optim::SGDParamState&>(*entry.state).momentum_buffer());
  }

  static void set_step(const ParamEntry&, const std::string&, const State&) {}
};

// What checkpoints need of one optimizer's state, per optimizer type.
struct StateOps {
  // A parameter's state as the optimizer's first step creates it (none:
  // the optimizer keeps no state for it).
  std::unique_ptr<OptimizerParamState> (*fresh)(const at::Tensor& parameter,
                                                const OptimizerOptions& options);
  // Adds the entry's state as `prefix` + "exp_avg", ... to the state.
  void (*add)(const ParamEntry& entry, const std::string& prefix, State& out);
  // Sets the entry's values that are not tensors from the loaded state.
  void (*set_step)(const ParamEntry& entry, const std::string& prefix, const State& loaded);
};

template <typename Family>
StateOps ops_of() {
  return {&Family::fresh, &Family::add, &Family::set_step};
}

const StateOps& ops_for(const torch::optim::Optimizer& optimizer) {
  static const StateOps adam = ops_of<AdamState>();
  static const StateOps adamw = ops_of<AdamWState>();
  static const StateOps sgd = ops_of<SgdState>();
  if (dynamic_cast<const torch::optim::Adam*>(&optimizer) != nullptr) return adam;
  if (dynamic_cast<const torch::optim::AdamW*>(&optimizer) != nullptr) return adamw;
  if (dynamic_cast<const torch::optim::SGD*>(&optimizer) != nullptr) return sgd;
  DTENSOR_CHECK(false,
                "checkpoint: optimizer state: expected torch::optim::Adam, AdamW or SGD, found ",
                c10::demangle(typeid(optimizer).name()));
  return sgd;
}

std::string prefix_of(const ParamEntry& entry) { return "optim." + entry.name + "."; }

// The parameters of `optimizer`, group by group, with their state and their
// names in `module`; an entry is created (not installed) for each parameter
// without state.
std::vector<ParamEntry> param_entries(const torch::optim::Optimizer& optimizer, const StateOps& ops,
                                      const torch::nn::Module& module) {
  std::map<const c10::TensorImpl*, std::string> names;
  for (const auto& item : module.named_parameters(/*recurse=*/true))
    names.emplace(item.value().unsafeGetTensorImpl(), item.key());
  std::vector<ParamEntry> entries;
  const auto& groups = optimizer.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::vector<at::Tensor>& parameters = groups[g].params();
    for (size_t k = 0; k < parameters.size(); ++k) {
      const at::Tensor& parameter = parameters[k];
      const auto name = names.find(parameter.unsafeGetTensorImpl());
      DTENSOR_CHECK(name != names.end(), "checkpoint: optimizer state: parameter ", k,
                    " of param group ", g, ": expected one of the module's ", names.size(),
                    " parameters (its name names the state), found a tensor that is none");
      ParamEntry entry{name->second, parameter, &groups[g].options(), nullptr, nullptr};
      const auto found = optimizer.state().find(optimizer_state_key(optimizer.state(), parameter));
      if (found != optimizer.state().end()) {
        entry.state = found->second.get();
      } else {
        at::NoGradGuard no_grad;
        entry.created = ops.fresh(parameter, groups[g].options());
        entry.state = entry.created.get();
      }
      entries.push_back(std::move(entry));
    }
  }
  return entries;
}

std::string lr_name(size_t group) { return "optim.param_groups." + std::to_string(group) + ".lr"; }

State state_of(const torch::optim::Optimizer& optimizer, const StateOps& ops,
               const std::vector<ParamEntry>& entries) {
  State state;
  for (const ParamEntry& entry : entries) ops.add(entry, prefix_of(entry), state);
  const auto& groups = optimizer.param_groups();
  for (size_t g = 0; g < groups.size(); ++g)
    state.emplace(lr_name(g), at::scalar_tensor(groups[g].options().get_lr(), at::kDouble));
  return state;
}

}  // namespace

std::map<std::string, at::Tensor> state_dict(const torch::optim::Optimizer& optimizer,
                                             const torch::nn::Module& module) {
  const StateOps& ops = ops_for(optimizer);
  return state_of(optimizer, ops, param_entries(optimizer, ops, module));
}

void load_state_dict(torch::optim::Optimizer& optimizer, const torch::nn::Module& module,
                     const std::string& path) {
  const StateOps& ops = ops_for(optimizer);
  std::vector<ParamEntry> entries = param_entries(optimizer, ops, module);
  State state = state_of(optimizer, ops, entries);
  load(state, path);
  // Loaded on every rank: install the new entries and the values that are
  // not tensors in the optimizer.
  for (ParamEntry& entry : entries) {
    ops.set_step(entry, prefix_of(entry), state);
    if (entry.created) {
      optimizer.state()[optimizer_state_key(optimizer.state(), entry.parameter)] =
          std::move(entry.created);
    }
  }
  auto& groups = optimizer.param_groups();
  for (size_t g = 0; g < groups.size(); ++g)
    groups[g].options().set_lr(state.at(lr_name(g)).item<double>());
}

}  // namespace dtensor::checkpoint
