// Copyright 2026 The dtensor Authors.
//
// dtensor-verify-rules: checks every row of every registered sharding rule
// against the single-device result (dtensor/tools/rule_verifier.h), on 4
// ranks of the local backend: the written samples, then one made from the
// schema of each other op. Prints one line per sample, every wrong row, and
// the ops no sample could be made for; exits 1 when a row is wrong or when
// an op named on the command line has no sample.
//
//   dtensor-verify-rules            # every op with a rule
//   dtensor-verify-rules aten::mm   # only the samples of these ops
#include <atomic>
#include <iostream>
#include <set>
#include <string>

#include <dtensor/mesh/local_communicator.h>
#include <dtensor/tools/rule_verifier.h>

int main(int argc, char** argv) {
  const std::set<std::string> only(argv + 1, argv + argc);
  std::vector<std::string> unsampled;
  std::vector<dtensor::SampleCall> samples;
  std::set<std::string> unmatched = only;
  for (dtensor::SampleCall& sample : dtensor::all_samples(&unsampled)) {
    if (!only.empty() && only.count(sample.op_name) == 0) continue;
    unmatched.erase(sample.op_name);
    samples.push_back(std::move(sample));
  }
  if (!unmatched.empty()) {
    std::cerr << "dtensor-verify-rules: expected an op with a rule and a sample, found none for";
    for (const std::string& op : unmatched) std::cerr << " \"" << op << "\"";
    std::cerr << "\n";
    return 1;
  }
  std::atomic<int> failures{0};
  dtensor::run_ranks(4, [&](int rank) {
    const dtensor::DeviceMesh mesh = dtensor::init_device_mesh("local", {4});
    int64_t rows = 0, skipped = 0;
    for (const dtensor::SampleCall& sample : samples) {
      const dtensor::VerifierReport report = dtensor::verify_rules(mesh, sample);
      rows += report.rows_checked;
      skipped += report.rows_skipped;
      if (rank != 0) continue;
      std::cout << sample.op_name << ": " << report.rows_checked << " rows, "
                << report.failures.size() << " wrong, " << report.rows_skipped << " skipped\n";
      for (const std::string& failure : report.failures) std::cout << "  WRONG " << failure << "\n";
      failures += static_cast<int>(report.failures.size());
    }
    if (rank == 0) {
      std::cout << "checked " << rows << " rows of " << samples.size() << " samples, " << failures
                << " wrong, " << skipped << " skipped\n";
    }
  });
  if (only.empty()) {
    for (const std::string& op : unsampled) std::cout << "no sample: " << op << "\n";
  }
  return failures == 0 ? 0 : 1;
}
