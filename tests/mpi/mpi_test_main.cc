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

#include <gtest/gtest.h>

#include "mesh/mpi_communicator.h"

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}

  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
    std::fprintf(stderr, "[rank %d] %s.%s: %s:%d: Failure\n%s\n", rank_,
                 test != nullptr ? test->test_suite_name() : "?",
                 test != nullptr ? test->name() : "?",
                 result.file_name() != nullptr ? result.file_name() : "?", result.line_number(),
                 result.message());
  }

 private:
  int rank_;
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
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  // mpirun reports one rank's status; make it the worst of all.
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, world->native_handle());
  return failed;
}
