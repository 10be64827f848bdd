// Copyright 2026 The dtensor Authors.
//
// examples/interleaved_shard/interleaved_shard_demo.cc: a merged QKV weight
// [12, 4] (rows 0-3 are Q, 4-7 K, 8-11 V) laid out with the user placement
// IS(0,3) on 2 ranks of the in-process "local" backend: each rank holds its
// half of Q, of K and of V. Prints every rank's rows, then redistributes to
// S(0) (contiguous rows) and prints the plan the generic path chose. Checks
// both layouts against the single-device tensor. No launcher:
// `./build/examples/interleaved_shard/interleaved_shard_demo`.
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "dtensor/dtensor.h"
#include "dtensor/redistribute/collective_counter.h"
#include "dtensor/redistribute/planner.h"
#include "interleaved_shard.h"
#include "mesh/local_communicator.h"
#include "placements/placements.h"

namespace {

std::string join(const std::vector<int64_t>& values) {
  std::ostringstream out;
  for (size_t i = 0; i < values.size(); ++i) out << (i ? "," : "") << values[i];
  return out.str();
}

// One line per local row: its global row number, its Q/K/V block, its values.
std::string describe_rows(const at::Tensor& local, const std::vector<int64_t>& global_rows) {
  static const char* const kBlock[] = {"Q", "K", "V"};
  std::ostringstream out;
  for (int64_t i = 0; i < local.size(0); ++i) {
    const int64_t row = global_rows[i];
    out << "    row " << (row < 10 ? " " : "") << row << " (" << kBlock[row / 4] << ")  [";
    for (int64_t j = 0; j < local.size(1); ++j) {
      out << (j ? ", " : "") << local[i][j].item<float>();
    }
    out << "]\n";
  }
  return out.str();
}

}  // namespace

int main() {
  // Row r holds 10*r + column, so every value names its place.
  const at::Tensor weight =
      (at::arange(12, at::kFloat).unsqueeze(1) * 10 + at::arange(4, at::kFloat)).contiguous();
  const int world = 2;
  std::vector<std::string> before(world), after(world);
  std::string plan_text;
  bool ok = true;
  dtensor::run_ranks(world, [&](int rank) {
    dtensor::DeviceMesh mesh = dtensor::init_device_mesh("local", {world}, {"tp"});
    const std::vector<dtensor::PlacementPtr> interleaved = {dtensor::InterleavedShard::make(0, 3)};
    dtensor::DTensor qkv = dtensor::distribute_tensor(weight, mesh, interleaved);
    const dtensor::LocalLayout layout = dtensor::compute_local_layout(
        qkv.sizes(), mesh.shape(), mesh.coordinate(), qkv.placements());
    before[rank] = "  rank " + std::to_string(rank) + " holds rows " +
                   join(layout.global_indices()[0]) + ":\n" +
                   describe_rows(qkv.to_local(), layout.global_indices()[0]);

    const std::vector<dtensor::PlacementPtr> rows = dtensor::parse_placements("S(0)");
    dtensor::CollectiveCounter counter;
    dtensor::DTensor sharded = qkv.redistribute(rows);
    const int64_t collectives = counter.total();
    const dtensor::LocalLayout row_layout = dtensor::compute_local_layout(
        sharded.sizes(), mesh.shape(), mesh.coordinate(), sharded.placements());
    after[rank] = "  rank " + std::to_string(rank) + " holds rows " +
                  join(row_layout.global_indices()[0]) + " (" + std::to_string(collectives) +
                  " collective)\n";

    const bool equal =
        at::equal(sharded.to_local(), dtensor::distribute_tensor(weight, mesh, rows).to_local()) &&
        at::equal(qkv.full_tensor(), weight) && at::equal(sharded.full_tensor(), weight);
    if (!equal) ok = false;
    if (rank == 0) plan_text = dtensor::plan_redistribute(qkv.spec(), rows).to_string();
  });

  std::cout << "merged QKV weight [12, 4] (Q rows 0-3, K rows 4-7, V rows 8-11) as "
            << dtensor::parse_placement("IS(0,3)")->to_string() << " on DeviceMesh((tp=2)):\n";
  for (const std::string& text : before) std::cout << text;
  std::cout << "\nredistribute IS(0,3) -> S(0):\n";
  for (const std::string& text : after) std::cout << text;
  std::cout << "plan:\n" << plan_text;
  if (!plan_text.empty() && plan_text.back() != '\n') std::cout << "\n";
  std::cout << (ok ? "matches single-device" : "MISMATCH") << "\n";
  return ok ? 0 : 1;
}
