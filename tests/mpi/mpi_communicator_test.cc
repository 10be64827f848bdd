// Copyright 2026 The dtensor Authors.
//
// tests/mpi/mpi_communicator_test.cc: what only the MPI backend has to get
// right (wrapping user communicators, split, dtypes MPI lacks, MPI errors),
// plus the shared collective cases. Runs on every rank under mpirun; each
// test makes the same collective calls on every rank.
#include <dtensor/mesh/mpi_communicator.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <sys/uio.h>
#include <unistd.h>

#include <dtensor/base/check.h>
#include "tests/support/collective_cases.h"
#include "tests/support/expect_error.h"

namespace dtensor {
namespace {

MpiCommunicator& world() { return *MpiCommunicator::world(); }

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// Runs `call` on this rank, expects dtensor::Error mentioning `needle`, then
// meets the other ranks: reaching the barrier shows no rank was left waiting
// in a collective and that the communicator still works.
void expect_error_on_every_rank(Communicator& comm, const std::function<void()>& call,
                                std::string_view needle) {
  DTENSOR_EXPECT_ERROR(call(), needle);
  comm.barrier();
}

// ---- Expected reductions, computed locally from every rank's data ----------

// What `rank` contributes: small integers, so that every partial result of
// every op is exact in every dtype (bfloat16 holds integers up to 256).
at::Tensor contribution(int rank, int64_t numel, c10::ScalarType dtype, ReduceOp op) {
  const at::Tensor i = at::arange(numel, at::kLong);
  if (dtype == at::kBool) return at::div(i, int64_t{1} << rank, "floor").remainder(2).to(at::kBool);
  if (is_bitwise(op)) return ((i * 37 + rank * 11) % 100).to(dtype);
  if (dtype == at::kByte) return ((i * 3 + rank) % 3).to(dtype);
  return ((i * 3 + rank) % 5 - 2).to(dtype);
}

// The reduction of every rank's contribution, in float64 or int64 and then
// cast, which is exact for the data above.
at::Tensor expected_reduction(int size, int64_t numel, c10::ScalarType dtype, ReduceOp op) {
  const bool floating = c10::isFloatingType(dtype);
  const c10::ScalarType wide = floating ? at::kDouble : at::kLong;
  at::Tensor result = contribution(0, numel, dtype, op).to(wide);
  for (int r = 1; r < size; ++r) {
    const at::Tensor term = contribution(r, numel, dtype, op).to(wide);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        result = result + term;
        break;
      case ReduceOp::kMax:
        result = at::maximum(result, term);
        break;
      case ReduceOp::kMin:
        result = at::minimum(result, term);
        break;
      case ReduceOp::kProduct:
        result = result * term;
        break;
      case ReduceOp::kBand:
        result = result.bitwise_and(term);
        break;
      case ReduceOp::kBor:
        result = result.bitwise_or(term);
        break;
      case ReduceOp::kBxor:
        result = result.bitwise_xor(term);
        break;
    }
  }
  if (op == ReduceOp::kAvg) result = result / size;
  return result.to(dtype);
}

// all_reduce and reduce_scatter (even and uneven) of `numel_per_rank`
// elements per rank, against the local expectation.
void expect_exact_reduction(Communicator& comm, c10::ScalarType dtype, ReduceOp op,
                            int64_t numel_per_rank) {
  SCOPED_TRACE(::testing::Message() << "dtype " << dtype << ", op " << reduce_op_name(op) << ", "
                                    << numel_per_rank << " per rank");
  const int size = comm.size();
  const int rank = comm.rank();
  const int64_t numel = numel_per_rank * size;
  const at::Tensor expected = expected_reduction(size, numel, dtype, op);

  at::Tensor reduced = contribution(rank, numel, dtype, op);
  comm.all_reduce(reduced, op);
  EXPECT_TRUE(at::equal(reduced, expected)) << "all_reduce";

  const at::Tensor input = contribution(rank, numel, dtype, op);
  at::Tensor block = at::empty({numel_per_rank}, dtype);
  comm.reduce_scatter(input, block, op);
  EXPECT_TRUE(at::equal(block, expected.narrow(0, rank * numel_per_rank, numel_per_rank)))
      << "reduce_scatter";

  // Rank r gets 2r elements of the leading ones; the last rank gets the rest.
  std::vector<int64_t> counts;
  int64_t offset = 0;
  for (int r = 0; r < size; ++r) {
    counts.push_back(r + 1 < size ? std::min<int64_t>(2 * r, numel - offset) : numel - offset);
    offset += counts.back();
  }
  int64_t start = 0;
  for (int r = 0; r < rank; ++r) start += counts[r];
  at::Tensor part = at::empty({counts[rank]}, dtype);
  comm.reduce_scatter_v(input, part, counts, op);
  EXPECT_TRUE(at::equal(part, expected.narrow(0, start, counts[rank]))) << "reduce_scatter_v";
}

// ---- The world communicator and user communicators --------------------------

TEST(MpiCommunicatorTest, WorldMatchesMpiCommWorld) {
  MpiCommunicator& comm = world();
  EXPECT_EQ(comm.rank(), world_rank());
  EXPECT_EQ(comm.size(), world_size());
  EXPECT_EQ(comm.backend_name(), "mpi");
  EXPECT_TRUE(comm.device().is_cpu());
  EXPECT_GE(MpiCommunicator::thread_level(), MPI_THREAD_SINGLE);

  // Its own handle: same group, separate traffic.
  int comparison = MPI_UNEQUAL;
  MPI_Comm_compare(comm.native_handle(), MPI_COMM_WORLD, &comparison);
  EXPECT_EQ(comparison, MPI_CONGRUENT);
}

TEST(MpiCommunicatorTest, RegisteredAsMpiBackend) {
  EXPECT_EQ(make_world_communicator("mpi").get(), MpiCommunicator::world().get());
  EXPECT_EQ(make_world_communicator("mpi").get(), make_world_communicator("mpi").get());
}

TEST(MpiCommunicatorTest, WrapsDuplicateOfUserCommunicator) {
  const int rank = world_rank();
  MPI_Comm halves = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &halves), MPI_SUCCESS);
  auto comm = std::make_unique<MpiCommunicator>(halves);
  int comparison = MPI_UNEQUAL;
  MPI_Comm_compare(comm->native_handle(), halves, &comparison);
  EXPECT_EQ(comparison, MPI_CONGRUENT);

  // The wrapper works on its duplicate, so the user may free the original.
  MPI_Comm_free(&halves);
  EXPECT_EQ(comm->rank(), rank / 2);
  EXPECT_EQ(comm->size(), (world_size() - rank % 2 + 1) / 2);
  at::Tensor t = at::full({3}, rank, at::kLong);
  comm->all_reduce(t, ReduceOp::kSum);
  int64_t same_parity_sum = 0;
  for (int r = rank % 2; r < world_size(); r += 2) same_parity_sum += r;
  EXPECT_TRUE(at::equal(t, at::full({3}, same_parity_sum, at::kLong)));
}

