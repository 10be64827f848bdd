// Copyright 2026 The dtensor Authors.
//
// examples/interleaved_shard/interleaved_shard_demo.cc: a merged QKV weight
// [12, 4] (rows 0-3 are Q, 4-7 K, 8-11 V) laid out with the user placement
// IS(0,3) on 2 ranks of the in-process "local" backend: each rank holds its
// half of Q, of K and of V. Prints every rank's rows, then redistributes to
// S(0) (contiguous rows) and prints the plan the generic path chose. Then
// runs the merged QKV projection through ATen ops (merged_qkv.h): a weight
// [24, 4] as IS(0,3) goes through at::linear, the output's last dim is
// IS(1,3), chunking it gives q, k and v as S(1) (the plugin's split rule),
// and per-head scores q_h k_h^T stay local to each rank's heads: no
// collective at all. Checks everything against the single-device tensors.
// No launcher: `./build/examples/interleaved_shard/interleaved_shard_demo`.
#include <atomic>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include <dtensor/dtensor.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/collective_counter.h>
#include <dtensor/redistribute/planner.h>
#include "interleaved_shard.h"
#include "merged_qkv.h"

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

// Integer values in [-3, 3]: every product and sum below is exact in float.
at::Tensor small_integers(int64_t rows, int64_t cols, int64_t seed) {
  return at::arange(rows * cols, at::kLong)
      .mul(seed)
      .remainder(7)
      .sub(3)
      .reshape({rows, cols})
      .to(at::kFloat);
}

std::string shape_of(const at::Tensor& t) { return join(t.sizes().vec()); }

// q, k, v and the per-head products on DTensors, beside the same on one device.
bool show_merged_qkv_projection() {
  const int world = 2;
  const int64_t tokens = 3, in = 4, heads = 4, head_dim = 2;
  const at::Tensor x = small_integers(tokens, in, 5);
  const at::Tensor w_qkv = small_integers(3 * heads * head_dim, in, 3);
  const dtensor::examples::QkvProjection expected_qkv = dtensor::examples::project_qkv(x, w_qkv);
  const dtensor::examples::HeadAttention expected =
      dtensor::examples::attend_per_head(expected_qkv, heads);
  // Each rank writes only its own line; `ok` is written by every rank's
  // thread, so it is atomic.
  std::vector<std::string> lines(world);
  std::atomic<bool> ok{true};
  dtensor::run_ranks(world, [&](int rank) {
    dtensor::DeviceMesh mesh = dtensor::init_device_mesh("local", {world}, {"tp"});
    const at::Tensor dx = dtensor::distribute_tensor(x, mesh, dtensor::parse_placements("R"));
    const at::Tensor dw =
        dtensor::distribute_tensor(w_qkv, mesh, dtensor::parse_placements("IS(0,3)"));
    dtensor::CollectiveCounter counter;
    const dtensor::DTensor qkv(at::linear(dx, dw));
    const dtensor::examples::QkvProjection split = dtensor::examples::project_qkv(dx, dw);
    const dtensor::examples::HeadAttention attention =
        dtensor::examples::attend_per_head(split, heads);
    const int64_t collectives = counter.total();
    const dtensor::DTensor q(split.q), scores(attention.scores);
    lines[rank] =
        "  rank " + std::to_string(rank) + ": qkv " +
        dtensor::placements_to_string(qkv.placements()) + " local [" + shape_of(qkv.to_local()) +
        "]; q, k, v " + dtensor::placements_to_string(q.placements()) + " local [" +
        shape_of(q.to_local()) + "]; scores " + dtensor::placements_to_string(scores.placements()) +
        " local [" + shape_of(scores.to_local()) + "]; " + std::to_string(collectives) +
        " collectives\n";
    const bool equal = at::equal(q.full_tensor(), expected_qkv.q) &&
                       at::equal(dtensor::DTensor(split.k).full_tensor(), expected_qkv.k) &&
                       at::equal(dtensor::DTensor(split.v).full_tensor(), expected_qkv.v) &&
                       at::equal(scores.full_tensor(), expected.scores) &&
                       at::equal(dtensor::DTensor(attention.mixed).full_tensor(), expected.mixed);
    if (!equal || collectives != 0) ok = false;
  });
  std::cout << "\nmerged QKV projection: x [3, 4] R, W_qkv [24, 4] IS(0,3), 4 heads of 2:\n";
  for (const std::string& text : lines) std::cout << text;
  return ok;
}

}  // namespace

int main() {
  // Row r holds 10*r + column, so every value names its place.
  const at::Tensor weight =
      (at::arange(12, at::kFloat).unsqueeze(1) * 10 + at::arange(4, at::kFloat)).contiguous();
  const int world = 2;
  // Each rank writes only its own entries of `before` and `after`, and only
  // rank 0 writes `plan_text`; `ok` is written by every rank's thread, so it
  // is atomic. run_ranks joins the threads before anything here is read.
  std::vector<std::string> before(world), after(world);
  std::string plan_text;
  std::atomic<bool> ok{true};
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
    if (rank == 0) plan_text = dtensor::plan_redistribute(qkv.spec(), rows)->to_string();
  });

  std::cout << "merged QKV weight [12, 4] (Q rows 0-3, K rows 4-7, V rows 8-11) as "
            << dtensor::parse_placement("IS(0,3)")->to_string() << " on DeviceMesh((tp=2)):\n";
  for (const std::string& text : before) std::cout << text;
  std::cout << "\nredistribute IS(0,3) -> S(0):\n";
  for (const std::string& text : after) std::cout << text;
  std::cout << "plan:\n" << plan_text;
  if (!plan_text.empty() && plan_text.back() != '\n') std::cout << "\n";
  const bool all_ok = show_merged_qkv_projection() && ok;
  std::cout << (all_ok ? "matches single-device" : "MISMATCH") << "\n";
  return all_ok ? 0 : 1;
}
