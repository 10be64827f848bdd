// Copyright 2026 The dtensor Authors.
#include <dtensor/mesh/local_communicator.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "tests/support/collective_cases.h"
#include "tests/support/default_paths_communicator.h"
#include "tests/support/expect_error.h"

namespace dtensor {
namespace {

class LocalCollectivesTest : public ::testing::TestWithParam<int> {};

TEST_P(LocalCollectivesTest, EveryCollectiveIsExact) {
  run_ranks(GetParam(), [](int) { testing::run_all_collective_cases(*local_world()); });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, LocalCollectivesTest, ::testing::Range(1, 9));

// Communicator's default along-dim collectives and exchange (NCCL's), on
// the local backend's flat collectives.
TEST_P(LocalCollectivesTest, EveryCollectiveIsExactThroughTheDefaultPaths) {
  run_ranks(GetParam(),
            [](int) { testing::run_all_collective_cases(*testing::default_paths_world()); });
}

// The in-place gather (each rank's input is its own slot of the output)
// copies part by part; the other gathers write every part with one cat.
TEST(LocalCommunicatorTest, InPlaceAllGatherKeepsEveryPart) {
  run_ranks(4, [](int rank) {
    auto world = local_world();
    at::Tensor output = at::full({8, 3}, -1.0f);
    output.narrow(0, 2 * rank, 2).fill_(rank);
    world->all_gather(output.narrow(0, 2 * rank, 2), output);
    const at::Tensor expected =
        at::arange(4, at::kFloat).repeat_interleave(2).unsqueeze(1).expand({8, 3});
    EXPECT_TRUE(at::equal(output, expected)) << output;
  });
}

// A collective lets go of its tensors when it returns: the caller's memory
// is freed when the caller drops it, not at the group's next collective.
TEST(LocalCommunicatorTest, ACollectiveKeepsNoReferenceToItsTensors) {
  // Referenced by anything but `t` itself: its TensorImpl, or its memory
  // through a view.
  const auto held_elsewhere = [](const at::Tensor& t) {
    return t.use_count() > 1 || t.storage().use_count() > 1;
  };
  run_ranks(3, [&](int rank) {
    auto world = local_world();
    at::Tensor input = at::full({2, 4}, static_cast<float>(rank));
    at::Tensor gathered = at::empty({6, 4});
    world->all_gather(input, gathered);
    EXPECT_FALSE(held_elsewhere(input));
    EXPECT_FALSE(held_elsewhere(gathered));
    at::Tensor columns = at::empty({6, rank == 0 ? 2 : 1});  // S(0) -> S(1) of [6, 4]
    world->all_to_all_v(input, {2, 1, 1}, 1, columns, {2, 2, 2}, 0);
    EXPECT_FALSE(held_elsewhere(input));
    EXPECT_FALSE(held_elsewhere(columns));
  });
}

TEST(LocalCommunicatorTest, WorldIsTheRegisteredLocalBackend) {
  run_ranks(3, [](int rank) {
    auto world = make_world_communicator("local");
    EXPECT_EQ(world->rank(), rank);
    EXPECT_EQ(world->size(), 3);
    EXPECT_EQ(world->backend_name(), "local");
    EXPECT_TRUE(world->device().is_cpu());
  });
}

TEST(LocalCommunicatorTest, OutsideRunRanksIsAnError) {
  DTENSOR_EXPECT_ERROR(local_world(), "expected to be called on a rank thread");
  DTENSOR_EXPECT_ERROR(make_world_communicator("local"), "rank thread of dtensor::run_ranks");
}

TEST(LocalCommunicatorTest, UnknownBackendNamesTheKnownOnes) {
  DTENSOR_EXPECT_ERROR(make_world_communicator("gloo"), "found \"gloo\"");
  DTENSOR_EXPECT_ERROR(make_world_communicator("gloo"), "local");
}

TEST(LocalCommunicatorTest, InvalidWorldSize) {
  DTENSOR_EXPECT_ERROR(run_ranks(0, [](int) {}), "world_size: expected at least 1, found 0");
}

TEST(LocalCommunicatorTest, TagsMatchMessagesOutOfOrder) {
  run_ranks(2, [](int rank) {
    auto world = local_world();
    if (rank == 0) {
      world->send(at::full({2}, 1.0), 1, /*tag=*/7);
      world->send(at::full({2}, 2.0), 1, /*tag=*/3);
    } else {
      at::Tensor first = at::zeros({2});
      at::Tensor second = at::zeros({2});
      world->recv(first, 0, /*tag=*/3);
      world->recv(second, 0, /*tag=*/7);
      EXPECT_TRUE(at::equal(first, at::full({2}, 2.0)));
      EXPECT_TRUE(at::equal(second, at::full({2}, 1.0)));
    }
  });
}

TEST(LocalCommunicatorTest, RecvOfWrongSizeNamesBothSides) {
  EXPECT_THROW(run_ranks(2,
                         [](int rank) {
                           auto world = local_world();
                           if (rank == 0) {
                             world->send(at::ones({3}), 1);
                           } else {
                             at::Tensor buffer = at::zeros({4});
                             DTENSOR_EXPECT_ERROR(world->recv(buffer, 0),
                                                  "expected 4 elements of Float, found a message "
                                                  "of 3 elements");
                             throw Error("rethrown to end the world");
                           }
                         }),
               Error);
}

TEST(LocalCommunicatorTest, RanksCallingDifferentCollectivesAllThrow) {
  std::atomic<int> errors{0};
  run_ranks(3, [&](int rank) {
    auto world = local_world();
    at::Tensor t = at::ones({4});
    try {
      if (rank == 1) {
        world->broadcast(t, 0);
      } else {
        world->all_reduce(t, ReduceOp::kSum);
      }
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("ranks disagree on a collective"), std::string::npos)
          << error.what();
      ++errors;
    }
  });
  EXPECT_EQ(errors.load(), 3);
}

TEST(LocalCommunicatorTest, RanksDisagreeingOnSizesAllThrow) {
  std::atomic<int> errors{0};
  run_ranks(2, [&](int rank) {
    at::Tensor t = at::ones({rank == 0 ? 4 : 5});
    try {
      local_world()->all_reduce(t, ReduceOp::kSum);
    } catch (const Error& error) {
      ++errors;
    }
  });
  EXPECT_EQ(errors.load(), 2);
}

TEST(LocalCommunicatorTest, MismatchedAllToAllCountsAllThrow) {
  std::atomic<int> errors{0};
  run_ranks(2, [&](int rank) {
    // Rank 0 sends 2 rows to rank 1, which expects 1.
    const std::vector<int64_t> send = {1, rank == 0 ? 2 : 1};
    const std::vector<int64_t> recv = {1, 1};
    at::Tensor input = at::zeros({send[0] + send[1]});
    at::Tensor output = at::zeros({2});
    try {
      local_world()->all_to_all_v(input, send, output, recv);
    } catch (const Error& error) {
      EXPECT_NE(
          std::string(error.what()).find("rank 0 sends 2 elements to rank 1, which expects 1"),
          std::string::npos)
          << error.what();
      ++errors;
    }
  });
  EXPECT_EQ(errors.load(), 2);
}

TEST(LocalCommunicatorTest, MismatchedPartShapesAlongDimsAllThrow) {
  std::atomic<int> errors{0};
  run_ranks(2, [&](int rank) {
    // Each rank sends two columns of its [2, 4] input; rank 1 expects its
    // parts as [1, 4] rows instead: the same element count, another shape.
    at::Tensor input = at::zeros({2, 4});
    at::Tensor output = rank == 0 ? at::zeros({4, 2}) : at::zeros({2, 4});
    const std::vector<int64_t> send = {2, 2};
    const std::vector<int64_t> recv =
        rank == 0 ? std::vector<int64_t>{2, 2} : std::vector<int64_t>{1, 1};
    try {
      local_world()->all_to_all_v(input, send, 1, output, recv, 0);
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what())
                    .find("rank 0 sends rank 1 a part of shape [2,2], which "
                          "expects shape [1,4]"),
                std::string::npos)
          << error.what();
      ++errors;
    }
  });
  EXPECT_EQ(errors.load(), 2);
}