TEST(MpiCommunicatorTest, RejectsNullCommunicator) {
  EXPECT_THROW(MpiCommunicator comm(MPI_COMM_NULL), Error);
}

// ---- split ------------------------------------------------------------------

TEST(MpiCommunicatorTest, SplitWithNegativeColorReturnsNullptr) {
  const int rank = world().rank();
  std::shared_ptr<Communicator> part = world().split(rank == 0 ? -1 : 0, rank);
  if (rank == 0) {
    EXPECT_EQ(part, nullptr);
    return;
  }
  ASSERT_NE(part, nullptr);
  EXPECT_EQ(part->size(), world().size() - 1);
  EXPECT_EQ(part->rank(), rank - 1);
  EXPECT_EQ(part->backend_name(), "mpi");
  at::Tensor t = at::ones({2});
  part->all_reduce(t, ReduceOp::kSum);
  EXPECT_TRUE(at::equal(t, at::full({2}, world().size() - 1.0)));
}

TEST(MpiCommunicatorTest, SplitOrdersRanksByKey) {
  const int rank = world().rank();
  std::shared_ptr<Communicator> reversed = world().split(0, -rank);
  ASSERT_NE(reversed, nullptr);
  EXPECT_EQ(reversed->rank(), world().size() - 1 - rank);
  at::Tensor gathered = at::empty({reversed->size()}, at::kLong);
  reversed->all_gather(at::full({1}, rank, at::kLong), gathered);
  EXPECT_TRUE(at::equal(gathered, at::arange(world().size() - 1, -1, -1, at::kLong)));
}

