// Copyright 2026 The dtensor Authors.
#include <dtensor/spmd/local_map.h>

#include <string>
#include <utility>

#include <dtensor/base/check.h>
#include <dtensor/core/tensor_impl.h>
#include <dtensor/dtensor.h>
#include <dtensor/placements/partial.h>
#include <dtensor/placements/replicate.h>

namespace dtensor {
namespace {

// How the gradient of a local tensor laid out as `placements` is held, by
// its local SPMD type per mesh dim: Replicate's is a pending sum, Partial's
// the same whole gradient on every rank, a split's split alike.
std::vector<PlacementPtr> local_gradient_placements(const std::vector<PlacementPtr>& placements) {
  std::vector<PlacementPtr> out = placements;
  for (PlacementPtr& p : out) {
    if (p->is_replicate()) {
      p = Partial::make();
    } else if (p->is_partial()) {
      p = Replicate::make();
    }
  }
  return out;
}

void check_count(const char* what, size_t expected, const char* per, size_t found) {
  DTENSOR_CHECK(found == expected, "local_map: ", what, ": expected one per ", per, " (", expected,
                "), found ", found);
}

void check_placements(const std::string& what, const std::vector<PlacementPtr>& placements,
                      const DeviceMesh& mesh) {
  check_count(what.c_str(), static_cast<size_t>(mesh.ndim()), "mesh dim", placements.size());
  for (const PlacementPtr& p : placements) {
    DTENSOR_CHECK(p != nullptr, "local_map: ", what, ": expected placements, found null");
  }
}

// The local tensor `fn` gets for input `index`.
at::Tensor local_input(const at::Tensor& input, size_t index, const OptionalPlacements& wanted,
                       const DeviceMesh& mesh, const LocalMapOptions& options) {
  const std::string name = "in_placements[" + std::to_string(index) + "]";
  if (!is_dtensor(input)) {
    DTENSOR_CHECK(!wanted, "local_map: input ", index, " is a plain tensor: expected nullopt ",
                  name, ", found ", wanted ? placements_to_string(*wanted) : "");
    return input;
  }
  DTensor tensor(input);
  DTENSOR_CHECK(wanted, "local_map: input ", index, " is a DTensor laid out as ",
                placements_to_string(tensor.placements()), ": expected placements in ", name,
                ", found nullopt");
  check_placements(name, *wanted, mesh);
  DTENSOR_CHECK(tensor.mesh() == mesh, "local_map: input ", index, ": expected a DTensor on ",
                mesh.to_string(), ", found one on ", tensor.mesh().to_string());
  if (!same_placements(tensor.placements(), *wanted)) {
    DTENSOR_CHECK(options.redistribute_inputs, "local_map: input ", index, ": expected placements ",
                  placements_to_string(*wanted), " (", name, "), found ",
                  placements_to_string(tensor.placements()),
                  "; redistribute it first or set LocalMapOptions::redistribute_inputs");
    tensor = tensor.redistribute(*wanted);
  }
  return tensor.to_local(local_gradient_placements(*wanted));
}

// Output `index` of `fn`, wrapped as `placements` says.
at::Tensor wrap_output(const at::Tensor& output, size_t index, const OptionalPlacements& placements,
                       const DeviceMesh& mesh) {
  if (!placements) return output;
  check_placements("out_placements[" + std::to_string(index) + "]", *placements, mesh);
  FromLocalOptions from_local_options;
  from_local_options.run_check = false;
  from_local_options.grad_placements = local_gradient_placements(*placements);
  return from_local(output, mesh, *placements, std::move(from_local_options)).tensor();
}

}  // namespace

LocalMapFunction local_map(LocalMapFunction fn, std::vector<OptionalPlacements> out_placements,
                           std::vector<OptionalPlacements> in_placements, DeviceMesh mesh,
                           LocalMapOptions options) {
  DTENSOR_CHECK(fn != nullptr, "local_map: expected a function, found none");
  return [fn = std::move(fn), out_placements = std::move(out_placements),
          in_placements = std::move(in_placements), mesh = std::move(mesh),
          options](const std::vector<at::Tensor>& inputs) {
    check_count("in_placements", inputs.size(), "input", in_placements.size());
    std::vector<at::Tensor> locals;
    locals.reserve(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      locals.push_back(local_input(inputs[i], i, in_placements[i], mesh, options));
    }
    std::vector<at::Tensor> outputs = fn(locals);
    check_count("out_placements", outputs.size(), "output of fn", out_placements.size());
    for (size_t i = 0; i < outputs.size(); ++i) {
      outputs[i] = wrap_output(outputs[i], i, out_placements[i], mesh);
    }
    return outputs;
  };
}

}  // namespace dtensor
