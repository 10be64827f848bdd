// Copyright 2026 The dtensor Authors.
//
// tests/nccl/nccl_communicator_test.cc: the NCCL backend, on every rank under
// `mpirun -np 2` and `-np 4` (CTest label "gpu").
//
// Without a CUDA device every test skips. On a machine with fewer GPUs than
// ranks the ranks share GPUs through distinct NCCL_HOSTIDs (see
// nccl_communicator.h): correct and slow, which is all these tests need.
#include <dtensor/mesh/nccl_communicator.h>

#include <chrono>
#include <memory>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#if DTENSOR_TORCH_HAS_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "tests/nccl/cuda_device.h"
#include "tests/support/collective_cases.h"
#include "tests/support/expect_error.h"

namespace {

using dtensor::NcclCommunicator;
using dtensor::ReduceOp;

class NcclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!dtensor::testing::has_cuda_device()) {
      GTEST_SKIP() << "no CUDA device: the NCCL backend needs one";
    }
    world_ = std::dynamic_pointer_cast<NcclCommunicator>(dtensor::make_world_communicator("nccl"));
    ASSERT_NE(world_, nullptr);
  }

  at::TensorOptions on_device(c10::ScalarType dtype) const {
    return at::TensorOptions().dtype(dtype).device(world_->device());
  }

  std::shared_ptr<NcclCommunicator> world_;
};

// Small values that differ per rank and per element, as `dtype`.
at::Tensor bit_pattern(int rank, int64_t numel, c10::ScalarType dtype) {
  at::Tensor values = (at::arange(numel, at::kLong) * 11 + rank * 37 + 5).remainder(128);
  if (dtype == at::kBool) return values.remainder(3) != 0;
  return values.to(dtype);
}

// A bool tensor (at::tensor has no bool-list overload in every libtorch).
at::Tensor bools(std::initializer_list<bool> values) {
  return at::tensor(std::vector<int64_t>(values.begin(), values.end()), at::kLong).ne(0);
}

// The bitwise reduction over ranks 0..n-1 of bit_pattern, on the CPU.
at::Tensor expected_bitwise(int n, int64_t numel, c10::ScalarType dtype, ReduceOp op) {
  at::Tensor result = bit_pattern(0, numel, dtype);
  for (int r = 1; r < n; ++r) {
    const at::Tensor next = bit_pattern(r, numel, dtype);
    if (op == ReduceOp::kBand) result = result.bitwise_and(next);
    if (op == ReduceOp::kBor) result = result.bitwise_or(next);
    if (op == ReduceOp::kBxor) result = result.bitwise_xor(next);
  }
  return result;
}

TEST_F(NcclTest, WorldMatchesMpiAndIsCached) {
  const auto mpi = dtensor::make_world_communicator("mpi");
  EXPECT_EQ(world_->rank(), mpi->rank());
  EXPECT_EQ(world_->size(), mpi->size());
  EXPECT_EQ(world_->backend_name(), "nccl");
  EXPECT_TRUE(world_->device().is_cuda());
  EXPECT_EQ(dtensor::make_world_communicator("nccl").get(), world_.get());
}

TEST_F(NcclTest, SharedCollectiveCases) { dtensor::testing::run_all_collective_cases(*world_); }

// The dtypes NCCL supports beyond those the shared cases cover.
TEST_F(NcclTest, EveryNcclDtype) {
  for (c10::ScalarType dtype : {at::kDouble, at::kChar, at::kByte, at::kInt}) {
    SCOPED_TRACE(::testing::Message() << "dtype " << dtype);
    dtensor::testing::check_all_reduce(*world_, dtype);
    dtensor::testing::check_all_gather(*world_, dtype);
    dtensor::testing::check_reduce_scatter_v(*world_, dtype);
  }
}

TEST_F(NcclTest, BoolMaxAndMinAreOrAndAnd) {
  const int n = world_->size();
  at::Tensor any = bools({world_->rank() == 0, false}).to(world_->device());
  at::Tensor all = bools({world_->rank() != 0 || n == 1, true}).to(world_->device());
  world_->all_reduce(any, ReduceOp::kMax);
  world_->all_reduce(all, ReduceOp::kMin);
  EXPECT_TRUE(at::equal(any.cpu(), bools({true, false})));
  EXPECT_TRUE(at::equal(all.cpu(), bools({n == 1, true})));
}

// band/bor/bxor take the gather-and-fold paths NCCL's missing reductions need.
TEST_F(NcclTest, BitwiseReductions) {
  const int n = world_->size();
  const int rank = world_->rank();
  for (c10::ScalarType dtype : {at::kInt, at::kLong, at::kByte, at::kChar, at::kBool}) {
    for (ReduceOp op : {ReduceOp::kBand, ReduceOp::kBor, ReduceOp::kBxor}) {
      SCOPED_TRACE(::testing::Message()
                   << "dtype " << dtype << ", op " << dtensor::reduce_op_name(op));
      // all_reduce
      at::Tensor t = bit_pattern(rank, 7, dtype).to(world_->device());
      world_->all_reduce(t, op);
      EXPECT_TRUE(at::equal(t.cpu(), expected_bitwise(n, 7, dtype, op)));

      // reduce_scatter: 3 elements per rank
      const at::Tensor full = expected_bitwise(n, 3 * n, dtype, op);
      at::Tensor part = at::empty({3}, on_device(dtype));
      world_->reduce_scatter(bit_pattern(rank, 3 * n, dtype).to(world_->device()), part, op);
      EXPECT_TRUE(at::equal(part.cpu(), full.slice(0, 3 * rank, 3 * rank + 3)));

      // reduce_scatter_v: rank r gets r rows (rank 0 nothing)
      std::vector<int64_t> rows(n);
      int64_t total = 0;
      for (int r = 0; r < n; ++r) total += rows[r] = r;
      const at::Tensor full_v = expected_bitwise(n, total, dtype, op);
      at::Tensor part_v = at::empty({rank}, on_device(dtype));
      world_->reduce_scatter_v(bit_pattern(rank, total, dtype).to(world_->device()), part_v, rows,
                               op);
      const int64_t start = static_cast<int64_t>(rank) * (rank - 1) / 2;
      EXPECT_TRUE(at::equal(part_v.cpu(), full_v.slice(0, start, start + rank)));
    }
  }
}