TEST(MpiCommunicatorTest, SplitOfSplitIsIndependent) {
  const int rank = world().rank();
  std::shared_ptr<Communicator> pairs = world().split(rank / 2, rank);
  ASSERT_NE(pairs, nullptr);
  std::shared_ptr<Communicator> single = pairs->split(pairs->rank(), 0);
  ASSERT_NE(single, nullptr);
  EXPECT_EQ(single->size(), 1);
  at::Tensor t = at::full({1}, rank, at::kInt);
  single->all_reduce(t, ReduceOp::kSum);
  EXPECT_EQ(t.item<int>(), rank);
  pairs->all_reduce(t, ReduceOp::kMax);
  EXPECT_EQ(t.item<int>(), std::min(rank | 1, world().size() - 1));
}

// ---- Reductions MPI has no type or op for ------------------------------------

TEST(MpiCommunicatorTest, HalfPrecisionReductionsAreExact) {
  for (c10::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
    for (ReduceOp op :
         {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kProduct}) {
      expect_exact_reduction(world(), dtype, op, 5);
      // Long enough for MPI to pipeline the user-defined op over segments.
      expect_exact_reduction(world(), dtype, op, 65537);
    }
  }
}

TEST(MpiCommunicatorTest, HalfPrecisionMaxAndMinPropagateNan) {
  if (world().size() < 2) GTEST_SKIP() << "needs two ranks";
  for (c10::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
    for (ReduceOp op : {ReduceOp::kMax, ReduceOp::kMin}) {
      at::Tensor t = at::tensor({1.0, 2.0, 3.0}).to(dtype);
      if (world().rank() == 1) t[0].fill_(std::numeric_limits<float>::quiet_NaN());
      world().all_reduce(t, op);
      EXPECT_TRUE(std::isnan(t[0].item<float>())) << dtype << " " << reduce_op_name(op);
      EXPECT_EQ(t[2].item<float>(), 3.0f);
    }
  }
}

TEST(MpiCommunicatorTest, BuiltinDtypeReductionsAreExact) {
  const std::vector<ReduceOp> arithmetic = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin,
                                            ReduceOp::kProduct};
  for (c10::ScalarType dtype :
       {at::kFloat, at::kDouble, at::kChar, at::kByte, at::kShort, at::kInt, at::kLong}) {
    for (ReduceOp op : arithmetic) expect_exact_reduction(world(), dtype, op, 7);
    if (c10::isFloatingType(dtype)) {
      expect_exact_reduction(world(), dtype, ReduceOp::kAvg, 7);
    } else {
      for (ReduceOp op : {ReduceOp::kBand, ReduceOp::kBor, ReduceOp::kBxor}) {
        expect_exact_reduction(world(), dtype, op, 7);
      }
    }
  }
}

