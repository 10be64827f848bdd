// Copyright 2026 The dtensor Authors.
#include <dtensor/nn/module_parameters.h>

#include <string_view>
#include <utility>
#include <vector>

#include <absl/strings/str_join.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <dtensor/base/check.h>

namespace dtensor::nn {
namespace {

using ParameterDict = torch::OrderedDict<std::string, at::Tensor>;

// torch::nn::Module keeps its parameters in the protected `parameters_` and
// its buffers in the private `buffers_`, and its public accessors return
// copies; replacing an entry needs the entry itself. A pointer to a protected
// member may be formed through a derived class; one to a private member only
// in an explicit instantiation, whose arguments C++ exempts from access
// checks ([temp.spec.general]): `ExposeMember` hands it out through a friend.
template <typename Tag, typename Tag::Pointer kMember>
struct ExposeMember {
  friend typename Tag::Pointer exposed(Tag) { return kMember; }
};
struct BuffersTag {
  using Pointer = ParameterDict torch::nn::Module::*;
  friend Pointer exposed(BuffersTag);
};
template struct ExposeMember<BuffersTag, &torch::nn::Module::buffers_>;

struct ModuleStorage : torch::nn::Module {
  static ParameterDict& parameters_of(torch::nn::Module& module) {
    return module.*(&ModuleStorage::parameters_);
  }
  static ParameterDict& buffers_of(torch::nn::Module& module) {
    return module.*exposed(BuffersTag{});
  }
};

at::Tensor& entry_in(ParameterDict& entries, torch::nn::Module& module, const char* kind,
                     const std::string& name) {
  at::Tensor* entry = entries.find(name);
  DTENSOR_CHECK(entry != nullptr, "module ", module_type_name(module), ": expected a ", kind,
                " called '", name, "', found only [", absl::StrJoin(entries.keys(), ", "), "]");
  return *entry;
}

at::Tensor& registered_entry(torch::nn::Module& module, const std::string& name) {
  return entry_in(ModuleStorage::parameters_of(module), module, "parameter", name);
}

// Points `name`'s member among `members` at `value`.
bool assign_member(const std::string& name, const at::Tensor& value,
                   std::initializer_list<std::pair<const char*, at::Tensor*>> members) {
  for (const auto& [member_name, member] : members) {
    if (name == member_name) {
      *member = value;
      return true;
    }
  }
  return false;
}

// The built-in modules whose forward() reads member copies of their
// parameters.
void rebind_builtin_member(torch::nn::Module& module, const std::string& name,
                           const at::Tensor& value) {
  if (auto* linear = dynamic_cast<torch::nn::LinearImpl*>(&module)) {
    assign_member(name, value, {{"weight", &linear->weight}, {"bias", &linear->bias}});
  } else if (auto* embedding = dynamic_cast<torch::nn::EmbeddingImpl*>(&module)) {
    assign_member(name, value, {{"weight", &embedding->weight}});
  } else if (auto* norm = dynamic_cast<torch::nn::LayerNormImpl*>(&module)) {
    assign_member(name, value, {{"weight", &norm->weight}, {"bias", &norm->bias}});
  }
}

}  // namespace

std::string module_type_name(const torch::nn::Module& module) {
  const std::string& name = module.name();
  constexpr std::string_view kImpl = "Impl";
  const bool holder_impl = name.size() > kImpl.size() &&
                           name.compare(name.size() - kImpl.size(), kImpl.size(), kImpl) == 0;
  return holder_impl ? name.substr(0, name.size() - kImpl.size()) : name;
}

const at::Tensor& registered_parameter(torch::nn::Module& module, const std::string& name) {
  return registered_entry(module, name);
}

void replace_parameter(torch::nn::Module& module, const std::string& name, at::Tensor value) {
  at::Tensor& entry = registered_entry(module, name);
  DTENSOR_CHECK(value.defined(), "replace_parameter: module ", module_type_name(module),
                ", parameter '", name, "': expected a tensor, found an undefined one");
  DTENSOR_CHECK(value.is_leaf(), "replace_parameter: module ", module_type_name(module),
                ", parameter '", name,
                "': expected a leaf tensor (a parameter), found the result of ",
                value.grad_fn()->name());
  value.set_requires_grad(entry.requires_grad());
  entry = value;
  rebind_parameter_members(module, name, value);
}

void rebind_parameter_members(torch::nn::Module& module, const std::string& name,
                              const at::Tensor& value) {
  rebind_builtin_member(module, name, value);
  if (auto* members = dynamic_cast<ParameterMembers*>(&module)) {
    members->rebind_parameter(name, value);
  }
}

void replace_buffer(torch::nn::Module& module, const std::string& name, at::Tensor value) {
  at::Tensor& entry = entry_in(ModuleStorage::buffers_of(module), module, "buffer", name);
  DTENSOR_CHECK(value.defined(), "replace_buffer: module ", module_type_name(module), ", buffer '",
                name, "': expected a tensor, found an undefined one");
  entry = value;
  if (auto* members = dynamic_cast<ParameterMembers*>(&module)) members->rebind_buffer(name, value);
}

namespace nn_internal {

void walk(torch::nn::Module& module, const std::string& path,
          const std::function<void(const std::string&, torch::nn::Module&)>& visit) {
  visit(path, module);
  for (const auto& child : module.named_children()) {
    walk(*child.value(), path.empty() ? child.key() : path + "." + child.key(), visit);
  }
}

std::vector<WatchedParameter> watch(const NamedTensors& entries) {
  std::vector<WatchedParameter> watched;
  for (const auto& entry : entries) {
    if (!entry->defined()) continue;
    watched.push_back(
        {entry.key(), entry->unsafeGetTensorImpl(), WeakImpl(entry->getIntrusivePtr())});
  }
  return watched;
}

void check_no_stale_references(const char* what, const char* kind, const std::string& path,
                               const NamedTensors& now,
                               const std::vector<WatchedParameter>& watched) {
  for (const WatchedParameter& old : watched) {
    const at::Tensor* current = now.find(old.name);
    if (current != nullptr && current->unsafeGetTensorImpl() == old.impl) continue;
    DTENSOR_CHECK(old.keeps_address.use_count() == 0, what, ": ", kind, " '",
                  path.empty() ? old.name : path + "." + old.name,
                  "' was replaced by a DTensor, but its old tensor is still referenced ",
                  old.keeps_address.use_count(),
                  " time(s) elsewhere: expected none. A member copy that forward() reads must "
                  "follow (implement dtensor::nn::ParameterMembers); build optimizers, parameter "
                  "lists and autograd graphs after distributing");
  }
}

}  // namespace nn_internal
}  // namespace dtensor::nn
