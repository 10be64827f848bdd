// Copyright 2026 The dtensor Authors.
//
// dtensor/spmd/types.h: local SPMD types, checked op by op.
//
// In per-rank code every local tensor has, per mesh dim, one of four types
// (dtensor/spmd/collectives.h says what each means for values and
// gradients): Replicate (R), Invariant (I), Varying (V) and Partial (P). The
// classic bugs of such code are silent: a non-linear op on a pending sum, a
// gradient all-reduce forgotten because an Invariant input met a Varying
// weight. Inside a `ScopedTypeCheck` every ATen op on typed tensors gets its
// outputs' types from its inputs' by these rules, per mesh dim, and a
// mistake raises dtensor::Error naming the op, the mesh dim, the types found
// and the fix:
//
//   - R and V mix, to V; R with R gives R, V with V gives V.
//   - I mixes only with I (to I): an I value meeting an R or V one would get
//     a gradient that is not the same on every rank. Convert it with
//     spmd::invariant_to_replicate (its backward all-reduces).
//   - P mixes with P and R only where the op is linear in its P inputs, as
//     the sharding rule registry says: an op whose strategies keep the P
//     inputs Partial, with the others Replicate, into a Partial output
//     without moving anything (add, sub, mul by R, mm with an R operand,
//     sum, views). A non-linear op on P, P times P, P plus a constant, and P
//     with V or I are errors: reduce first (spmd::all_reduce,
//     spmd::reduce_scatter).
//   - Tensors without a type (constants made inside the scope, scalars) fit
//     any of these, and count as R where linearity is asked.
//
// The typed collectives (dtensor/spmd/collectives.h) check their input's type
// on their mesh dim and give their output the type they produce; local_map
// (dtensor/spmd/local_map.h) types its inputs from their placements (S -> V,
// R -> R, P -> P, or I where asked), runs `fn` in a scope, and checks each
// output's type against its placements.
//
//   dtensor::spmd::ScopedTypeCheck check(mesh);
//   at::Tensor x = spmd::set_types(x_local, {spmd::Type::kInvariant});   // over "tp"
//   at::Tensor w = spmd::set_types(w_local, {spmd::Type::kVarying});
//   at::mm(x, w);  // raises: I mixes only with I; convert x with invariant_to_replicate
//   at::Tensor h = at::mm(spmd::invariant_to_replicate(x, mesh, "tp"), w);  // V
//   spmd::assert_type(h, {{"tp", spmd::Type::kVarying}});
//
// Checking covers the calling thread's ops on dense tensors while the scope
// lives (forward code: call backward() after it ends; sparse and quantized
// tensors pass unchecked). Types follow the tensors ops return, and what
// autograd makes anew around one (x.detach()) keeps its types: a tensor
// viewing the same memory the same way as a typed one has its types. A
// write retypes every typed tensor viewing the memory it writes (R becomes
// V where V is written). `_foreach_*` ops are typed element by element. It
// costs a table look-up per tensor argument of each op, and for ops on P
// inputs a look-up of the op's strategies.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/core/Tensor.h>

#include <dtensor/mesh/device_mesh.h>

namespace dtensor::spmd {

// The local SPMD type of a tensor over one mesh dim.
enum class Type { kReplicate, kInvariant, kVarying, kPartial };

// "R", "I", "V", "P".
const char* type_letter(Type type);
// "Replicate (R)", "Invariant (I)", "Varying (V)", "Partial (P)".
std::string type_name(Type type);

// One type per mesh dim of the checking scope's mesh.
using Types = std::vector<Type>;

// Types from their letters, one per mesh dim, comma-separated: "V,R".
// Throws dtensor::Error naming an unknown letter and where it is.
Types parse_types(std::string_view text);

// Checks the types of the calling thread's ATen ops on `mesh`'s local
// tensors while it lives. Scopes nest: the innermost one checks, with its own
// table of types (tensors typed in an outer scope are untyped inside).
class ScopedTypeCheck {
 public:
  explicit ScopedTypeCheck(DeviceMesh mesh);
  ~ScopedTypeCheck();
  ScopedTypeCheck(const ScopedTypeCheck&) = delete;
  ScopedTypeCheck& operator=(const ScopedTypeCheck&) = delete;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

// Whether a scope checks the calling thread's ops.
bool type_checking();

// Gives `x` `types` (one per mesh dim of the innermost scope) and returns it.
// Throws when no scope is active or the count differs from the mesh's dims.
const at::Tensor& set_types(const at::Tensor& x, Types types);

// `x`'s types in the innermost scope; nullopt when it has none or no scope
// is active.
std::optional<Types> types_of(const at::Tensor& x);

// Throws dtensor::Error unless `x` has, on each mesh dim named in `expected`,
// the type given there (an untyped `x` counts as R on every dim). Outside a
// scope it checks nothing.
void assert_type(const at::Tensor& x, const std::map<std::string, Type>& expected);

// Pauses checking on the calling thread while it lives: for code that moves
// data between ranks behind the checker's back and types its result itself
// (the typed collectives).
class ScopedTypeCheckPause {
 public:
  ScopedTypeCheckPause();
  ~ScopedTypeCheckPause();
  ScopedTypeCheckPause(const ScopedTypeCheckPause&) = delete;
  ScopedTypeCheckPause& operator=(const ScopedTypeCheckPause&) = delete;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// For the typed collectives: raises unless `x`'s type on mesh dim `dim` is
// one of `accepted` (untyped counts as any), and returns the types its result
// has when it gets `produced` on `dim`; nullopt when `x` is untyped, no scope
// checks, or the scope's mesh has no dim `dim`.
std::optional<Types> collective_result_types(const at::Tensor& x, std::string_view collective,
                                             std::string_view dim,
                                             const std::vector<Type>& accepted, Type produced);

}  // namespace dtensor::spmd