TEST(MpiCommunicatorTest, BoolReductionsAreLogical) {
  // Element i holds bit `rank` of i, so 16 elements meet every combination
  // of four ranks.
  for (ReduceOp op :
       {ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kBand, ReduceOp::kBor, ReduceOp::kBxor}) {
    expect_exact_reduction(world(), at::kBool, op, 16);
  }
  at::Tensor t = at::ones({4}, at::kBool);
  expect_error_on_every_rank(
      world(), [&] { world().all_reduce(t, ReduceOp::kSum); }, "on bool");
}

// ---- Placement of data --------------------------------------------------------

TEST(MpiCommunicatorTest, AllGatherFromOwnSlotOfOutput) {
  const int rank = world().rank();
  const int size = world().size();
  at::Tensor output = at::zeros({size * 3, 2});
  at::Tensor own = output.narrow(0, rank * 3, 3);
  own.fill_(rank);
  world().all_gather(own, output);
  EXPECT_TRUE(at::equal(
      output, at::arange(size).repeat_interleave(6).reshape({size * 3, 2}).to(at::kFloat)));

  // Rank r holds r rows.
  std::vector<int64_t> rows(size);
  for (int r = 0; r < size; ++r) rows[r] = r;
  at::Tensor packed = at::zeros({size * (size - 1) / 2});
  at::Tensor mine = packed.narrow(0, rank * (rank - 1) / 2, rank);
  mine.fill_(rank);
  world().all_gather_v(mine, packed, rows);
  at::Tensor values = at::arange(size);
  EXPECT_TRUE(at::equal(packed, values.repeat_interleave(values).to(at::kFloat)));
}

// The part a rank sends itself, like any other, needs only the element count
// of its place.
TEST(MpiCommunicatorTest, ExchangeOwnPartOfAnotherShape) {
  const int rank = world().rank();
  const int size = world().size();
  std::vector<at::Tensor> send(size), recv(size);
  for (int p = 0; p < size; ++p) {
    send[p] = at::arange(6, at::kFloat).add(10 * rank).reshape({2, 3});
    recv[p] = at::empty({3, 2});
  }
  world().exchange(send, recv);
  for (int p = 0; p < size; ++p) {
    EXPECT_TRUE(at::equal(recv[p], at::arange(6, at::kFloat).add(10 * p).reshape({3, 2})))
        << "from rank " << p;
  }
}

// ---- Errors -------------------------------------------------------------------

