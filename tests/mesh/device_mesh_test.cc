// Copyright 2026 The dtensor Authors.
#include <dtensor/mesh/device_mesh.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <dtensor/mesh/local_communicator.h>
#include "absl/hash/hash.h"
#include "tests/support/expect_error.h"

namespace dtensor {
namespace {

using Groups = std::vector<std::vector<int64_t>>;

// The world ranks of `comm`'s members, in its rank order, found by an
// all-gather: proves the communicator really connects those ranks.
std::vector<int64_t> members_of(Communicator& comm) {
  at::Tensor mine = at::full({1}, static_cast<int64_t>(local_world()->rank()), at::kLong);
  at::Tensor all = at::zeros({comm.size()}, at::kLong);
  comm.all_gather(mine, all);
  return std::vector<int64_t>(all.data_ptr<int64_t>(), all.data_ptr<int64_t>() + all.numel());
}

TEST(DeviceMeshTest, TwoByFourLayout) {
  run_ranks(8, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {2, 4}, {"dp", "tp"});
    EXPECT_EQ(mesh.ndim(), 2);
    EXPECT_EQ(mesh.size(), 8);
    EXPECT_EQ(mesh.size(1), 4);
    EXPECT_EQ(mesh.size(-2), 2);
    EXPECT_EQ(mesh.groups(1), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
    EXPECT_EQ(mesh.groups(0), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
    EXPECT_EQ(mesh.coordinate(), (std::vector<int64_t>{rank / 4, rank % 4}));
    EXPECT_EQ(mesh.get_local_rank("tp"), rank % 4);
    EXPECT_EQ(mesh.get_local_rank("dp"), rank / 4);
    EXPECT_EQ(mesh.rank_at({1, 2}), 6);
    if (rank == 5) {
      EXPECT_EQ(mesh.coordinate(), (std::vector<int64_t>{1, 1}));
      EXPECT_EQ(mesh.group_ranks(1), (std::vector<int64_t>{4, 5, 6, 7}));
      EXPECT_EQ(mesh.group_ranks(0), (std::vector<int64_t>{1, 5}));
    }
    for (int64_t dim = 0; dim < 2; ++dim) {
      EXPECT_EQ(members_of(*mesh.communicator(dim)), mesh.group_ranks(dim));
      EXPECT_EQ(mesh.communicator(dim)->rank(), mesh.get_local_rank(dim));
    }
    EXPECT_EQ(mesh.to_string(), "DeviceMesh((dp=2, tp=4), ranks=[0, 1, 2, 3, 4, 5, 6, 7])");
  });
}

TEST(DeviceMeshTest, TwoByTwoByTwoGroups) {
  run_ranks(8, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2, 2}, {"a", "b", "c"});
    EXPECT_EQ(mesh.groups(2), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
    EXPECT_EQ(mesh.groups(1), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
    EXPECT_EQ(mesh.groups(0), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
    for (int64_t dim = 0; dim < 3; ++dim) {
      EXPECT_EQ(members_of(*mesh.communicator(dim)), mesh.group_ranks(dim));
    }
  });
}

TEST(DeviceMeshTest, SlicingReusesCommunicators) {
  run_ranks(8, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2, 2}, {"dp", "cp", "tp"});
    DeviceMesh tp = mesh["tp"];
    EXPECT_EQ(tp.shape(), (std::vector<int64_t>{2}));
    EXPECT_EQ(tp.dim_names(), (std::vector<std::string>{"tp"}));
    EXPECT_EQ(tp.ranks(), mesh.group_ranks(2));
    EXPECT_EQ(tp.communicator(0).get(), mesh.communicator(2).get());

    DeviceMesh dp_cp = mesh[{"dp", "cp"}];
    EXPECT_EQ(dp_cp.shape(), (std::vector<int64_t>{2, 2}));
    const int64_t tp_offset = rank % 2;
    EXPECT_EQ(dp_cp.ranks(),
              (std::vector<int64_t>{tp_offset, 2 + tp_offset, 4 + tp_offset, 6 + tp_offset}));
    EXPECT_EQ(dp_cp.coordinate(), (std::vector<int64_t>{rank / 4, (rank / 2) % 2}));
    EXPECT_EQ(dp_cp.communicator(0).get(), mesh.communicator(0).get());
    EXPECT_EQ(dp_cp.communicator(1).get(), mesh.communicator(1).get());
    // Slicing a slice.
    EXPECT_EQ(dp_cp["cp"].ranks(), mesh["cp"].ranks());
  });
}

