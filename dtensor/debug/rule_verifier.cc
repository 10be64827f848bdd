// Copyright 2026 The dtensor Authors.
#include "dtensor/debug/rule_verifier.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "dtensor/base/check.h"
#include "dtensor/dispatch/op_runner.h"
#include "dtensor/dtensor.h"
#include "placements/placements.h"
#include "rules/registry.h"
#include "rules/tensor_arguments.h"

namespace dtensor {
namespace {

c10::OperatorHandle find_op(const std::string& op_name) {
  const auto dot = op_name.find('.');
  const c10::OperatorName name(op_name.substr(0, dot),
                               dot == std::string::npos ? "" : op_name.substr(dot + 1));
  auto op = c10::Dispatcher::singleton().findOp(name);
  DTENSOR_CHECK(op.has_value(), "rule verifier: expected an operator, found no \"", op_name, "\"");
  return *op;
}

// Placements worth probing for a tensor of `ndim` dims on a mesh dim of `n`.
std::vector<PlacementPtr> candidates(int64_t ndim, int64_t n) {
  std::vector<PlacementPtr> out = {Replicate::make(), Partial::make(ReduceOp::kSum),
                                   Partial::make(ReduceOp::kAvg), Partial::make(ReduceOp::kMax),
                                   Partial::make(ReduceOp::kMin)};
  for (int64_t d = 0; d < ndim; ++d) {
    out.push_back(Shard::make(d));
    out.push_back(StridedShard::make(d, 2));
  }
  if (ndim > 0) {
    std::vector<int64_t> units(n);
    for (int64_t r = 0; r < n; ++r) units[r] = r % 3;
    units[0] = 1;
    out.push_back(Ragged::make(1, units));
  }
  return out;
}

// The sample's tensors, in the dispatcher's input order.
std::vector<at::Tensor> tensors_of(const std::vector<c10::IValue>& arguments) {
  std::vector<at::Tensor> out;
  for_each_tensor_argument(arguments,
                           [&](const at::Tensor& t, size_t, int64_t) { out.push_back(t); });
  return out;
}

// Terms of a Partial that are not (x, identity, identity...): a rule that
// wrongly passes Partial through a nonlinear op must show it. Sum: rank 0
// holds x - (n-1)c, the others c; avg: x + (n-1)c and x - c; max/min: x on
// rank 0, x -+ c elsewhere. c = 3 is exact in every dtype.
at::Tensor partial_term(const at::Tensor& x, ReduceOp op, int64_t rank, int64_t n) {
  const at::Tensor c = at::full_like(x, 3);
  switch (op) {
    case ReduceOp::kSum:
      return rank == 0 ? x - c * (n - 1) : c;
    case ReduceOp::kAvg:
      return rank == 0 ? x + c * (n - 1) : x - c;
    case ReduceOp::kMax:
      return rank == 0 ? x.clone() : x - c;
    case ReduceOp::kMin:
      return rank == 0 ? x.clone() : x + c;
    default:
      return rank == 0 ? x.clone() : at::ones_like(x);  // product
  }
}

at::Tensor lay_out(const at::Tensor& t, const DeviceMesh& mesh, const PlacementPtr& p) {
  if (!p->is_partial()) return distribute_tensor(t.clone(), mesh, {p}).tensor();
  const at::Tensor term = partial_term(t, *p->partial_op(), mesh.coordinate()[0], mesh.size(0));
  FromLocalOptions options;
  options.run_check = false;
  options.shape = t.sizes().vec();
  return from_local(term, mesh, {p}, options).tensor();
}

// The sample's arguments with tensor k laid out as `layouts[k]`.
std::vector<c10::IValue> laid_out(const std::vector<c10::IValue>& arguments,
                                  const DeviceMesh& mesh,
                                  const std::vector<PlacementPtr>& layouts) {
  size_t k = 0;
  return map_tensor_arguments(
      arguments, [&](const at::Tensor& t) { return lay_out(t, mesh, layouts[k++]); });
}

// The sample's arguments with every tensor cloned (in-place ops write).
std::vector<c10::IValue> cloned(const std::vector<c10::IValue>& arguments) {
  return map_tensor_arguments(arguments, [](const at::Tensor& t) { return t.clone(); });
}

std::string row_text(const ShardingRow& row) {
  return absl::StrCat("[", placements_to_string(row.inputs), "] -> [",
                      placements_to_string(row.outputs), "]");
}

struct FoundRow {
  ShardingRow row;
  const OpRule* rule;
};

// Every distinct row the rules offer under the probe layouts.
std::vector<FoundRow> collect_rows(const c10::OperatorHandle& op, const DeviceMesh& mesh,
                                   const SampleCall& sample, const std::vector<OpRule>& rules) {
  const std::vector<at::Tensor> tensors = tensors_of(sample.arguments);
  std::vector<std::vector<PlacementPtr>> probes(1, std::vector<PlacementPtr>(tensors.size(),
                                                                             Replicate::make()));
  for (size_t i = 0; i < tensors.size(); ++i) {
    for (const PlacementPtr& p : candidates(tensors[i].dim(), mesh.size(0))) {
      probes.push_back(probes[0]);
      probes.back()[i] = p;
      probes.push_back(std::vector<PlacementPtr>(tensors.size(), p));
    }
  }
  std::vector<FoundRow> found;
  std::set<std::string> seen;
  for (const std::vector<PlacementPtr>& probe : probes) {
    std::vector<c10::IValue> arguments;
    try {
      arguments = laid_out(sample.arguments, mesh, probe);
    } catch (const std::exception&) {
      continue;  // a probe placement that does not fit some input (or dtype)
    }
    const OpCall call = make_call(op, arguments, DispatchModes{});
    for (const OpRule& rule : rules) {
      if (!rule.strategy) continue;  // a decomposition: the ops it calls have samples
      for (ShardingRow& row : rule.strategy(call, 0)) {
        for (size_t i = 0; i < row.inputs.size(); ++i) {
          if (row.inputs[i] == nullptr) row.inputs[i] = call.placement(i, 0);
        }
        const std::string key = absl::StrCat(&rule - rules.data(), row_text(row));
        if (seen.insert(key).second) found.push_back({std::move(row), &rule});
      }
    }
  }
  return found;
}

bool same_value(const c10::IValue& got, const c10::IValue& want) {
  if (want.isTensor()) {
    const at::Tensor expected = want.toTensor();
    if (!got.isTensor() || !is_dtensor(got.toTensor())) return false;
    const at::Tensor full = DTensor(got.toTensor()).full_tensor();
    if (full.sizes() != expected.sizes() || full.scalar_type() != expected.scalar_type()) {
      return false;
    }
    if (!at::isFloatingType(expected.scalar_type())) return at::equal(full, expected);
    return at::allclose(full, expected, 1e-5, 1e-6, /*equal_nan=*/true);
  }
  if (want.isTensorList()) {
    const auto expected = want.toTensorList();
    if (!got.isTensorList() || got.toTensorList().size() != expected.size()) return false;
    for (size_t k = 0; k < expected.size(); ++k) {
      if (!same_value(got.toTensorList().get(k), expected.get(k))) return false;
    }
    return true;
  }
  if (want.isDouble() || want.isInt()) return got.toScalar().toDouble() == want.toScalar().toDouble();
  if (want.isBool()) return got.isBool() && got.toBool() == want.toBool();
  return true;
}

// Whether `ok` holds on every rank of `mesh`: a local op may fail on one
// rank only (an empty shard), and all ranks must then skip the collectives
// that follow together.
bool on_every_rank(const DeviceMesh& mesh, bool ok) {
  at::Tensor flag = at::full({1}, ok ? 1 : 0, at::TensorOptions().dtype(at::kInt).device(mesh.device()));
  mesh.communicator(0)->all_reduce(flag, ReduceOp::kMin);
  return flag.item<int>() == 1;
}

// Runs the op laid out as `found` and compares with `expected`; an empty
// string when right.
std::string check_row(const c10::OperatorHandle& op, const DeviceMesh& mesh,
                      const SampleCall& sample, const FoundRow& found,
                      const torch::jit::Stack& expected) {
  torch::jit::Stack stack = laid_out(sample.arguments, mesh, found.row.inputs);
  const OpCall call = make_call(op, stack, DispatchModes{});
  const std::unique_ptr<Propagation> propagation =
      propagation_for_rows(call, {found.row}, found.rule);
  if (propagation == nullptr) return "";  // the engine would never choose it
  std::string raised;
  try {
    run_with_propagation(op, stack, *propagation, &call);
  } catch (const std::exception& e) {
    raised = e.what();
  }
  if (!on_every_rank(mesh, raised.empty())) {
    return absl::StrCat("raised on some rank", raised.empty() ? "" : ": ", raised);
  }
  for (size_t j = 0; j < expected.size(); ++j) {
    if (!same_value(stack[j], expected[j])) return absl::StrCat("output ", j, " differs");
  }
  return "";
}

}  // namespace

VerifierReport verify_rules(const DeviceMesh& mesh, const SampleCall& sample) {
  DTENSOR_CHECK(mesh.ndim() == 1, "rule verifier: expected a 1-D mesh, found ", mesh.to_string());
  const c10::OperatorHandle op = find_op(sample.op_name);
  const auto rules = RuleRegistry::global().find(op.operator_name());
  DTENSOR_CHECK(rules != nullptr, "rule verifier: ", sample.op_name, " has no rule");
  torch::jit::Stack expected = cloned(sample.arguments);
  op.callBoxed(expected);
  VerifierReport report;
  for (const FoundRow& found : collect_rows(op, mesh, sample, *rules)) {
    ++report.rows_checked;
    const std::string problem = check_row(op, mesh, sample, found, expected);
    if (!problem.empty()) {
      report.failures.push_back(
          absl::StrCat(sample.op_name, " row ", row_text(found.row), ": ", problem));
    }
  }
  return report;
}

}  // namespace dtensor