TEST(MpiCommunicatorTest, BadArgumentsThrowOnEveryRank) {
  Communicator& comm = world();
  const int size = comm.size();
  const at::Tensor input = at::ones({2, 3});
  at::Tensor output = at::empty({2 * size, 3});

  at::Tensor wrong_dtype = at::empty({2 * size, 3}, at::kDouble);
  expect_error_on_every_rank(
      comm, [&] { comm.all_gather(input, wrong_dtype); }, "dtype");
  at::Tensor wrong_shape = at::empty({2 * size + 1, 3});
  expect_error_on_every_rank(
      comm, [&] { comm.all_gather(input, wrong_shape); }, "shape");
  const std::vector<int64_t> too_few(size - 1, 2);
  expect_error_on_every_rank(
      comm, [&] { comm.all_gather_v(input, output, too_few); }, "one count per rank");
  const std::vector<int64_t> wrong_rows(size, 3);
  expect_error_on_every_rank(
      comm, [&] { comm.all_gather_v(input, output, wrong_rows); }, "shape");
  at::Tensor block = at::empty({2, 3});
  expect_error_on_every_rank(
      comm, [&] { comm.reduce_scatter(output, block, ReduceOp::kBand); }, "band");
  at::Tensor integers = at::ones({4}, at::kLong);
  expect_error_on_every_rank(
      comm, [&] { comm.all_reduce(integers, ReduceOp::kAvg); }, "avg");
  if (size > 1) {  // any row count divides among one rank
    at::Tensor uneven = at::ones({size + 1});
    at::Tensor uneven_out = at::empty({size + 1});
    expect_error_on_every_rank(
        comm, [&] { comm.all_to_all(uneven, uneven_out); }, "multiple of the group size");
  }
  at::Tensor t = at::ones({2});
  expect_error_on_every_rank(
      comm, [&] { comm.broadcast(t, size); }, "root");
  expect_error_on_every_rank(
      comm, [&] { comm.send(t, comm.rank()); }, "peer");

  // A refusal on one rank (the root, of its input) reaches every rank.
  at::Tensor scatter_out = at::empty({2, 3});
  const at::Tensor scatter_in = comm.rank() == 0 ? at::ones({2 * size + 1, 3}) : at::Tensor();
  expect_error_on_every_rank(
      comm, [&] { comm.scatter(scatter_in, scatter_out, 0); },
      comm.rank() == 0 ? "scatter: input: expected shape"
                       : "scatter: expected valid arguments on every rank, found a rank that "
                         "refused its own");
  // A non-root rank's output is checked where it is, and the root learns too.
  at::Tensor root_out = comm.rank() == size - 1 ? at::empty({3, 2}).t() : at::empty({2, 3});
  const at::Tensor root_in = comm.rank() == 0 ? at::ones({2 * size, 3}) : at::Tensor();
  expect_error_on_every_rank(
      comm, [&] { comm.scatter(root_in, root_out, 0); },
      comm.rank() == size - 1 || size == 1 ? "scatter: output: expected a contiguous tensor"
                                           : "scatter: expected valid arguments on every rank");

  // Still usable afterwards.
  at::Tensor sum = at::ones({2});
  comm.all_reduce(sum, ReduceOp::kSum);
  EXPECT_TRUE(at::equal(sum, at::full({2}, static_cast<float>(size))));
}

// Pairs (0, 1), (2, 3), ...: the even rank sends, the odd one receives into
// a tensor of another size. A rank without a partner only meets the barrier.
void expect_recv_size_mismatch_throws(int64_t sent, int64_t expected_by_receiver,
                                      std::string_view needle) {
  MpiCommunicator& comm = world();
  const int rank = comm.rank();
  const bool sender = rank % 2 == 0 && rank + 1 < comm.size();
  const bool receiver = rank % 2 == 1;
  if (sender) {
    comm.send(at::ones({sent}), rank + 1, /*tag=*/7);
    comm.barrier();
  } else if (receiver) {
    at::Tensor t = at::empty({expected_by_receiver});
    expect_error_on_every_rank(
        comm, [&] { comm.recv(t, rank - 1, /*tag=*/7); }, needle);
  } else {
    comm.barrier();
  }
}

TEST(MpiCommunicatorTest, RecvOfLongerMessageReportsMpiError) {
  if (world().size() < 2) GTEST_SKIP() << "needs two ranks";
  expect_recv_size_mismatch_throws(8, 4, "MPI_Recv: expected MPI_SUCCESS, found error");
}

TEST(MpiCommunicatorTest, RecvOfShorterMessageThrows) {
  if (world().size() < 2) GTEST_SKIP() << "needs two ranks";
  expect_recv_size_mismatch_throws(2, 4, "expected 16 bytes");
}

TEST(MpiCommunicatorTest, CountGuardNamesCallCountAndLimit) {
  EXPECT_EQ(mpi_internal::to_mpi_count(std::numeric_limits<int>::max(), "MPI_Bcast", "bytes"),
            std::numeric_limits<int>::max());
  const int64_t too_many = int64_t{1} << 31;
  DTENSOR_EXPECT_ERROR(mpi_internal::to_mpi_count(too_many, "MPI_Allgather", "bytes of one rank"),
                       "MPI_Allgather: bytes of one rank: expected at most 2147483647 (MPI "
                       "counts are int), found 2147483648");
}

