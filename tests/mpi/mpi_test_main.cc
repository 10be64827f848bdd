// Copyright 2026 The dtensor Authors.
//
// tests/mpi/mpi_test_main.cc: GoogleTest main for suites that run on every
// rank under `mpirun -np 4 --oversubscribe`.
//
// Rank 0 prints gtest's usual report. The other ranks print only their
// failures, tagged with their rank, so four copies of the report do not
// interleave and no rank's failure goes unseen. Every rank exits non-zero
// when any rank failed. MPI is initialized through MpiCommunicator::world(),
// which also finalizes it at exit.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <dtensor/mesh/mpi_communicator.h>

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}

  // Remembered here: asking UnitTest for the current test from
  // OnTestPartResult deadlocks on gtest's own mutex.
  void OnTestStart(const ::testing::TestInfo& test) override {
    test_ = std::string(test.test_suite_name()) + "." + test.name();
  }

  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s: %s:%d: Failure\n%s\n", rank_, test_.c_str(),
                 result.file_name() != nullptr ? result.file_name() : "?", result.line_number(),
                 result.message());
  }

 private:
  int rank_;
  std::string test_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const std::shared_ptr<dtensor::MpiCommunicator> world = dtensor::MpiCommunicator::world();
  if (world->rank() != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(world->rank()));
  }
  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;

  // Rank 0's report covers rank 0 only; name every failing rank, and let
  // every rank exit non-zero, since mpirun reports a single rank's status.
  std::vector<int> failed_by_rank(world->size());
  MPI_Allgather(&failed, 1, MPI_INT, failed_by_rank.data(), 1, MPI_INT, world->native_handle());
  std::string failing_ranks;
  for (int r = 0; r < world->size(); ++r) {
    if (failed_by_rank[r] != 0) failing_ranks += " " + std::to_string(r);
  }
  if (failing_ranks.empty()) return 0;
  if (world->rank() == 0) std::fprintf(stderr, "FAILED on ranks:%s\n", failing_ranks.c_str());
  return 1;
}