TEST(LocalCommunicatorTest, ExchangeOfMismatchedPartShapesAllThrow) {
  std::atomic<int> errors{0};
  run_ranks(2, [&](int rank) {
    // Rank 0 sends rank 1 a [2, 3] part; rank 1 expects [3, 2] (the same
    // element count, another shape).
    const at::Tensor empty = at::zeros({0});
    std::vector<at::Tensor> send{empty, empty}, recv{empty, empty};
    if (rank == 0) send[1] = at::ones({2, 3});
    if (rank == 1) recv[0] = at::zeros({3, 2});
    try {
      local_world()->exchange(send, recv);
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what())
                    .find("rank 0 sends rank 1 a part of shape [2, 3], which expects shape [3, 2]"),
                std::string::npos)
          << error.what();
      ++errors;
    }
  });
  EXPECT_EQ(errors.load(), 2);
}

TEST(LocalCommunicatorTest, AllGatherAlongDisagreeingShapesAllThrow) {
  std::atomic<int> errors{0};
  run_ranks(2, [&](int rank) {
    // Rank 1 gathers [2, 1] parts into [2, 2], rank 0 [1, 2] parts into [1, 4].
    at::Tensor input = rank == 0 ? at::zeros({1, 2}) : at::zeros({2, 1});
    at::Tensor output = rank == 0 ? at::zeros({1, 4}) : at::zeros({2, 2});
    const std::vector<int64_t> sizes =
        rank == 0 ? std::vector<int64_t>{2, 2} : std::vector<int64_t>{1, 1};
    try {
      local_world()->all_gather_v(input, output, sizes, 1);
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("ranks disagree on a collective"), std::string::npos)
          << error.what();
      ++errors;
    }
  });
  EXPECT_EQ(errors.load(), 2);
}