TEST(MpiCommunicatorTest, PackedLayoutCountsBytesUpTo2GiB) {
  const mpi_internal::PackedLayout layout = mpi_internal::packed_layout({3, 0, 5}, 4, "call");
  EXPECT_EQ(layout.unit, 1);
  EXPECT_EQ(layout.counts, (std::vector<int>{12, 0, 20}));
  EXPECT_EQ(layout.displacements, (std::vector<int>{0, 12, 12}));
  EXPECT_EQ(mpi_internal::packed_layout({0, 0}, 8, "call").unit, 1);
}

TEST(MpiCommunicatorTest, PackedLayoutPast2GiBCountsInTheLargestCommonUnit) {
  // Parts of 2 GiB, 0, 1.5 GiB and 2 GiB + 4 KiB of float32: units of 4 KiB.
  const int64_t gib = int64_t{1} << 30;
  const mpi_internal::PackedLayout layout =
      mpi_internal::packed_layout({gib / 2, 0, 3 * gib / 8, gib / 2 + 1024}, 4, "MPI_Alltoallv");
  EXPECT_EQ(layout.unit, 4096);
  const int units_per_gib = static_cast<int>(gib / 4096);
  EXPECT_EQ(layout.counts,
            (std::vector<int>{2 * units_per_gib, 0, 3 * units_per_gib / 2, 2 * units_per_gib + 1}));
  EXPECT_EQ(layout.displacements,
            (std::vector<int>{0, 2 * units_per_gib, 2 * units_per_gib, 7 * units_per_gib / 2}));
  // Parts with no common unit above a byte cannot be counted past 2 GiB.
  DTENSOR_EXPECT_ERROR(mpi_internal::packed_layout({2 * gib + 1, 1}, 1, "MPI_Alltoallv"),
                       "MPI_Alltoallv: bytes of one rank: expected at most 2147483647 (MPI "
                       "counts are int), found 2147483649");
}

// A real exchange past 2 GiB per rank (each side of two ranks in its own
// unit). It needs about 12 GiB of memory, so it runs only when asked:
//   DTENSOR_LARGE_MPI_TESTS=1 mpirun -np 2 tests/mpi/dtensor_mpi_tests
//       --gtest_filter='*Past2GiB*'
TEST(MpiCommunicatorTest, AllToAllVPast2GiBPerRank) {
  if (std::getenv("DTENSOR_LARGE_MPI_TESTS") == nullptr) {
    GTEST_SKIP() << "set DTENSOR_LARGE_MPI_TESTS=1 to run (needs ~12 GiB of memory)";
  }
  if (world().size() < 2) GTEST_SKIP() << "needs two ranks";
  const std::shared_ptr<Communicator> pair =
      world().split(world().rank() < 2 ? 0 : -1, world().rank());
  if (pair == nullptr) return;
  const int me = pair->rank();
  // Rank r sends rank 0 2 GiB + 4 KiB * (r + 1) bytes, rank 1 4 KiB: rank 0
  // receives past 2 GiB, and each side's counts need a unit above a byte.
  const auto to_rank0 = [](int rank) { return (int64_t{2} << 30) + 4096 * (rank + 1); };
  const int64_t to_rank1 = 4096;
  at::Tensor input = at::empty({to_rank0(me) + to_rank1}, at::kByte);
  input.narrow(0, 0, to_rank0(me)).fill_(10 * me);
  input.narrow(0, to_rank0(me), to_rank1).fill_(10 * me + 1);
  const std::vector<int64_t> received =
      me == 0 ? std::vector<int64_t>{to_rank0(0), to_rank0(1)} : std::vector<int64_t>{4096, 4096};
  at::Tensor output = at::empty({received[0] + received[1]}, at::kByte);
  pair->all_to_all_v(input, {to_rank0(me), to_rank1}, output, received);
  EXPECT_TRUE(at::all(output.narrow(0, 0, received[0]) == me).item<bool>());
  EXPECT_TRUE(at::all(output.narrow(0, received[0], received[1]) == 10 + me).item<bool>());
}

