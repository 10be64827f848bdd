// Copyright 2026 The dtensor Authors.
#include <dtensor/tools/rule_verifier.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <mutex>
#include <set>

#include <dtensor/base/check.h>
#include <dtensor/base/op_name.h>
#include <dtensor/core/random.h>
#include <dtensor/dispatch/op_runner.h>
#include <dtensor/dtensor.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/reduce_terms.h>
#include <dtensor/rules/decomposition.h>
#include <dtensor/rules/propagation.h>
#include <dtensor/rules/strategy.h>
#include <dtensor/rules/tensor_arguments.h>
#include "absl/strings/str_cat.h"

namespace dtensor {
namespace {

// Any fixed seed: the single-device call and every row draw alike.
constexpr uint64_t kSeed = 20261123;

c10::OperatorHandle find_op(const std::string& op_name) {
  const c10::optional<c10::OperatorHandle> op = find_operator(op_name);
  DTENSOR_CHECK(op.has_value(), "rule verifier: expected an operator, found no \"", op_name, "\"");
  return *op;
}

// Runs `op` on plain tensors as one device would after
// at::manual_seed(kSeed), then gives the default generator its state back.
void call_on_one_device(const c10::OperatorHandle& op, torch::jit::Stack& stack) {
  // Ranks of the local backend are threads sharing the default generator.
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  const at::Tensor state = generator.get_state();
  generator.set_current_seed(kSeed);
  try {
    op.callBoxed(stack);
  } catch (...) {
    generator.set_state(state);
    throw;
  }
  generator.set_state(state);
}

// Placements worth probing for a tensor of `ndim` dims on a mesh dim of `n`.
std::vector<PlacementPtr> candidates(int64_t ndim, int64_t n, const VerifierOptions& options) {
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
  out.insert(out.end(), options.extra_placements.begin(), options.extra_placements.end());
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
std::vector<c10::IValue> laid_out(const std::vector<c10::IValue>& arguments, const DeviceMesh& mesh,
                                  const std::vector<PlacementPtr>& layouts) {
  size_t k = 0;
  return map_tensor_arguments(arguments,
                              [&](const at::Tensor& t) { return lay_out(t, mesh, layouts[k++]); });
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
  // A probe layout run through the dispatcher (the op has a decomposition).
  bool decomposed = false;
};

std::string found_text(const FoundRow& found) {
  if (found.decomposed) {
    return absl::StrCat("layout [", placements_to_string(found.row.inputs), "] (decomposed)");
  }
  return absl::StrCat("row ", row_text(found.row));
}

// Whether `ok` holds on every rank of `mesh`: a step may fail on one rank
// only (an empty shard, a Partial term a dtype cannot hold), and all ranks
// must then skip the collectives that follow together.
bool on_every_rank(const DeviceMesh& mesh, bool ok) {
  const at::Tensor flag =
      at::full({1}, ok ? 1 : 0, at::TensorOptions().dtype(at::kInt).device(mesh.device()));
  return reduce_terms(flag, mesh, {0}, ReduceOp::kMin).item<int>() == 1;
}

// Input layouts to probe: all Replicate, then each candidate placement for
// one input alone and for all inputs alike.
std::vector<std::vector<PlacementPtr>> probe_layouts(const std::vector<at::Tensor>& tensors,
                                                     int64_t n, const VerifierOptions& options) {
  std::vector<std::vector<PlacementPtr>> probes(
      1, std::vector<PlacementPtr>(tensors.size(), Replicate::make()));
  for (size_t i = 0; i < tensors.size(); ++i) {
    for (const PlacementPtr& p : candidates(tensors[i].dim(), n, options)) {
      probes.push_back(probes[0]);
      probes.back()[i] = p;
      probes.push_back(std::vector<PlacementPtr>(tensors.size(), p));
    }
  }
  return probes;
}

// The sample laid out as `probe`, when every rank can lay it out.
c10::optional<std::vector<c10::IValue>> laid_out_everywhere(
    const DeviceMesh& mesh, const SampleCall& sample, const std::vector<PlacementPtr>& probe) {
  std::vector<c10::IValue> arguments;
  bool ok = true;
  try {
    arguments = laid_out(sample.arguments, mesh, probe);
  } catch (const std::exception&) {
    ok = false;  // a probe placement that does not fit some input (or dtype)
  }
  if (!on_every_rank(mesh, ok)) return c10::nullopt;
  return arguments;
}

// Every distinct row the strategies offer under the probe layouts; for an op
// with a decomposition (as the engine decides, all that runs), every
// distinct probe layout.
std::vector<FoundRow> collect_rows(const c10::OperatorHandle& op, const DeviceMesh& mesh,
                                   const SampleCall& sample, const VerifierOptions& options) {
  const std::string name = op_name_string(op.operator_name());
  const bool decomposed = decompositions().find(name) != nullptr;
  const auto found_strategies = strategies().find(name);
  const std::vector<Strategy> none;
  const std::vector<Strategy>& strategies = found_strategies ? *found_strategies : none;
  std::vector<FoundRow> found;
  std::set<std::string> seen, rule_rows;
  for (const std::vector<PlacementPtr>& probe :
       probe_layouts(tensors_of(sample.arguments), mesh.size(0), options)) {
    const c10::optional<std::vector<c10::IValue>> arguments =
        laid_out_everywhere(mesh, sample, probe);
    if (!arguments) continue;
    if (decomposed) {
      ShardingRow row;
      row.inputs = probe;
      if (seen.insert(row_text(row)).second) found.push_back({std::move(row), true});
      continue;
    }
    const OpCall call = make_call(op, *arguments, DispatchModes{});
    const bool first_probe = seen.empty();
    for (const Strategy& strategy : strategies) {
      for (ShardingRow& row : strategy.rows(call, 0)) {
        for (size_t i = 0; i < row.inputs.size(); ++i) {
          if (row.inputs[i] == nullptr) row.inputs[i] = call.placement(i, 0);
        }
        const std::string text = row_text(row);
        if (seen.insert(text).second) found.push_back({std::move(row)});
        rule_rows.insert(text);
      }
    }
    // The row the engine adds unless a strategy offers it (strategies that
    // only refuse have no other): it checks the output shapes and the
    // wrapping, and the op's local kernel on whole inputs.
    ShardingRow replicate = replicate_row(call);
    if (first_probe && rule_rows.count(row_text(replicate)) == 0) {
      seen.insert(row_text(replicate));
      found.push_back({std::move(replicate)});
    }
  }
  return found;
}

// Whether output `got` (DTensors) reassembles to `want` (plain); only shapes
// and dtypes when the op's values are unspecified.
bool same_value(const c10::IValue& got, const c10::IValue& want, bool values_unspecified) {
  if (want.isTensor()) {
    const at::Tensor expected = want.toTensor();
    if (!got.isTensor() || !is_dtensor(got.toTensor())) return false;
    const at::Tensor full = DTensor(got.toTensor()).full_tensor();
    if (full.sizes() != expected.sizes() || full.scalar_type() != expected.scalar_type()) {
      return false;
    }
    if (values_unspecified) return true;
    if (!at::isFloatingType(expected.scalar_type())) return at::equal(full, expected);
    return at::allclose(full, expected, 1e-5, 1e-6, /*equal_nan=*/true);
  }
  if (want.isTensorList()) {
    const auto expected = want.toTensorList();
    if (!got.isTensorList() || got.toTensorList().size() != expected.size()) return false;
    for (size_t k = 0; k < expected.size(); ++k) {
      if (!same_value(got.toTensorList().get(k), expected.get(k), values_unspecified)) {
        return false;
      }
    }
    return true;
  }
  if (want.isDouble() || want.isInt())
    return got.toScalar().toDouble() == want.toScalar().toDouble();
  if (want.isBool()) return got.isBool() && got.toBool() == want.toBool();
  return true;
}

enum class RowOutcome { kRight, kWrong, kSkipped, kRefused };

// Runs the op laid out as `found` (seeded as the single-device call was);
// sets `problem` when the outputs differ from `expected`, or to the error of
// a decomposition that refused the layout alike on every rank.
RowOutcome check_row(const c10::OperatorHandle& op, const DeviceMesh& mesh,
                     const SampleCall& sample, const FoundRow& found,
                     const torch::jit::Stack& expected, std::string& problem) {
  torch::jit::Stack stack = laid_out(sample.arguments, mesh, found.row.inputs);
  std::unique_ptr<Propagation> propagation;
  c10::optional<OpCall> call;
  if (!found.decomposed) {
    call.emplace(make_call(op, stack, DispatchModes{}));
    propagation = propagation_for_rows(*call, {found.row});
    if (propagation == nullptr) return RowOutcome::kSkipped;  // never chosen for these shapes
  }
  std::string raised;
  bool refused = false;
  try {
    manual_seed(kSeed);
    if (!found.decomposed) {
      run_with_propagation(op, stack, *propagation, *call);
    } else {
      // A decomposition propagates op by op; below autograd, as the DTensor
      // kernel runs (a custom op may have no autograd kernel).
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      op.callBoxed(stack);
    }
  } catch (const Error& e) {
    raised = e.what();
    refused = found.decomposed;  // a row the rule offered itself must run
  } catch (const std::exception& e) {
    raised = e.what();
  }
  if (!on_every_rank(mesh, raised.empty())) {
    // Probe layouts are arbitrary: a decomposition may refuse one clearly
    // (an op it calls has no rule, an in-place op on a Partial).
    if (on_every_rank(mesh, refused)) {
      problem = raised;
      return RowOutcome::kRefused;
    }
    problem = absl::StrCat("raised on some rank", raised.empty() ? "" : ": ", raised);
    return RowOutcome::kWrong;
  }
  const bool values_unspecified = op.schema().name().find("empty") != std::string::npos;
  for (size_t j = 0; j < expected.size(); ++j) {
    if (!same_value(stack[j], expected[j], values_unspecified)) {
      problem = absl::StrCat("output ", j, " differs");
      return RowOutcome::kWrong;
    }
  }
  return RowOutcome::kRight;
}

}  // namespace

VerifierReport verify_rules(const DeviceMesh& mesh, const SampleCall& sample,
                            const VerifierOptions& options) {
  DTENSOR_CHECK(mesh.ndim() == 1, "rule verifier: expected a 1-D mesh, found ", mesh.to_string());
  const c10::OperatorHandle op = find_op(sample.op_name);
  const std::string name = op_name_string(op.operator_name());
  DTENSOR_CHECK(strategies().find(name) != nullptr || decompositions().find(name) != nullptr,
                "rule verifier: ", sample.op_name, " has no strategy and no decomposition");
  torch::jit::Stack expected = cloned(sample.arguments);
  call_on_one_device(op, expected);
  VerifierReport report;
  for (const FoundRow& found : collect_rows(op, mesh, sample, options)) {
    std::string problem;
    switch (check_row(op, mesh, sample, found, expected, problem)) {
      case RowOutcome::kSkipped:
        ++report.rows_skipped;
        break;
      case RowOutcome::kRefused:
        report.refusals.push_back(absl::StrCat(found_text(found), ": ", problem));
        break;
      case RowOutcome::kWrong:
        report.failures.push_back(
            absl::StrCat(sample.op_name, " ", found_text(found), ": ", problem));
        [[fallthrough]];
      case RowOutcome::kRight:
        ++report.rows_checked;
        break;
    }
  }
  return report;
}

}  // namespace dtensor
