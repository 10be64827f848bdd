// Copyright 2026 The dtensor Authors.
//
// tests/mpi/checkpoint_kill_test.cc: a rank killed in the middle of
// checkpoint::save leaves the previous checkpoint whole and loadable, and
// nothing half-written at its path (issue 20). Two jobs of 4 processes
// sharing DIR, driven by checkpoint_kill_test.sh:
//
//   mpirun -np 4 checkpoint_kill_test save DIR
//     saves step A as DIR/ckpt, then saves step B (other values) there; rank
//     2 dies in the middle of writing its file, and mpirun kills the ranks
//     left waiting for it in a collective: the job fails.
//   mpirun -np 4 checkpoint_kill_test verify DIR
//     loads DIR/ckpt on another mesh and placements and finds step A's values
//     exactly; DIR holds DIR/ckpt with step A's files and the killed save's
//     temporary directory, in which rank 2's file stops where it died.
//
// The kill needs no hook in the library: before saving step B, rank 2 caps
// the size of the files it may write (RLIMIT_FSIZE) at half of its rank
// file, so the kernel raises SIGXFSZ at the write(2) that reaches the cap,
// and the handler turns that into SIGKILL. The process dies inside the save's
// writer, its file half written, without running any more of its code.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/StringUtil.h>
#include <mpi.h>

#include <dtensor/base/check.h>
#include <dtensor/checkpoint/checkpoint.h>
#include <dtensor/checkpoint/files.h>
#include <dtensor/dtensor.h>
#include <dtensor/mesh/mpi_communicator.h>
#include "tests/support/checkpoint_layouts.h"

namespace dtensor {
namespace {

using testing::checkpoint_reference;
using testing::lay_out;
using testing::local_of;

constexpr int kRanks = 4;
constexpr int kVictim = 2;
// float32 as S(0) over 4 ranks: 1 MiB of data in each rank's file.
const std::vector<int64_t> kShape = {1024, 1024};
// Where the victim dies: half way through its data.
constexpr int64_t kFileSizeCap = int64_t{512} << 10;

// Step A's values; step B adds 1.
at::Tensor step_a() { return checkpoint_reference(kShape, at::kFloat); }

void die(int) { ::raise(SIGKILL); }

// From now on, writing a file past `bytes` kills this process.
void die_when_a_file_reaches(int64_t bytes) {
  DTENSOR_CHECK(::signal(SIGXFSZ, die) != SIG_ERR, "checkpoint_kill_test: signal(SIGXFSZ) failed");
  const rlimit cap{static_cast<rlim_t>(bytes), static_cast<rlim_t>(bytes)};
  DTENSOR_CHECK(::setrlimit(RLIMIT_FSIZE, &cap) == 0,
                "checkpoint_kill_test: setrlimit(RLIMIT_FSIZE) failed");
}

void save_phase(const std::string& dir, int rank) {
  const DeviceMesh mesh = init_device_mesh("mpi", {kRanks});
  std::map<std::string, at::Tensor> state = {{"w", lay_out(step_a(), mesh, "S(0)")}};
  checkpoint::save(state, checkpoint::join_path(dir, "ckpt"));
  local_of(state["w"]).add_(1);
  if (rank == kVictim) die_when_a_file_reaches(kFileSizeCap);
  checkpoint::save(state, checkpoint::join_path(dir, "ckpt"));
  DTENSOR_CHECK(false, "checkpoint_kill_test: expected rank ", kVictim,
                " to die in the save of step B, found the save returned");
}

int64_t file_size(const std::string& path) {
  struct stat info {};
  DTENSOR_CHECK(::stat(path.c_str(), &info) == 0, "checkpoint_kill_test: ", path,
                ": expected a file, found none");
  return info.st_size;
}

// DIR holds the checkpoint of step A and the killed save's temporary
// directory, in which the victim's file is cut at the cap.
void check_leftovers(const std::string& dir) {
  const std::vector<std::string> entries = checkpoint::directory_entries(dir);
  DTENSOR_CHECK(
      entries.size() == 2 && entries[0] == "ckpt" && entries[1].rfind("ckpt.tmp-", 0) == 0,
      "checkpoint_kill_test: ", dir,
      ": expected \"ckpt\" and the killed save's \"ckpt.tmp-<id>\", found ",
      c10::Join(", ", entries));
  const std::vector<std::string> files =
      checkpoint::directory_entries(checkpoint::join_path(dir, "ckpt"));
  const std::vector<std::string> expected = {"index.json", "rank-00000.safetensors",
                                             "rank-00001.safetensors", "rank-00002.safetensors",
                                             "rank-00003.safetensors"};
  DTENSOR_CHECK(files == expected, "checkpoint_kill_test: ckpt: expected ",
                c10::Join(", ", expected), ", found ", c10::Join(", ", files));
  const std::string cut =
      checkpoint::join_path(checkpoint::join_path(dir, entries[1]), "rank-00002.safetensors");
  DTENSOR_CHECK(file_size(cut) == kFileSizeCap, "checkpoint_kill_test: ", cut, ": expected ",
                kFileSizeCap, " bytes (cut where rank ", kVictim, " died), found ", file_size(cut));
}

void verify_phase(const std::string& dir, int rank) {
  const DeviceMesh mesh = init_device_mesh("mpi", {2, 2});
  std::map<std::string, at::Tensor> state = {{"w", lay_out(at::zeros(kShape), mesh, "S(1),S(0)")}};
  checkpoint::load(state, checkpoint::join_path(dir, "ckpt"));
  DTENSOR_CHECK(at::equal(local_of(state["w"]), local_of(lay_out(step_a(), mesh, "S(1),S(0)"))),
                "checkpoint_kill_test: rank ", rank,
                ": expected step A's values after the killed save, found others");
  if (rank == 0) check_leftovers(dir);
  // The next save that succeeds removes the killed one's leftovers.
  checkpoint::save(state, checkpoint::join_path(dir, "ckpt"));
  if (rank == 0) {
    const std::vector<std::string> entries = checkpoint::directory_entries(dir);
    DTENSOR_CHECK(entries == std::vector<std::string>{"ckpt"}, "checkpoint_kill_test: ", dir,
                  ": expected only \"ckpt\" after a successful save, found ",
                  c10::Join(", ", entries));
  }
}

}  // namespace
}  // namespace dtensor

int main(int argc, char** argv) {
  const std::string mode = argc == 3 ? argv[1] : "";
  if (mode != "save" && mode != "verify") {
    std::fprintf(stderr, "usage: checkpoint_kill_test save|verify DIR\n");
    return 2;
  }
  const int rank = dtensor::MpiCommunicator::world()->rank();
  try {
    DTENSOR_CHECK(dtensor::MpiCommunicator::world()->size() == dtensor::kRanks,
                  "checkpoint_kill_test: expected mpirun -np ", dtensor::kRanks, ", found ",
                  dtensor::MpiCommunicator::world()->size(), " ranks");
    if (mode == "save") {
      dtensor::save_phase(argv[2], rank);
    } else {
      dtensor::verify_phase(argv[2], rank);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "[rank %d] %s\n", rank, error.what());
    // The other ranks may be waiting in a collective: end the job.
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  std::printf("[rank %d] %s: ok\n", rank, mode.c_str());
  return 0;
}