// ---- Moves along dims by direct reads and writes of peers' memory ---------

// Whether this job's ranks may read and write each other's memory, found
// without the communicator: one host, each rank's raw process_vm_readv of
// its next peer's value returns that value, and its raw process_vm_writev
// into that peer's mailbox lands there.
bool peers_may_read_each_other() {
  MPI_Comm host = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host);
  int host_size = 0;
  MPI_Comm_size(host, &host_size);
  MPI_Comm_free(&host);
  const int rank = world_rank(), size = world_size();
  std::array<int64_t, 2> value_and_mailbox = {1000 + rank, 0};
  const std::array<int64_t, 2> mine = {
      static_cast<int64_t>(getpid()),
      static_cast<int64_t>(reinterpret_cast<uintptr_t>(value_and_mailbox.data()))};
  std::vector<int64_t> posted(2 * static_cast<size_t>(size));
  MPI_Allgather(mine.data(), 2, MPI_INT64_T, posted.data(), 2, MPI_INT64_T, MPI_COMM_WORLD);
  const int next = (rank + 1) % size;
  const auto pid = static_cast<pid_t>(posted[2 * next]);
  auto* address = reinterpret_cast<int64_t*>(posted[2 * next + 1]);
  int64_t read = 0, written = 2000 + rank;
  iovec into{&read, sizeof(read)}, from{address, sizeof(read)};
  iovec local{&written, sizeof(written)}, mailbox{address + 1, sizeof(written)};
  int ok =
      process_vm_readv(pid, &into, 1, &from, 1, 0) == static_cast<ssize_t>(sizeof(read)) &&
      read == 1000 + next &&
      process_vm_writev(pid, &local, 1, &mailbox, 1, 0) == static_cast<ssize_t>(sizeof(written)) &&
      host_size == size;
  MPI_Barrier(MPI_COMM_WORLD);
  ok = ok && value_and_mailbox[1] == 2000 + (rank + size - 1) % size;
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  return ok != 0;
}

// Sets an environment variable on this rank for the scope.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnvironment() { unsetenv(name_); }

 private:
  const char* name_;
};

// Where the ranks may access each other's memory (else skipped): runs
// `check` on the world in every collective dtype, exact, and expects
// `counter` to count `expected` more calls made by direct copies
// (`too_small`: why a group makes none).
void expect_direct_copies(int64_t expected, const char* too_small,
                          int64_t (MpiCommunicator::*counter)() const,
                          void (*check)(Communicator&, c10::ScalarType)) {
  const bool accessible = peers_may_read_each_other();
  ASSERT_EQ(world().reads_peers_directly(), accessible);
  if (!accessible) GTEST_SKIP() << "the ranks are on several hosts, or may not read each other";
  if (expected == 0) GTEST_SKIP() << too_small;
  const int64_t before = (world().*counter)();
  for (c10::ScalarType dtype : testing::collective_test_dtypes()) {
    SCOPED_TRACE(::testing::Message() << dtype);
    check(world(), dtype);
  }
  EXPECT_EQ((world().*counter)() - before, expected);
}

// Large gathers along a dim (S(1) -> R) read their peers' parts into place
// where the ranks may read each other. Of the shared cases (uneven parts of
// p % 3 slices for rank p, empty ones included, exact in every dtype), the
// [64, total, 4096] output along dim 1 does where it has 2 MiB or more;
// [64, 4096, total] along dim 2 (rows of 1 or 2 elements) and the small
// ones go through MPI, which is faster there.
TEST(MpiCommunicatorTest, GathersAlongADimByReadingPeers) {
  int64_t total = 0;
  for (int p = 0; p < world_size(); ++p) total += p % 3;
  int64_t large = 0;
  for (c10::ScalarType dtype : testing::collective_test_dtypes()) {
    large +=
        64 * total * 4096 * static_cast<int64_t>(c10::elementSize(dtype)) >= (int64_t{2} << 20);
  }
  expect_direct_copies(large, "needs 3 ranks for an output of 2 MiB",
                       &MpiCommunicator::gathers_by_direct_reads,
                       &testing::check_all_gather_v_along);
}

