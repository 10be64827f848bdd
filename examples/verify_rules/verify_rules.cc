// Copyright 2026 The dtensor Authors.
//
// dtensor-verify-rules: checks every row of every built-in sharding rule
// against the single-device result (dtensor/debug/rule_verifier.h), on 4
// ranks of the local backend. Prints one line per op and every wrong row;
// exits 1 when a row is wrong.
//
//   dtensor-verify-rules            # all built-in samples
//   dtensor-verify-rules aten::mm   # only the samples of these ops
#include <atomic>
#include <iostream>
#include <set>
#include <string>

#include "dtensor/debug/rule_verifier.h"
#include "mesh/local_communicator.h"

int main(int argc, char** argv) {
  const std::set<std::string> only(argv + 1, argv + argc);
  std::atomic<int> failures{0};
  dtensor::run_ranks(4, [&](int rank) {
    const dtensor::DeviceMesh mesh = dtensor::init_device_mesh("local", {4});
    int64_t rows = 0;
    for (const dtensor::SampleCall& sample : dtensor::builtin_samples()) {
      if (!only.empty() && only.count(sample.op_name) == 0) continue;
      const dtensor::VerifierReport report = dtensor::verify_rules(mesh, sample);
      rows += report.rows_checked;
      if (rank != 0) continue;
      std::cout << sample.op_name << ": " << report.rows_checked << " rows, "
                << report.failures.size() << " wrong\n";
      for (const std::string& failure : report.failures) std::cout << "  WRONG " << failure << "\n";
      failures += static_cast<int>(report.failures.size());
    }
    if (rank == 0) std::cout << "checked " << rows << " rows, " << failures << " wrong\n";
  });
  return failures == 0 ? 0 : 1;
}
