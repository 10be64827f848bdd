// Copyright 2026 The dtensor Authors.
#include <dtensor/dispatch/op_runner.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <iterator>
#include <optional>

#include <dtensor/base/check.h>
#include <dtensor/base/op_name.h>
#include <dtensor/core/tensor_impl.h>
#include <dtensor/dispatch/fallback_recorder.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/redistribute/planner.h>
#include <dtensor/rules/propagation_cache.h>
#include <dtensor/rules/tensor_arguments.h>
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dtensor {
namespace {

std::string op_name_of(const c10::OperatorHandle& op) { return op_name_string(op.operator_name()); }

}  // namespace

OpCall make_call(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> arguments,
                 const DispatchModes& modes) {
  const DTensorSpecPtr* first = nullptr;  // the first DTensor's spec, whose mesh the call shares
  for_each_tensor_argument(arguments, [&](const at::Tensor& t, size_t, int64_t) {
    const DTensorSpecPtr* spec = dtensor_spec_or_null(t);
    if (spec == nullptr) return;
    if (first == nullptr) first = spec;
    const DeviceMesh& mesh = (*first)->mesh();
    const DeviceMesh& other = (*spec)->mesh();
    DTENSOR_CHECK(&mesh == &other || mesh == other, op_name_of(op),
                  ": expected every DTensor on one mesh, found ", mesh.to_string(), " and ",
                  other.to_string());
  });
  DTENSOR_CHECK(first != nullptr, op_name_of(op), ": expected a DTensor argument, found none");
  const DeviceMesh& mesh = (*first)->mesh();
  std::vector<TensorInput> inputs;
  for_each_tensor_argument(arguments, [&](const at::Tensor& t, size_t a, int64_t list_index) {
    const DTensorSpecPtr* spec = dtensor_spec_or_null(t);
    TensorInput input{a, list_index, nullptr, spec != nullptr};
    if (input.is_dtensor) {
      input.spec = *spec;
    } else {
      DTENSOR_CHECK(t.dim() == 0 || modes.implicit_replication, op_name_of(op), ": argument ", a,
                    " is a plain tensor of shape [", absl::StrJoin(t.sizes(), ", "),
                    "] mixed with DTensors; expected a DTensor or a 0-dim scalar (distribute it ",
                    "first, or opt into dtensor::ScopedImplicitReplication)");
      input.spec = std::make_shared<const DTensorSpec>(
          mesh, std::vector<PlacementPtr>(mesh.ndim(), Replicate::make()), t.sizes().vec(),
          t.scalar_type());
    }
    inputs.push_back(std::move(input));
  });
  return OpCall(op, arguments, std::move(inputs), mesh);
}

namespace {

// Whether `target` is `source` with some pending sums reduced (Partial ->
// Replicate or a split: an all-reduce or a reduce-scatter) and nothing else
// changed.
bool only_reduces(const DTensorSpec& source, const DTensorSpec& target) {
  const std::vector<PlacementPtr>& from = source.placements();
  const std::vector<PlacementPtr>& to = target.placements();
  if (from.size() != to.size() || source.shape() != target.shape()) return false;
  for (size_t i = 0; i < from.size(); ++i) {
    if (!(*from[i] == *to[i]) && !(from[i]->is_partial() && !to[i]->is_partial())) return false;
  }
  return true;
}

// Whether `a` has pending sums, and `b` on the same mesh dims only.
bool pending_on_same_dims(const std::vector<PlacementPtr>& a, const std::vector<PlacementPtr>& b) {
  bool pending = false;
  for (size_t m = 0; m < a.size(); ++m) {
    if (a[m]->is_partial() != b[m]->is_partial()) return false;
    pending = pending || a[m]->is_partial();
  }
  return pending;
}

at::Tensor local_for(const at::Tensor& t, const DTensorSpecPtr& target);

// `values` in memory laid out as `like` (same strides and storage offset),
// copied there unless it already is: a view op may read strides and offsets
// (as_strided, _reshape_alias), so it is replayed only on such memory. Every
// rank decides alike from its own shards, with no further communication.
at::Tensor laid_out_like(const at::Tensor& values, const at::Tensor& like) {
  if (values.strides() == like.strides() && values.storage_offset() == like.storage_offset()) {
    return values;
  }
  const int64_t elements =
      static_cast<int64_t>(like.storage().nbytes()) / static_cast<int64_t>(like.element_size());
  at::Tensor out = at::empty({elements}, like.options())
                       .as_strided(like.sizes(), like.strides(), like.storage_offset());
  out.copy_(values);
  return out;
}

// Reducing a view of a DTensor with pending sums (DTensorImpl::view_origin)
// reduces the viewed DTensor on the same mesh dims, which remembers that form
// for its own readers, and takes the view of the result: autograd's mm
// backward reads a gradient both as it is and transposed, and a hand-written
// plan reduces it once. Nullopt when `target` does more than reduce to
// Replicate, or no origin is remembered.
std::optional<at::Tensor> reduce_through_view_origin(const at::Tensor& t,
                                                     const DTensorSpecPtr& target) {
  const std::optional<DTensorImpl::ViewOrigin> origin = dtensor_impl(t)->view_origin();
  if (!origin) return std::nullopt;
  const std::vector<PlacementPtr>& mine = dtensor_impl(t)->spec()->placements();
  const DTensorSpecPtr& viewed_spec = dtensor_impl(origin->viewed)->spec();
  std::vector<PlacementPtr> reduced = viewed_spec->placements();
  for (size_t m = 0; m < mine.size(); ++m) {
    if (*mine[m] == *target->placements()[m]) continue;
    if (!target->placements()[m]->is_replicate()) return std::nullopt;
    reduced[m] = target->placements()[m];
  }
  const at::Tensor viewed_shard = local_for(
      origin->viewed, std::make_shared<const DTensorSpec>(viewed_spec->with_placements(reduced)));
  const at::Tensor shard =
      (*origin->view)(laid_out_like(viewed_shard, dtensor_impl(origin->viewed)->local()));
  DTENSOR_CHECK(shard.sizes() == c10::IntArrayRef(target->local_layout().local_shape),
                "redistribute: internal: the view of a reduced shard has shape ", shard.sizes(),
                ", expected [", absl::StrJoin(target->local_layout().local_shape, ", "), "]");
  dtensor_impl(t)->remember_reduced_form(make_dtensor_tensor(shard, target));
  return shard;
}

// Plain inputs count as Replicate: a rule may still want them split or
// Partial, which a plan from Replicate gives without communication.
at::Tensor local_for(const at::Tensor& t, const DTensorSpecPtr& target) {
  // Most inputs are laid out as the op wants already: the layer's own
  // DTensor, whose spec equals (without being) the one the layout was
  // chosen for.
  if (const DTensorSpecPtr* spec = dtensor_spec_or_null(t); spec != nullptr && **spec == *target) {
    return dtensor_impl(t)->local();
  }
  const bool plain = !is_dtensor(t);
  if (plain && std::all_of(target->placements().begin(), target->placements().end(),
                           [](const PlacementPtr& p) { return p->is_replicate(); })) {
    return t;
  }
  const DTensorSpecPtr source =
      plain ? std::make_shared<const DTensorSpec>(target->with_placements(
                  std::vector<PlacementPtr>(target->placements().size(), Replicate::make())))
            : dtensor_impl(t)->spec();
  const at::Tensor& local = plain ? t : dtensor_impl(t)->local();
  if (!plain) {
    if (const at::Tensor* form = dtensor_impl(t)->reduced_form(target->placements())) {
      return dtensor_impl(*form)->local();
    }
  }
  const bool reduces = !plain && only_reduces(*source, *target);
  if (reduces) {
    if (std::optional<at::Tensor> shard = reduce_through_view_origin(t, target)) return *shard;
  }
  const RedistributePlanPtr plan = plan_redistribute(*source, target->placements());
  if (plan->steps.empty()) return local;
  at::Tensor result = execute_plan(*plan, local);
  if (reduces) {
    dtensor_impl(t)->remember_reduced_form(make_dtensor_tensor(result, target));
  }
  return result;
}

// `t`'s remembered form with every pending sum reduced, or, for a view whose
// origin has one, the view of that form (remembered too); null when neither.
const at::Tensor* fully_reduced_form_of(const at::Tensor& t) {
  DTensorImpl& impl = *dtensor_impl(t);
  if (const at::Tensor* form = impl.fully_reduced_form()) return form;
  const std::optional<DTensorImpl::ViewOrigin> origin = impl.view_origin();
  if (!origin || dtensor_impl(origin->viewed)->fully_reduced_form() == nullptr) return nullptr;
  std::vector<PlacementPtr> reduced = impl.spec()->placements();
  for (PlacementPtr& p : reduced) {
    if (p->is_partial()) p = Replicate::make();
  }
  reduce_through_view_origin(
      t, std::make_shared<const DTensorSpec>(impl.spec()->with_placements(reduced)));
  return impl.fully_reduced_form();
}

// The arguments that only read a DTensor whose pending sums an earlier op
// reduced to Replicate (DTensorImpl::fully_reduced_form) read that form
// instead. Written and viewed arguments keep theirs: what they alias must
// stay the same.
void read_reduced_forms(const c10::OperatorHandle& op, torch::jit::Stack& stack,
                        size_t num_arguments) {
  const std::vector<c10::Argument>& schema = op.schema().arguments();
  for (size_t a = 0; a < num_arguments; ++a) {
    c10::IValue& value = stack[stack.size() - num_arguments + a];
    if (!value.isTensor() || schema[a].alias_info() != nullptr) continue;
    const at::Tensor& tensor = value.toTensor();
    if (!is_dtensor(tensor)) continue;
    if (const at::Tensor* reduced = fully_reduced_form_of(tensor)) value = *reduced;
  }
}

// The call's arguments with every tensor replaced by its local shard at the
// chosen layout.
torch::jit::Stack local_arguments(c10::ArrayRef<c10::IValue> arguments, const Propagation& p) {
  size_t input = 0;
  return map_tensor_arguments(
      arguments, [&](const at::Tensor& t) { return local_for(t, p.input_targets[input++]); });
}

at::Tensor wrap(const c10::OperatorHandle& op, const Propagation& p, size_t k,
                const at::Tensor& local, const DeviceMesh& mesh) {
  if (!local.defined()) return local;  // an output the op was asked not to compute
  const DTensorSpecPtr& spec = p.output_spec(k, local.scalar_type(), mesh, local.sizes());
  DTENSOR_CHECK(local.sizes() == c10::IntArrayRef(spec->local_layout().local_shape), op_name_of(op),
                ": output ", k, " laid out as [", placements_to_string(spec->placements()),
                "] needs a local shard of shape [",
                absl::StrJoin(spec->local_layout().local_shape, ", "),
                "], but the local op produced [", absl::StrJoin(local.sizes(), ", "),
                "] (a wrong sharding rule?)");
  return make_dtensor_tensor(local, spec);
}

void check_written_shapes(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> arguments,
                          const Propagation& p) {
  for (const ReturnLayout& ret : p.returns) {
    if (ret.writes_argument < 0 || ret.kind != ReturnLayout::Kind::kTensor) continue;
    if (p.updates_layout_in_place) continue;
    const at::Tensor& out = arguments[ret.writes_argument].toTensor();
    DTENSOR_CHECK(is_dtensor(out), op_name_of(op), ": expected a DTensor to write into, found a ",
                  "plain tensor");
    DTENSOR_CHECK(out.sizes() == c10::IntArrayRef(p.output_shapes[ret.first_output]),
                  op_name_of(op), ": the DTensor written in place has shape [",
                  absl::StrJoin(out.sizes(), ", "), "], expected [",
                  absl::StrJoin(p.output_shapes[ret.first_output], ", "),
                  "] (DTensors are never resized)");
  }
}

// The DTensor that return `j` (the DTensor `out`) of a view op views:
// argument 0, when the return aliases it without writing; null otherwise.
const at::Tensor* viewed_by(const c10::OperatorHandle& op, size_t j,
                            c10::ArrayRef<c10::IValue> arguments, const at::Tensor& out) {
  const c10::AliasInfo* alias = op.schema().returns()[j].alias_info();
  if (alias == nullptr || alias->isWrite() || !out.defined() || arguments.empty() ||
      !arguments[0].isTensor() || !is_dtensor(arguments[0].toTensor())) {
    return nullptr;
  }
  return &arguments[0].toTensor();
}

// A write into a copied view (DTensorImpl::mark_copied_view) would be lost:
// raises instead, naming the op and how the copy came about.
void check_writes_reach_their_tensors(const c10::OperatorHandle& op,
                                      c10::ArrayRef<c10::IValue> arguments, const Propagation& p) {
  if (p.updates_layout_in_place) return;  // t_, squeeze_: metadata, not data
  const std::vector<c10::Argument>& schema = op.schema().arguments();
  for (size_t a = 0; a < schema.size(); ++a) {
    const c10::AliasInfo* alias = schema[a].alias_info();
    if (alias == nullptr || !alias->isWrite()) continue;
    for_each_tensor_argument(arguments.slice(a, 1), [&](const at::Tensor& t, size_t, int64_t) {
      if (!is_dtensor(t)) return;
      const std::string* reason = dtensor_impl(t)->lost_write_reason();
      DTENSOR_CHECK(reason == nullptr, op_name_of(op), ": argument ", a, " is written, but it is ",
                    reason == nullptr ? "" : *reason,
                    ", so the write would not reach that DTensor. Expected a DTensor that shares ",
                    "memory with what it views: redistribute the viewed DTensor first, then take ",
                    "the view (or clone() the view to write into a copy on purpose)");
    });
  }
}

// The results of a view op (a return aliasing argument 0, not written) are
// views only when their shard shares the viewed shard's memory: not when
// argument 0 had to be redistributed first, nor when its shard's strides
// allowed no view (a local reshape copies). Copies are marked so that
// writes into them raise; a view of such a copy is one too.
void mark_copied_view(const c10::OperatorHandle& op, size_t j, c10::ArrayRef<c10::IValue> arguments,
                      const Propagation& p, const at::Tensor& out) {
  const at::Tensor* viewed_dtensor = viewed_by(op, j, arguments, out);
  if (viewed_dtensor == nullptr) return;
  const at::Tensor& viewed = *viewed_dtensor;
  const DTensorImpl& source = *dtensor_impl(viewed);
  DTensorImpl& result = *dtensor_impl(out);
  if (result.local().is_alias_of(source.local())) {
    result.inherit_copied_view(source);
    return;
  }
  const std::vector<PlacementPtr>& used = p.input_targets.front()->placements();
  const std::string before = placements_to_string(source.spec()->placements());
  // A write into a view reaches its base too: while either lives it is lost.
  const at::TensorBase& written = viewed.is_view() ? viewed._base() : viewed;
  result.mark_copied_view(
      written, same_placements(source.spec()->placements(), used)
                   ? absl::StrCat("the result of ", op_name_of(op), " on a DTensor laid out as [",
                                  before, "] whose shard allows no such view: a copy, not a view")
                   : absl::StrCat("the result of ", op_name_of(op), " on a DTensor laid out as [",
                                  before, "], which had to be redistributed to [",
                                  placements_to_string(used), "] first: a copy, not a view"));
}

// A true view (sharing the viewed shard's memory, made by the op's own local
// call) of a DTensor with pending sums that stay pending on the same mesh
// dims remembers its origin (DTensorImpl::remember_view_origin): its shard is
// the op applied to the viewed shard, with the same other arguments.
void remember_view_of_pending_sums(const c10::OperatorHandle& op, size_t j,
                                   c10::ArrayRef<c10::IValue> arguments, const Propagation& p,
                                   const at::Tensor& out) {
  const at::Tensor* viewed_dtensor = viewed_by(op, j, arguments, out);
  if (viewed_dtensor == nullptr || p.local_kernel || p.redistributes) return;
  const at::Tensor& viewed = *viewed_dtensor;
  if (!pending_on_same_dims(dtensor_impl(viewed)->spec()->placements(),
                            dtensor_impl(out)->spec()->placements()) ||
      !dtensor_impl(out)->local().is_alias_of(dtensor_impl(viewed)->local())) {
    return;
  }
  std::vector<c10::IValue> others(arguments.begin(), arguments.end());
  others[0] = c10::IValue();  // the viewed DTensor: not kept alive by its view
  if (std::any_of(others.begin(), others.end(),
                  [](const c10::IValue& v) { return v.isTensor(); })) {
    return;
  }
  dtensor_impl(out)->remember_view_origin(
      viewed, [op, others = std::move(others), j](const at::Tensor& viewed_shard) {
        torch::jit::Stack stack = others;
        stack[0] = viewed_shard;
        op.callBoxed(stack);
        return stack[j].toTensor();
      });
}

// Runs `op` on the DTensor arguments on `stack` as `propagation` lays them
// out. `call` gives the call when a local kernel asks for it (a cached
// propagation makes it only then).
void run_local(const c10::OperatorHandle& op, torch::jit::Stack& stack,
               const Propagation& propagation, absl::FunctionRef<const OpCall&()> call) {
  const size_t num_arguments = op.schema().arguments().size();
  // The arguments stay on the stack, uncopied, until the results replace them.
  const c10::ArrayRef<c10::IValue> arguments = torch::jit::last(stack, num_arguments);
  check_written_shapes(op, arguments, propagation);
  check_writes_reach_their_tensors(op, arguments, propagation);
  torch::jit::Stack results = local_arguments(arguments, propagation);
  const DeviceMesh& mesh = propagation.input_targets.front()->mesh();
  if (propagation.local_kernel) {
    propagation.local_kernel(op, results, LocalContext(call, propagation, mesh));
  } else {
    op.callBoxed(results);
  }
  // The local results become the call's, one by one.
  for (size_t j = 0; j < propagation.returns.size(); ++j) {
    const ReturnLayout& ret = propagation.returns[j];
    c10::IValue& result = results[j];
    if (ret.writes_argument >= 0) {
      if (propagation.updates_layout_in_place) {
        const at::Tensor& local = result.toTensor();
        dtensor_impl(arguments[ret.writes_argument].toTensor())
            ->replace(local, propagation.output_spec(ret.first_output, local.scalar_type(), mesh,
                                                     local.sizes()));
      }
      result = arguments[ret.writes_argument];
    } else if (ret.kind == ReturnLayout::Kind::kTensor) {
      at::Tensor out = wrap(op, propagation, ret.first_output, result.toTensor(), mesh);
      mark_copied_view(op, j, arguments, propagation, out);
      remember_view_of_pending_sums(op, j, arguments, propagation, out);
      result = std::move(out);
    } else if (ret.kind == ReturnLayout::Kind::kTensorList) {
      c10::List<at::Tensor> list;
      const auto local_list = result.toTensorList();
      for (size_t k = 0; k < local_list.size(); ++k) {
        at::Tensor out = wrap(op, propagation, ret.first_output + k, local_list[k], mesh);
        mark_copied_view(op, j, arguments, propagation, out);
        list.push_back(std::move(out));
      }
      result = list;
    }
  }
  torch::jit::drop(stack, num_arguments);
  const auto returned = results.begin() + static_cast<std::ptrdiff_t>(propagation.returns.size());
  stack.insert(stack.end(), std::make_move_iterator(results.begin()),
               std::make_move_iterator(returned));
}

}  // namespace

void run_on_dtensors(const c10::OperatorHandle& op, torch::jit::Stack& stack,
                     const DispatchModes& modes, uint64_t mode_bits) {
  const size_t num_arguments = op.schema().arguments().size();
  read_reduced_forms(op, stack, num_arguments);
  const c10::ArrayRef<c10::IValue> arguments = torch::jit::last(stack, num_arguments);
  std::optional<PropagationKey> key =
      PropagationKey::of(op, arguments, mode_bits, &dtensor_spec_or_null);
  PropagationCache& cache = PropagationCache::for_this_thread();
  // Held, not borrowed: the ops a decomposition or a local kernel runs may
  // evict it from this thread's cache, or clear the cache.
  PropagationPtr propagation = key ? cache.find(*key) : nullptr;
  // A hit skips building the call: the key pins everything make_call checks.
  std::optional<OpCall> call;
  if (propagation == nullptr) {
    if (key) key->hold_specs();  // before anything runs that could replace them
    call.emplace(make_call(op, arguments, modes));
    PropagationPtr result = propagate(*call, modes.propagation);
    propagation = key ? cache.insert(std::move(*key), std::move(result)) : std::move(result);
  }
  // The key may borrow the arguments' specs, which what runs next can
  // replace (in-place ops): it is not used again.
  key.reset();
  if (propagation->replicate_fallback) FallbackRecorder::record(op_name_of(op));
  if (propagation->decomposition) {
    propagation->decomposition(op, stack);
    return;
  }
  // A cached propagation has no call: the kernel's first read makes it.
  run_local(op, stack, *propagation, [&]() -> const OpCall& {
    if (!call) call.emplace(make_call(op, arguments, modes));
    return *call;
  });
}

void run_with_propagation(const c10::OperatorHandle& op, torch::jit::Stack& stack,
                          const Propagation& propagation, const OpCall& call) {
  run_local(op, stack, propagation, [&]() -> const OpCall& { return call; });
}

}  // namespace dtensor