// Large all-to-alls between two dims copy each peer's block straight from
// or into its place where the ranks may read each other: S(0) -> S(2)
// writes its strided blocks into the peers' outputs from 2 MiB in rows of
// 512 bytes or more, S(2) -> S(0) reads the peers' blocks into strided
// places from 16 MiB in rows of 1 KiB or more. Of the shared cases (uneven,
// empty parts, exact in every dtype), the large one does where it has those
// sizes; the small ones, and those cutting one dim twice, go through MPI.
TEST(MpiCommunicatorTest, AllToAllsAcrossDimsByDirectCopies) {
  int64_t large = 0;
  for (c10::ScalarType dtype : testing::collective_test_dtypes()) {
    const testing::LargeAcrossDimsCase c =
        testing::large_all_to_all_v_across_dims(world_size(), dtype);
    large += c.bytes >= (int64_t{2} << 20) && c.row_bytes >= 512;
    large += c.bytes >= (int64_t{16} << 20) && c.row_bytes >= 1024;
  }
  expect_direct_copies(large, "needs 2 ranks for 2 MiB of int64",
                       &MpiCommunicator::all_to_alls_by_direct_copies,
                       &testing::check_all_to_all_v_along);
}

// DTENSOR_MPI_DIRECT_READS=0 turns the reads off (for the communicators
// that decide after it is set): the same gathers and all-to-alls through
// MPI, as exact.
TEST(MpiCommunicatorTest, MovesAlongDimsThroughMpiWhenDirectReadsAreOff) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  {
    const ScopedEnvironment off("DTENSOR_MPI_DIRECT_READS", "0");
    EXPECT_FALSE(comm.reads_peers_directly());
  }
  for (c10::ScalarType dtype : testing::collective_test_dtypes()) {
    SCOPED_TRACE(::testing::Message() << dtype);
    testing::check_all_gather_v_along(comm, dtype);
    testing::check_all_to_all_v_along(comm, dtype);
  }
  EXPECT_EQ(comm.gathers_by_direct_reads(), 0);
  EXPECT_EQ(comm.all_to_alls_by_direct_copies(), 0);
}

// A malformed DTENSOR_MPI_DIRECT_READS on one rank throws on every rank
// (none waits for it), naming the value where it was set.
TEST(MpiCommunicatorTest, AMalformedDirectReadsSettingThrowsOnEveryRank) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const ScopedEnvironment bad("DTENSOR_MPI_DIRECT_READS", world_rank() == 1 ? "yes" : "1");
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  DTENSOR_EXPECT_ERROR(comm.reads_peers_directly(), "expected 0 (off), 1 (on) or unset");
  if (world_rank() == 1) {
    DTENSOR_EXPECT_ERROR(comm.reads_peers_directly(), "DTENSOR_MPI_DIRECT_READS: found \"yes\";");
  } else {
    DTENSOR_EXPECT_ERROR(comm.reads_peers_directly(), "DTENSOR_MPI_DIRECT_READS on another rank:");
  }
}

// ---- The shared, backend-agnostic cases ----------------------------------

TEST(MpiCommunicatorTest, SharedCollectiveCases) { testing::run_all_collective_cases(world()); }

TEST(MpiCommunicatorTest, SharedCollectiveCasesOnOddSizedGroup) {
  // Three ranks of four: a group size that is not a power of two takes other
  // algorithms inside MPI.
  const int rank = world().rank();
  std::shared_ptr<Communicator> part = world().split(rank < 3 ? 0 : -1, rank);
  if (part != nullptr) testing::run_all_collective_cases(*part);
  world().barrier();
}

}  // namespace
}  // namespace dtensor