TEST_F(NcclTest, ExplicitStream) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  at::Tensor t = at::full({1000}, world_->rank() + 1, on_device(at::kFloat));
  // With an explicit stream the caller orders: the fill must be done first.
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  world_->set_stream(stream);
  EXPECT_EQ(world_->stream(), stream);
  world_->all_reduce(t, ReduceOp::kSum);
  world_->use_default_stream();
  EXPECT_NE(world_->stream(), stream);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const int n = world_->size();
  EXPECT_TRUE(at::equal(t.cpu(), at::full({1000}, n * (n + 1) / 2, at::kFloat)));
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

#if DTENSOR_TORCH_HAS_CUDA
// By default a collective is ordered after the caller's current stream and
// before what the caller enqueues next: no synchronization is needed, even
// on a side stream, and even after slow work that produced the input.
TEST_F(NcclTest, DefaultStreamFollowsTheCallersStream) {
  const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(
      /*isHighPriority=*/false, static_cast<c10::DeviceIndex>(world_->device().index()));
  c10::cuda::CUDAStreamGuard guard(side);
  at::Tensor m = at::full({512, 512}, 1.0 / 512, on_device(at::kFloat));
  for (int i = 0; i < 20; ++i) m = at::mm(m, m);  // slow producer, stays all 1/512
  at::Tensor t = (m.sum() / 512 * (world_->rank() + 1)).reshape({1});  // == rank + 1
  world_->all_reduce(t, ReduceOp::kSum);
  t.mul_(2);  // enqueued on the side stream, must see the reduced value
  const int n = world_->size();
  EXPECT_NEAR(t.cpu().item<float>(), n * (n + 1), 1e-3);
}
#endif

TEST_F(NcclTest, SplitGivesNcclSubgroups) {
  const int rank = world_->rank();
  const int n = world_->size();
  const auto parity = std::dynamic_pointer_cast<NcclCommunicator>(world_->split(rank % 2, rank));
  ASSERT_NE(parity, nullptr);
  EXPECT_EQ(parity->size(), (n + 1 - rank % 2) / 2);
  EXPECT_EQ(parity->rank(), rank / 2);
  EXPECT_EQ(parity->device(), world_->device());
  EXPECT_EQ(parity->timeout(), world_->timeout());
  at::Tensor t = at::full({3}, rank, on_device(at::kLong));
  parity->all_reduce(t, ReduceOp::kSum);
  int64_t expected = 0;
  for (int r = rank % 2; r < n; r += 2) expected += r;
  EXPECT_TRUE(at::equal(t.cpu(), at::full({3}, expected, at::kLong)));

  const auto without_zero = world_->split(rank == 0 ? -1 : 0, rank);
  if (rank == 0) {
    EXPECT_EQ(without_zero, nullptr);
  } else {
    ASSERT_NE(without_zero, nullptr);
    EXPECT_EQ(without_zero->size(), n - 1);
    EXPECT_EQ(without_zero->rank(), rank - 1);
  }
}

TEST_F(NcclTest, OnlyTagZero) {
  if (world_->size() < 2) GTEST_SKIP() << "send/recv need a peer";
  const int peer = (world_->rank() + 1) % world_->size();
  at::Tensor t = at::zeros({2}, on_device(at::kFloat));
  DTENSOR_EXPECT_ERROR(world_->send(t, peer, /*tag=*/1), "NCCL messages carry no tag");
  DTENSOR_EXPECT_ERROR(world_->recv(t, peer, /*tag=*/3), "NCCL messages carry no tag");
}

TEST_F(NcclTest, RejectsWhatNcclCannotCarry) {
  at::Tensor cpu = at::zeros({2});
  DTENSOR_EXPECT_ERROR(world_->all_reduce(cpu, ReduceOp::kSum), "expects tensors on cuda");
  at::Tensor complex = at::zeros({2}, on_device(at::kComplexFloat));
  at::Tensor gathered = at::zeros({2 * world_->size()}, on_device(at::kComplexFloat));
  DTENSOR_EXPECT_ERROR(world_->all_gather(complex, gathered), "for NCCL, found");
  world_->barrier();  // still usable
}

// A collective some ranks never join times out, aborts that communicator and
// throws, instead of hanging; other communicators are unaffected.
TEST_F(NcclTest, TimeoutAbortsInsteadOfHanging) {
  if (world_->size() < 2) GTEST_SKIP() << "needs a rank that does not join";
  auto group = std::dynamic_pointer_cast<NcclCommunicator>(world_->split(0, world_->rank()));
  ASSERT_NE(group, nullptr);
  group->set_timeout(std::chrono::seconds(3));
  if (group->rank() == 0) {
    const auto start = std::chrono::steady_clock::now();
    DTENSOR_EXPECT_ERROR(group->barrier(), "expected completion within 3000 ms");
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
    EXPECT_EQ(group->nccl_comm(), nullptr);
    DTENSOR_EXPECT_ERROR(group->barrier(), "aborted after");
  }
  group.reset();  // on the other ranks: finalize, bounded by the same timeout
  world_->barrier();
}

}  // namespace
