// Copyright 2026 The dtensor Authors.
//
// dtensor/nn/module_parameters.h: swapping a torch::nn::Module's registered
// parameter for a DTensor, in place.
//
// A DTensor is a different TensorImpl type, so a parameter cannot become one
// through `set_data`, and `register_parameter` refuses a name that exists.
// `replace_parameter` overwrites the registered entry itself, so that
// `parameters()`, `named_parameters()` and optimizers built afterwards see the
// DTensor. Many modules also keep a *copy* of each parameter in a member that
// forward() reads (LinearImpl::weight); that copy must follow, or forward()
// keeps computing with the old tensor:
//
//  - torch::nn::Linear, Embedding and LayerNorm: their `weight` / `bias`
//    members are updated here.
//  - Your own modules: read parameters from members and implement
//    `ParameterMembers` (below), or keep no member copy at all.
//
//   struct ScaleImpl : torch::nn::Module, dtensor::nn::ParameterMembers {
//     ScaleImpl() { scale = register_parameter("scale", torch::ones({4})); }
//     void rebind_parameter(const std::string& name, const at::Tensor& value) override {
//       if (name == "scale") scale = value;
//     }
//     at::Tensor forward(const at::Tensor& x) { return x * scale; }
//     at::Tensor scale;
//   };
//
// `distribute_module` (dtensor/nn/parallelize.h) checks afterwards that no
// old parameter is still referenced anywhere, so a forgotten member copy is
// an error rather than silently wrong training.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/UndefinedTensorImpl.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/nn/module.h>

namespace dtensor::nn {

// Implemented by modules whose forward() reads copies of their registered
// parameters from members: point the member called for `name` at `value`.
class ParameterMembers {
 public:
  virtual ~ParameterMembers() = default;
  virtual void rebind_parameter(const std::string& name, const at::Tensor& value) = 0;
  // The same for a buffer (replicate_buffers); by default none is copied.
  virtual void rebind_buffer(const std::string& /*name*/, const at::Tensor& /*value*/) {}
};

// Replaces the parameter `name` registered directly on `module` (no dotted
// paths) by `value`, a leaf tensor, and updates the member copy (see the file
// comment). `value` takes the old parameter's requires_grad. Throws
// dtensor::Error naming the module's parameters when `name` is not one.
void replace_parameter(torch::nn::Module& module, const std::string& name, at::Tensor value);

// Points the member copies of parameter `name` that `module`'s forward()
// reads (built-in modules' members, ParameterMembers) at `value`, leaving the
// registered parameter as it is: fully_shard's forward reads gathered
// parameters while the optimizer holds the sharded ones.
void rebind_parameter_members(torch::nn::Module& module, const std::string& name,
                              const at::Tensor& value);

// The parameter `name` registered directly on `module`; throws like
// replace_parameter.
const at::Tensor& registered_parameter(torch::nn::Module& module, const std::string& name);

// Replaces the buffer `name` registered directly on `module` by `value` and
// updates the member copy through ParameterMembers::rebind_buffer. Throws
// dtensor::Error naming the module's buffers when `name` is not one.
void replace_buffer(torch::nn::Module& module, const std::string& name, at::Tensor value);

// The module's type as users spell it, for messages: "torch::nn::Linear"
// (Module::name() without the "Impl" of the class behind the holder).
std::string module_type_name(const torch::nn::Module& module);

namespace nn_internal {

// Calls `visit(path, module)` on `module` and its descendants, parents
// first ("" for `module`, "layers.0.attention" below it). Walks children
// itself: Module::named_modules needs the root to be owned by a shared_ptr.
void walk(torch::nn::Module& module, const std::string& path,
          const std::function<void(const std::string&, torch::nn::Module&)>& visit);

// A parameter as it was before a call replaced it, watched without keeping
// it alive, so that a reference left behind anywhere is detected.
using WeakImpl = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
struct WatchedParameter {
  std::string name;
  const c10::TensorImpl* impl;
  WeakImpl keeps_address;  // `impl` is never reused meanwhile
};

// The parameters or the buffers registered directly on a module.
using NamedTensors = torch::OrderedDict<std::string, at::Tensor>;

std::vector<WatchedParameter> watch(const NamedTensors& entries);

// Every tensor of `watched` that `now` no longer holds must be referenced
// nowhere (a forgotten member copy, an optimizer built before the call).
// `what` names the call and `kind` the entries.
void check_no_stale_references(const char* what, const char* kind, const std::string& path,
                               const NamedTensors& now,
                               const std::vector<WatchedParameter>& watched);

}  // namespace nn_internal

}  // namespace dtensor::nn
