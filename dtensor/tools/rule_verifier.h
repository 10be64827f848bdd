// Copyright 2026 The dtensor Authors.
//
// dtensor/tools/rule_verifier.h (<dtensor/tools/rule_verifier.h>, dtensor::tools): checks sharding
// rules against the single-device result.
//
// For a sample call of an op (global plain tensors and other arguments), the
// verifier asks every rule of the op for its rows under many probe layouts
// of the inputs (all Replicate; each input alone as Shard, StridedShard,
// Ragged or Partial on each dim, or as an extra placement of the caller's;
// all inputs alike), and checks each distinct row: the inputs are laid out
// as the row says, the op runs on the shards exactly as the dispatcher would
// run it (the op's local kernel included), and every output, reassembled
// with `full_tensor`, must equal the op's result on the global tensors
// (allclose with float tolerance, NaNs equal; only shapes and dtypes for
// ops whose values are unspecified, the `empty` family). The engine's own
// all-Replicate row is checked too. A rule made of a decomposition has no
// rows: the op then runs through the dispatcher under each probe layout.
//
// Random ops draw from generators the verifier seeds alike before the
// single-device call and before each row (the default CPU generator's state
// is restored afterwards). Collective over the mesh: every rank makes the
// same calls.
//
//   for (const dtensor::SampleCall& sample : dtensor::all_samples()) {
//     dtensor::VerifierReport report = dtensor::verify_rules(mesh, sample);
//     for (const std::string& failure : report.failures) std::cerr << failure << "\n";
//   }
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <dtensor/mesh/device_mesh.h>
#include <dtensor/placements/placement.h>

namespace dtensor {

struct SampleCall {
  std::string op_name;  // "aten::mm"
  std::vector<c10::IValue> arguments;
};

struct VerifierOptions {
  // Probed besides the built-in placements (a plugin's own, whose rows only
  // such an input makes a rule offer).
  std::vector<PlacementPtr> extra_placements;
};

struct VerifierReport {
  // Rows (or probe layouts of a decomposition) run and compared.
  int64_t rows_checked = 0;
  // Rows the engine would never choose for the sample's shapes (a shard
  // that does not fit): not run.
  int64_t rows_skipped = 0;
  // Probe layouts a decomposition refused with a clear error, alike on
  // every rank (an op it calls has no rule; an in-place op on a Partial),
  // with the error: neither checked nor wrong.
  std::vector<std::string> refusals;
  // One line per wrong row: op, row, what differed.
  std::vector<std::string> failures;
};

// Checks every row the rules of `sample.op_name` offer on 1-D mesh `mesh`.
VerifierReport verify_rules(const DeviceMesh& mesh, const SampleCall& sample,
                            const VerifierOptions& options = {});

// Written sample calls for the built-in rule families (shapes with uneven
// splits, index tensors, the cases worth a thought).
std::vector<SampleCall> builtin_samples();

// builtin_samples(), then one sample made from the schema of every other op
// with a rule, in op name order (the same on every rank). Ops of this
// libtorch for which no schema-made arguments run are appended to
// `unsampled`; ops this libtorch does not have, or cannot run on the CPU
// where the verifier computes (libtorch 2.14's _fused_rms_norm_backward),
// are left out.
std::vector<SampleCall> all_samples(std::vector<std::string>* unsampled = nullptr);

// The operator named "ns::name" or "ns::name.overload", if this libtorch has it.
c10::optional<c10::OperatorHandle> find_operator(const std::string& op_name);

// Whether this libtorch has that operator with a kernel for CPU tensors.
bool runs_on_cpu(const std::string& op_name);

}  // namespace dtensor