TEST(DeviceMeshTest, SlicingRejectsBadNames) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2}, {"dp", "tp"});
    DTENSOR_EXPECT_ERROR(mesh["pp"], "expected a dim name in [dp, tp], found \"pp\"");
    DTENSOR_EXPECT_ERROR((mesh[{"tp", "dp"}]), "in mesh order [dp, tp], found [tp, dp]");
    DTENSOR_EXPECT_ERROR((mesh[{"dp", "dp"}]), "expected distinct dim names");
    DTENSOR_EXPECT_ERROR(mesh[std::vector<std::string>{}], "at least one dim name");
  });
}

TEST(DeviceMeshTest, FlattenCreatesOneCachedCommunicator) {
  run_ranks(8, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2, 2}, {"dp", "cp", "tp"});
    DeviceMesh dp_cp = mesh[{"dp", "cp"}].flatten("dp_cp");
    EXPECT_EQ(dp_cp.shape(), (std::vector<int64_t>{4}));
    EXPECT_EQ(dp_cp.dim_names(), (std::vector<std::string>{"dp_cp"}));
    EXPECT_EQ(members_of(*dp_cp.communicator(0)), (mesh[{"dp", "cp"}].ranks()));
    EXPECT_EQ(dp_cp.get_local_rank(0), (rank / 4) * 2 + (rank / 2) % 2);
    DeviceMesh again = mesh[{"dp", "cp"}].flatten("dp_cp");
    EXPECT_EQ(again.communicator(0).get(), dp_cp.communicator(0).get());
    EXPECT_EQ(again, dp_cp);

    DeviceMesh all = mesh.flatten("world");
    EXPECT_EQ(all.communicator(0)->size(), 8);
    EXPECT_EQ(all.get_local_rank(0), rank);
  });
}

// A group of dims that are not adjacent gets its communicator on first use,
// split by the mesh's ranks alone: here the mesh leaves out world ranks 0
// and 1, which never take part, and lists the others out of order.
TEST(DeviceMeshTest, GroupCommunicatorsOfAnyDims) {
  run_ranks(10, [](int rank) {
    const std::vector<int64_t> ranks = {9, 8, 7, 6, 5, 4, 3, 2};
    DeviceMesh mesh(local_world(), {2, 2, 2}, {"a", "b", "c"}, ranks);
    if (rank < 2) return;
    const std::vector<int64_t>& c = mesh.coordinate();
    EXPECT_EQ(mesh.group_communicator({1}).get(), mesh.communicator(1).get());
    const std::shared_ptr<Communicator> outer = mesh.group_communicator({0, 2});
    // Members row-major over (a, c): b fixed.
    std::vector<int64_t> expected;
    for (int64_t a = 0; a < 2; ++a) {
      for (int64_t cc = 0; cc < 2; ++cc) expected.push_back(mesh.rank_at({a, c[1], cc}));
    }
    EXPECT_EQ(members_of(*outer), expected);
    EXPECT_EQ(outer->rank(), c[0] * 2 + c[2]);
    EXPECT_EQ(mesh.group_communicator({0, 2}).get(), outer.get());
    // A run is the one made with the mesh.
    EXPECT_EQ(members_of(*mesh.group_communicator({1, 2})), (mesh[{"b", "c"}].ranks()));
    EXPECT_EQ(mesh.group_communicator({0, 1, 2})->size(), 8);
    DTENSOR_EXPECT_ERROR(
        mesh.group_communicator({2, 0}),
        "expected distinct dims of the 3-D mesh in increasing order, found [2, 0]");
    DTENSOR_EXPECT_ERROR(mesh.group_communicator({0, 3}), "found [0, 3]");
    DTENSOR_EXPECT_ERROR(mesh.group_communicator({}), "expected at least one dim, found none");
  });
}

