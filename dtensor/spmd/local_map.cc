// Copyright 2026 The dtensor Authors.
#include <dtensor/spmd/local_map.h>

#include <string>
#include <utility>

#include <dtensor/base/check.h>
#include <dtensor/core/tensor_impl.h>
#include <dtensor/dtensor.h>
#include <dtensor/placements/partial.h>
#include <dtensor/placements/replicate.h>
#include "absl/strings/str_join.h"

namespace dtensor {
namespace {

// The SPMD type of a local tensor laid out as `p` on one mesh dim.
spmd::Type placement_type(const Placement& p) {
  if (p.is_replicate()) return spmd::Type::kReplicate;
  return p.is_partial() ? spmd::Type::kPartial : spmd::Type::kVarying;
}

spmd::Types placement_types(const std::vector<PlacementPtr>& placements) {
  spmd::Types types;
  for (const PlacementPtr& p : placements) types.push_back(placement_type(*p));
  return types;
}

// How the gradient of a local tensor laid out as `placements` with `types`
// is held: a pending sum's is the same whole gradient on every rank (also
// where the tensor is a Varying term of it), a Replicate value's is a
// pending sum, an Invariant's whole on every rank, a split's split alike.
std::vector<PlacementPtr> gradient_placements(const std::vector<PlacementPtr>& placements,
                                              const spmd::Types& types) {
  std::vector<PlacementPtr> out = placements;
  for (size_t m = 0; m < out.size(); ++m) {
    if (placements[m]->is_partial() || types[m] == spmd::Type::kInvariant) {
      out[m] = Replicate::make();
    } else if (types[m] == spmd::Type::kReplicate) {
      out[m] = Partial::make();
    }
  }
  return out;
}

// Whether a local tensor of type `found` may be laid out as `p`: a
// Replicate one may be R or I; a Partial one P or V (each rank's term, as
// the local product of a row-parallel matmul is).
bool fits(spmd::Type found, const Placement& p) {
  return found == placement_type(p) || (p.is_replicate() && found == spmd::Type::kInvariant) ||
         (p.is_partial() && found == spmd::Type::kVarying);
}

// The types that fit `p`, for errors.
std::string fitting_types(const Placement& p) {
  std::string text = spmd::type_name(placement_type(p));
  if (p.is_replicate()) text += " or " + spmd::type_name(spmd::Type::kInvariant);
  if (p.is_partial()) text += " or " + spmd::type_name(spmd::Type::kVarying);
  return text;
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

// Input `index`'s types: its placements', or those asked for it, which may
// differ only by I where it is Replicate.
spmd::Types input_types(const std::vector<PlacementPtr>& placements, size_t index,
                        const LocalMapOptions& options) {
  spmd::Types types = placement_types(placements);
  if (options.in_types.empty() || !options.in_types[index]) return types;
  const spmd::Types& asked = *options.in_types[index];
  check_count(("in_types[" + std::to_string(index) + "]").c_str(), types.size(), "mesh dim",
              asked.size());
  for (size_t m = 0; m < types.size(); ++m) {
    DTENSOR_CHECK(fits(asked[m], *placements[m]), "local_map: in_types[", index, "] on mesh dim ",
                  m, ": expected ", fitting_types(*placements[m]), " for placement ",
                  placements[m]->to_string(), ", found ", spmd::type_name(asked[m]));
  }
  return asked;
}

// The local tensor `fn` gets for input `index`, and its types (nullopt for
// a plain tensor).
std::pair<at::Tensor, std::optional<spmd::Types>> local_input(const at::Tensor& input, size_t index,
                                                              const OptionalPlacements& wanted,
                                                              const DeviceMesh& mesh,
                                                              const LocalMapOptions& options) {
  const std::string name = "in_placements[" + std::to_string(index) + "]";
  if (!is_dtensor(input)) {
    DTENSOR_CHECK(!wanted, "local_map: input ", index, " is a plain tensor: expected nullopt ",
                  name, ", found ", wanted ? placements_to_string(*wanted) : "");
    return {input, std::nullopt};
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
  spmd::Types types = input_types(*wanted, index, options);
  return {tensor.to_local(gradient_placements(*wanted, types)), std::move(types)};
}

// Output `index` of `fn`, of `types` (nullopt: untyped, or unchecked),
// wrapped as `placements` says, of global `shape` when given.
at::Tensor wrap_output(const at::Tensor& output, size_t index, const OptionalPlacements& placements,
                       const std::optional<spmd::Types>& types, const DeviceMesh& mesh,
                       const std::optional<std::vector<int64_t>>& shape) {
  if (!placements) return output;
  check_placements("out_placements[" + std::to_string(index) + "]", *placements, mesh);
  if (types) {
    for (size_t m = 0; m < placements->size(); ++m) {
      DTENSOR_CHECK(fits((*types)[m], *(*placements)[m]), "local_map: output ", index,
                    " on mesh dim \"", mesh.dim_names()[m], "\": expected ",
                    fitting_types(*(*placements)[m]), " for placement ",
                    (*placements)[m]->to_string(), " (out_placements[", index, "]), found ",
                    spmd::type_name((*types)[m]));
    }
  }
  FromLocalOptions from_local_options;
  from_local_options.run_check = false;
  if (shape) {
    const DTensorSpec spec(mesh, *placements, *shape, output.scalar_type());
    const std::vector<int64_t>& fits_shape = spec.local_layout().local_shape;
    DTENSOR_CHECK(output.sizes() == c10::IntArrayRef(fits_shape), "local_map: output ", index,
                  ": out_shapes[", index, "] is [", absl::StrJoin(*shape, ", "),
                  "], so this rank's local output laid out as ", placements_to_string(*placements),
                  " must be [", absl::StrJoin(fits_shape, ", "), "], found [",
                  absl::StrJoin(output.sizes(), ", "), "]");
    from_local_options.shape = shape;
  }
  from_local_options.grad_placements =
      gradient_placements(*placements, types ? *types : placement_types(*placements));
  return from_local(output, mesh, *placements, std::move(from_local_options)).tensor();
}

// `fn` on `locals`, type-checked when the options ask: the inputs typed
// `in_types`, and the outputs' types in `out_types` (nullopt where untyped).
std::vector<at::Tensor> run_fn(const LocalMapFunction& fn, const std::vector<at::Tensor>& locals,
                               const std::vector<std::optional<spmd::Types>>& in_types,
                               const DeviceMesh& mesh, const LocalMapOptions& options,
                               std::vector<std::optional<spmd::Types>>& out_types) {
  if (!options.check_types) {
    std::vector<at::Tensor> outputs = fn(locals);
    out_types.assign(outputs.size(), std::nullopt);
    return outputs;
  }
  spmd::ScopedTypeCheck check(mesh);
  for (size_t i = 0; i < locals.size(); ++i) {
    if (in_types[i]) spmd::set_types(locals[i], *in_types[i]);
  }
  std::vector<at::Tensor> outputs = fn(locals);
  for (const at::Tensor& output : outputs) out_types.push_back(spmd::types_of(output));
  return outputs;
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
    if (!options.in_types.empty()) {
      check_count("in_types", inputs.size(), "input", options.in_types.size());
    }
    std::vector<at::Tensor> locals;
    std::vector<std::optional<spmd::Types>> in_types;
    for (size_t i = 0; i < inputs.size(); ++i) {
      auto [local, types] = local_input(inputs[i], i, in_placements[i], mesh, options);
      locals.push_back(std::move(local));
      in_types.push_back(std::move(types));
    }
    std::vector<std::optional<spmd::Types>> out_types;
    std::vector<at::Tensor> outputs = run_fn(fn, locals, in_types, mesh, options, out_types);
    check_count("out_placements", outputs.size(), "output of fn", out_placements.size());
    if (!options.out_shapes.empty()) {
      check_count("out_shapes", outputs.size(), "output of fn", options.out_shapes.size());
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      outputs[i] = wrap_output(outputs[i], i, out_placements[i], out_types[i], mesh,
                               options.out_shapes.empty() ? std::nullopt : options.out_shapes[i]);
    }
    return outputs;
  };
}

}  // namespace dtensor
