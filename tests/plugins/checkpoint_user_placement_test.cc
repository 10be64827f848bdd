// Copyright 2026 The dtensor Authors.
//
// A user placement (InterleavedShard, examples/interleaved_shard) through
// dtensor::checkpoint: saved as its index lists' boxes, loaded from any
// layout into it, every value exact, reading only the bytes it holds.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include <dtensor/checkpoint/checkpoint.h>
#include <dtensor/checkpoint/files.h>
#include <dtensor/checkpoint/safetensors.h>
#include <dtensor/dtensor.h>
#include <dtensor/mesh/local_communicator.h>
#include "interleaved_shard.h"
#include "tests/support/checkpoint_layouts.h"

namespace dtensor {
namespace {

using testing::checkpoint_reference;
using testing::lay_out;
using testing::local_of;

struct Layout {
  std::vector<int64_t> mesh;
  std::string placements;
};

TEST(CheckpointUserPlacementTest, InterleavedShardRoundTrips) {
  const std::string dir = "/tmp/dtensor-checkpoint-plugin-" + std::to_string(::getpid());
  checkpoint::remove_tree(dir);
  const std::vector<Layout> layouts = {
      {{4}, "IS(0,3)"}, {{4}, "S(0)"}, {{4}, "S(1)"}, {{4}, "R"}, {{2, 2}, "IS(1,5),S(0)"}};
  const at::Tensor global = checkpoint_reference({12, 10}, at::kFloat);
  for (const Layout& source : layouts) {
    const std::string path = checkpoint::join_path(dir, source.placements);
    run_ranks(4, [&](int) {
      const DeviceMesh mesh = init_device_mesh("local", source.mesh);
      checkpoint::save({{"w", lay_out(global, mesh, source.placements)}}, path);
    });
    for (const Layout& target : layouts) {
      SCOPED_TRACE(source.placements + " -> " + target.placements);
      run_ranks(4, [&](int) {
        const DeviceMesh mesh = init_device_mesh("local", target.mesh);
        std::map<std::string, at::Tensor> state = {
            {"w", lay_out(at::zeros({12, 10}), mesh, target.placements)}};
        checkpoint::ReadCounter counter;
        checkpoint::load(state, path);
        const at::Tensor local = local_of(state["w"]);
        EXPECT_TRUE(at::equal(local, local_of(lay_out(global, mesh, target.placements))));
        EXPECT_EQ(counter.bytes(), local.numel() * 4);
      });
    }
  }
  checkpoint::remove_tree(dir);
}

}  // namespace
}  // namespace dtensor