// A rank that arrives early polls for its peers, then sleeps
// (local_communicator.h): peers arriving within the poll, and late ones that
// must wake sleepers, meet in the same collective every time, and each
// result is that collective's.
TEST(LocalCommunicatorTest, EarlyAndLateArrivalsMeetInEveryCollective) {
  run_ranks(4, [](int rank) {
    auto world = local_world();
    for (int i = 0; i < 120; ++i) {
      // Every third call one rank comes late, past the poll window.
      if (i % 3 == 0 && i / 3 % 4 == rank) {
        std::this_thread::sleep_for(std::chrono::microseconds(600));
      }
      at::Tensor sum = at::full({3}, static_cast<double>(10 * i + rank), at::kDouble);
      world->all_reduce(sum, ReduceOp::kSum);
      ASSERT_TRUE(at::equal(sum, at::full({3}, 40.0 * i + 6, at::kDouble))) << "call " << i;
      at::Tensor gathered = at::empty({4}, at::kLong);
      world->all_gather(at::full({1}, int64_t{100} * i + rank), gathered);
      ASSERT_TRUE(at::equal(gathered, at::arange(4, at::kLong) + 100 * i)) << "call " << i;
    }
  });
}

TEST(LocalCommunicatorTest, FailingRankReleasesPeersAndIsRethrown) {
  try {
    run_ranks(4, [](int rank) {
      if (rank == 2) throw std::runtime_error("rank two gave up");
      at::Tensor t = at::ones({1});
      local_world()->all_reduce(t, ReduceOp::kSum);  // would wait forever for rank 2
    });
    ADD_FAILURE() << "expected the failure of rank 2 to be rethrown";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "rank two gave up");
  }
}

TEST(LocalCommunicatorTest, FailureReleasesPeersWaitingInASubGroup) {
  try {
    run_ranks(4, [](int rank) {
      auto pair = local_world()->split(rank / 2, rank);
      if (rank == 3) throw std::runtime_error("rank three gave up");
      at::Tensor t = at::ones({1});
      pair->all_reduce(t, ReduceOp::kSum);  // rank 2 waits for rank 3
    });
    ADD_FAILURE() << "expected the failure of rank 3 to be rethrown";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "rank three gave up");
  }
}

TEST(LocalCommunicatorTest, MissingRankTimesOut) {
  ::setenv("DTENSOR_LOCAL_TIMEOUT_SECONDS", "1", 1);
  try {
    run_ranks(2, [](int rank) {
      if (rank == 0) local_world()->barrier();
      // Busy past the timeout: a rank that had returned would be named at once.
      if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    });
    ADD_FAILURE() << "expected a timeout";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("timed out after 1 s in barrier"), std::string::npos)
        << error.what();
  }
  ::unsetenv("DTENSOR_LOCAL_TIMEOUT_SECONDS");
}

// A rank that returned can never join: its peers in a group waiting for it
// fail at once, naming it, instead of hanging until the timeout; peers in
// groups without it are unaffected.
TEST(LocalCommunicatorTest, ReturnedRankReleasesItsGroupOnly) {
  ::setenv("DTENSOR_LOCAL_TIMEOUT_SECONDS", "60", 1);
  const auto start = std::chrono::steady_clock::now();
  try {
    run_ranks(4, [](int rank) {
      auto pair = local_world()->split(rank / 2, rank);
      if (rank == 3) return;
      at::Tensor t = at::ones({1});
      pair->all_reduce(t, ReduceOp::kSum);  // ranks 0 and 1 complete; rank 2 waits for rank 3
      EXPECT_EQ(t.item<float>(), 2.0f);
    });
    ADD_FAILURE() << "expected rank 2 to fail";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("found world rank 3 returned from its run_ranks"),
              std::string::npos)
        << error.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  ::unsetenv("DTENSOR_LOCAL_TIMEOUT_SECONDS");
}

TEST(LocalCommunicatorTest, SplitGroupsAreIndependent) {
  run_ranks(6, [](int rank) {
    auto world = local_world();
    auto trio = world->split(rank / 3, rank);
    auto pair = world->split(rank % 3, rank);
    at::Tensor a = at::full({1}, static_cast<double>(rank));
    at::Tensor b = a.clone();
    trio->all_reduce(a, ReduceOp::kSum);
    pair->all_reduce(b, ReduceOp::kMax);
    EXPECT_EQ(a.item<double>(), rank < 3 ? 0 + 1 + 2 : 3 + 4 + 5);
    EXPECT_EQ(b.item<double>(), rank % 3 + 3);
  });
}

}  // namespace
}  // namespace dtensor