TEST(DeviceMeshTest, UnflattenSplitsADim) {
  run_ranks(8, [](int /*rank*/) {
    DeviceMesh flat = init_device_mesh("local", {8}, {"world"});
    DeviceMesh mesh = flat.unflatten(0, {2, 4}, {"dp", "tp"});
    EXPECT_EQ(mesh, init_device_mesh("local", {2, 4}, {"dp", "tp"}));
    EXPECT_EQ(mesh.groups(1), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
    EXPECT_EQ(members_of(*mesh.communicator(0)), mesh.group_ranks(0));
    EXPECT_EQ(members_of(*mesh.communicator(1)), mesh.group_ranks(1));

    DeviceMesh three = mesh.unflatten(1, {2, 2}, {"cp", "tp2"});
    EXPECT_EQ(three.shape(), (std::vector<int64_t>{2, 2, 2}));
    EXPECT_EQ(three.dim_names(), (std::vector<std::string>{"dp", "cp", "tp2"}));
    EXPECT_EQ(three.communicator(0).get(), mesh.communicator(0).get());
    EXPECT_EQ(members_of(*three.communicator(2)), three.group_ranks(2));
    DTENSOR_EXPECT_ERROR(mesh.unflatten(1, {3, 2}, {"x", "y"}), "expected a product equal");
    DTENSOR_EXPECT_ERROR(mesh.unflatten(1, {2, 2}, {"dp", "y"}), "expected distinct names");
  });
}

TEST(DeviceMeshTest, EqualityAndHash) {
  run_ranks(4, [](int rank) {
    auto world = local_world();
    DeviceMesh a(world, {2, 2}, {"dp", "tp"});
    DeviceMesh b(world, {2, 2}, {"dp", "tp"});
    DeviceMesh renamed(world, {2, 2}, {"x", "y"});
    DeviceMesh reordered(world, {2, 2}, {"dp", "tp"}, {0, 2, 1, 3});
    DeviceMesh reshaped(world, {4}, {"dp"});
    EXPECT_EQ(a, b);
    EXPECT_EQ(absl::Hash<DeviceMesh>()(a), absl::Hash<DeviceMesh>()(b));
    EXPECT_NE(a, renamed);
    EXPECT_NE(a, reordered);
    EXPECT_NE(a, reshaped);
    // Sub-meshes of different groups differ.
    DeviceMesh tp = a["tp"];
    EXPECT_EQ(tp.ranks(), rank < 2 ? (std::vector<int64_t>{0, 1}) : (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(DeviceMesh(world, {4}).dim_names(), (std::vector<std::string>{"dim0"}));
  });
}

TEST(DeviceMeshTest, MeshOverSomeRanks) {
  run_ranks(4, [](int rank) {
    DeviceMesh mesh(local_world(), {2}, {"x"}, {3, 1});
    const bool member = rank == 1 || rank == 3;
    EXPECT_EQ(mesh.contains_calling_rank(), member);
    if (member) {
      EXPECT_EQ(mesh.get_local_rank(0), rank == 3 ? 0 : 1);
      EXPECT_EQ(members_of(*mesh.communicator(0)), (std::vector<int64_t>{3, 1}));
    } else {
      DTENSOR_EXPECT_ERROR(mesh.coordinate(), "to be in DeviceMesh((x=2), ranks=[3, 1])");
      DTENSOR_EXPECT_ERROR(mesh.communicator(0), "found it outside");
    }
    // Collective creation works for members and outsiders alike.
    DeviceMesh flat = mesh.flatten("all");
    EXPECT_EQ(flat.contains_calling_rank(), member);
  });
}

TEST(DeviceMeshTest, BadConstructionArguments) {
  run_ranks(4, [](int) {
    auto world = local_world();
    DTENSOR_EXPECT_ERROR(DeviceMesh(world, {3}), "expected that many ranks, found 4");
    DTENSOR_EXPECT_ERROR(DeviceMesh(world, {}), "expected at least one dim");
    DTENSOR_EXPECT_ERROR(DeviceMesh(world, {0, 4}), "expected positive sizes");
    DTENSOR_EXPECT_ERROR(DeviceMesh(world, {2, 2}, {"dp"}), "expected one name per mesh dim (2)");
    DTENSOR_EXPECT_ERROR(DeviceMesh(world, {2, 2}, {"dp", "dp"}), "expected distinct names");
    DTENSOR_EXPECT_ERROR(DeviceMesh(world, {2}, {"x"}, {0, 0}), "expected distinct ranks");
    DTENSOR_EXPECT_ERROR(DeviceMesh(world, {2}, {"x"}, {0, 9}), "expected world ranks in [0, 4)");
    DTENSOR_EXPECT_ERROR(DeviceMesh(nullptr, {2}), "found nullptr");
    DTENSOR_EXPECT_ERROR(init_device_mesh("local", {3, 2}), "expected the local world size 4");
    DeviceMesh mesh(world, {2, 2});
    DTENSOR_EXPECT_ERROR(mesh.size(2), "expected a value in [-2, 2) for a 2-D mesh, found 2");
    DTENSOR_EXPECT_ERROR(mesh.rank_at({0, 2}), "expected a coordinate in [0, 2), found 2");
  });
}

}  // namespace
}  // namespace dtensor
