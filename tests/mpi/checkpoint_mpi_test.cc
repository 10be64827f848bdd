// Copyright 2026 The dtensor Authors.
//
// dtensor::checkpoint across 4 MPI processes sharing a directory: saved on
// one mesh and placements, loaded exactly into others; an async save keeps
// the values of its call while the ranks change the tensors and
// communicate.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <dtensor/checkpoint/checkpoint.h>
#include <dtensor/checkpoint/files.h>
#include <dtensor/dtensor.h>
#include <dtensor/mesh/communicator.h>
#include <dtensor/placements/placements.h>
#include "tests/support/checkpoint_layouts.h"

namespace dtensor {
namespace {

using testing::checkpoint_reference;
using testing::lay_out;
using testing::local_of;

// A directory every rank names alike (rank 0's process id), removed at the end.
class SharedTempDir {
 public:
  explicit SharedTempDir(const DeviceMesh& mesh) : mesh_(mesh) {
    const bool first = mesh.rank_at(mesh.coordinate()) == 0;
    const at::Tensor id = at::full({1}, first ? static_cast<int64_t>(::getpid()) : 0, at::kLong);
    const int64_t pid =
        from_local(id, mesh, parse_placements("P(sum)")).full_tensor().item<int64_t>();
    path_ = "/tmp/dtensor-checkpoint-mpi-" + std::to_string(pid);
    rank0_ = first;
  }
  ~SharedTempDir() {
    // Every rank is done with the files before rank 0 removes them.
    from_local(at::zeros({1}), mesh_, parse_placements("P(sum)")).full_tensor();
    if (rank0_) checkpoint::remove_tree(path_);
  }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  DeviceMesh mesh_;
  std::string path_;
  bool rank0_ = false;
};

TEST(MpiCheckpointTest, RoundTripsAcrossMeshesAndPlacements) {
  if (make_world_communicator("mpi")->size() != 4) GTEST_SKIP() << "needs mpirun -np 4";
  const std::vector<int64_t> shape = {7, 5};
  const std::vector<c10::ScalarType> dtypes = {at::kFloat, at::kBFloat16, at::kDouble, at::kLong};
  const std::vector<std::pair<std::vector<int64_t>, std::string>> layouts = {
      {{4}, "S(0)"},
      {{2, 2}, "S(1),S(0)"},
      {{2, 2}, "P(sum),S(0)"},
      {{4}, "SS(0,2)"},
      {{4}, "plain"}};
  const SharedTempDir dir(init_device_mesh("mpi", {4}));
  for (size_t s = 0; s < layouts.size(); ++s) {
    const std::string path = dir / ("ckpt-" + std::to_string(s));
    {
      const DeviceMesh mesh = init_device_mesh("mpi", layouts[s].first);
      std::map<std::string, at::Tensor> state;
      for (const c10::ScalarType dtype : dtypes) {
        state[c10::toString(dtype)] =
            lay_out(checkpoint_reference(shape, dtype), mesh, layouts[s].second);
      }
      // A DTensor gives the ranks; plain tensors alone would be saved by each
      // process for itself.
      state["anchor"] =
          lay_out(checkpoint_reference({4}, at::kFloat), init_device_mesh("mpi", {4}), "S(0)");
      checkpoint::save(state, path);
    }
    for (const auto& [mesh_shape, placements] : layouts) {
      if (placements.find('P') != std::string::npos) continue;
      SCOPED_TRACE(layouts[s].second + " -> " + placements);
      const DeviceMesh mesh = init_device_mesh("mpi", mesh_shape);
      std::map<std::string, at::Tensor> state;
      for (const c10::ScalarType dtype : dtypes) {
        state[c10::toString(dtype)] = lay_out(at::full(shape, 3, dtype), mesh, placements);
      }
      checkpoint::load(state, path);
      for (const c10::ScalarType dtype : dtypes) {
        EXPECT_TRUE(
            at::equal(local_of(state[c10::toString(dtype)]),
                      local_of(lay_out(checkpoint_reference(shape, dtype), mesh, placements))))
            << c10::toString(dtype);
      }
    }
  }
}

// The files are written by a thread while the ranks go on: the tensors
// change and a collective runs before wait() publishes the checkpoint.
TEST(MpiCheckpointTest, AsyncSaveSnapshotsTheTensors) {
  if (make_world_communicator("mpi")->size() != 4) GTEST_SKIP() << "needs mpirun -np 4";
  const DeviceMesh line = init_device_mesh("mpi", {4});
  const DeviceMesh square = init_device_mesh("mpi", {2, 2});
  const SharedTempDir dir(line);
  const at::Tensor w = checkpoint_reference({7, 5}, at::kDouble);
  std::map<std::string, at::Tensor> state = {{"w", lay_out(w, square, "SS(0,2),S(0)")}};
  checkpoint::SaveHandle pending = checkpoint::save(state, dir / "async", {.async = true});
  local_of(state["w"]).add_(1);
  EXPECT_TRUE(at::equal(DTensor(state["w"]).full_tensor(), w + 1));
  pending.wait();
  std::map<std::string, at::Tensor> loaded = {
      {"w", lay_out(at::zeros({7, 5}, at::kDouble), line, "S(1)")}};
  checkpoint::load(loaded, dir / "async");
  EXPECT_TRUE(at::equal(local_of(loaded["w"]), local_of(lay_out(w, line, "S(1)"))));
}

}  // namespace
}  // namespace dtensor
