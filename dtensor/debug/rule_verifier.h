// Copyright 2026 The dtensor Authors.
//
// dtensor/debug/rule_verifier.h: checks sharding rules against the
// single-device result.
//
// For a sample call of an op (global plain tensors and other arguments), the
// verifier asks every rule of the op for its rows under many probe layouts
// of the inputs (all Replicate; each input alone as Shard, StridedShard,
// Ragged or Partial on each dim; all inputs alike), and checks each distinct
// row: the inputs are laid out as the row says, the op runs on the shards
// exactly as the dispatcher would run it (the rule's local kernel included),
// and every output, reassembled with `full_tensor`, must equal the op's
// result on the global tensors (allclose with float tolerance, NaNs equal).
// Collective over the mesh: every rank makes the same calls.
//
//   dtensor::VerifierReport report = dtensor::verify_rules(mesh, sample);
//   for (const std::string& failure : report.failures) std::cerr << failure << "\n";
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/ivalue.h>

#include "mesh/device_mesh.h"

namespace dtensor {

struct SampleCall {
  std::string op_name;  // "aten::mm"
  std::vector<c10::IValue> arguments;
};

struct VerifierReport {
  int64_t rows_checked = 0;
  // One line per wrong row: op, row, what differed.
  std::vector<std::string> failures;
};

// Checks every row the rules of `sample.op_name` offer on 1-D mesh `mesh`.
VerifierReport verify_rules(const DeviceMesh& mesh, const SampleCall& sample);

// Sample calls for the built-in rule families (shapes with uneven splits).
std::vector<SampleCall> builtin_samples();

}  // namespace dtensor
