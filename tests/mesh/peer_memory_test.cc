// Copyright 2026 The dtensor Authors.
//
// mesh/peer_memory.h: reading bytes or a strided tensor of a process (here
// this one, which the kernel always allows) into strided tensors, and
// writing strided tensors into it, exactly, and refusing what cannot be
// copied without throwing.
#include <dtensor/mesh/peer_memory.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdint>
#include <optional>
#include <vector>

#include <c10/util/accumulate.h>

namespace dtensor {
namespace {

// 1, 2, ..., 251, 1, 2, ...: exact in every dtype used here (bfloat16 holds
// integers to 256), with a prime period, so that a misplaced run shows.
at::Tensor counting(at::IntArrayRef shape, at::ScalarType dtype) {
  const at::Tensor n = at::arange(c10::multiply_integers(shape), at::kLong);
  return (n % 251 + 1).reshape(shape).to(dtype);
}

// Whether the kernel lets this process read itself with process_vm_readv
// (a seccomp profile may forbid the call): asked without read_peer_bytes.
bool self_reads_allowed() {
  int64_t value = 7, read = 0;
  iovec local{&read, sizeof(read)}, remote{&value, sizeof(value)};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) ==
             static_cast<ssize_t>(sizeof(read)) &&
         read == 7;
}

class PeerMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!self_reads_allowed()) GTEST_SKIP() << "process_vm_readv is not allowed here";
  }
};

RemoteBytes bytes_of(const at::Tensor& contiguous) {
  return {static_cast<int64_t>(getpid()), reinterpret_cast<uint64_t>(contiguous.data_ptr()),
          static_cast<int64_t>(contiguous.nbytes())};
}

// `view` (of this process's memory) as a remote tensor.
RemoteTensor remote_view(const at::Tensor& view) {
  return {static_cast<int64_t>(getpid()), reinterpret_cast<uint64_t>(view.data_ptr()),
          view.strides().vec()};
}

// A column block of a row-major tensor: one run per row, more rows than one
// call of the kernel takes (IOV_MAX, 1024 on Linux), so the reads go in
// batches. The block gets the source's elements in row-major order, bit for
// bit, and nothing around it changes.
TEST_F(PeerMemoryTest, ReadsIntoAColumnBlockInBatches) {
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kLong}) {
    SCOPED_TRACE(::testing::Message() << dtype);
    const at::Tensor source = counting({3000, 3}, dtype);
    at::Tensor whole = at::full({3000, 8}, -1, dtype);
    at::Tensor block = whole.narrow(1, 2, 3);
    ASSERT_TRUE(read_peer_bytes(bytes_of(source), block));
    // Against values made afresh: a copy the wrong way would make block and
    // source equal by overwriting the source.
    EXPECT_TRUE(at::equal(block, counting({3000, 3}, dtype)));
    EXPECT_TRUE(at::equal(whole.narrow(1, 0, 2), at::full({3000, 2}, -1, dtype)));
    EXPECT_TRUE(at::equal(whole.narrow(1, 5, 3), at::full({3000, 3}, -1, dtype)));
  }
}

// Calls of the kernel capped at a few bytes (1 GiB in read_peer_bytes):
// runs longer than a call are split across calls, and calls end mid-run,
// and the bytes still land in order.
TEST_F(PeerMemoryTest, SplitsRunsAcrossCallsOfTheKernel) {
  const at::Tensor source = counting({40, 7}, at::kLong);
  for (int64_t max_call_bytes : {int64_t{8}, int64_t{24}, int64_t{56}, int64_t{100}}) {
    SCOPED_TRACE(::testing::Message() << max_call_bytes << " bytes per call");
    at::Tensor whole = at::full({40, 10}, -1, at::kLong);
    at::Tensor block = whole.narrow(1, 1, 7);
    ASSERT_TRUE(peer_memory_internal::read_peer_tensor(remote_view(source), block, max_call_bytes));
    EXPECT_TRUE(at::equal(block, counting({40, 7}, at::kLong)));
    EXPECT_TRUE(at::equal(whole.narrow(1, 0, 1), at::full({40, 1}, -1, at::kLong)));
    EXPECT_TRUE(at::equal(whole.narrow(1, 8, 2), at::full({40, 2}, -1, at::kLong)));
  }
}

// Any strides: a transposed destination (runs of one element), one with
// dims of one, one contiguous, a 0-dim one.
TEST_F(PeerMemoryTest, ReadsIntoAnyStrides) {
  const at::Tensor source = counting({35}, at::kDouble);
  at::Tensor transposed_storage = at::zeros({7, 5}, at::kDouble);
  at::Tensor transposed = transposed_storage.t();
  ASSERT_TRUE(read_peer_bytes(bytes_of(source), transposed));
  EXPECT_TRUE(at::equal(transposed, counting({5, 7}, at::kDouble)));

  at::Tensor with_ones = at::zeros({1, 5, 1, 7}, at::kDouble);
  ASSERT_TRUE(read_peer_bytes(bytes_of(source), with_ones));
  EXPECT_TRUE(at::equal(with_ones, counting({1, 5, 1, 7}, at::kDouble)));

  const at::Tensor scalar_source = at::full({}, 42, at::kLong);
  at::Tensor scalar = at::zeros({}, at::kLong);
  ASSERT_TRUE(read_peer_bytes(bytes_of(scalar_source), scalar));
  EXPECT_EQ(scalar.item<int64_t>(), 42);
}

// Which side of a copy peer_memory sees as the other process's (in these
// tests, memory of this one).
enum class Way { kRead, kWrite };

// Copies `from` into `into`: `into` reading `from` as remote memory, or
// `from` writing into `into` as remote memory; with calls of the kernel of
// at most `max_call_bytes` each when given.
bool copy_through_kernel(Way way, const at::Tensor& from, const at::Tensor& into,
                         std::optional<int64_t> max_call_bytes = std::nullopt) {
  if (way == Way::kRead) {
    return max_call_bytes
               ? peer_memory_internal::read_peer_tensor(remote_view(from), into, *max_call_bytes)
               : read_peer_tensor(remote_view(from), into);
  }
  return max_call_bytes
             ? peer_memory_internal::write_peer_tensor(from, remote_view(into), *max_call_bytes)
             : write_peer_tensor(from, remote_view(into));
}

const char* name_of(Way way) { return way == Way::kRead ? "read" : "write"; }

// A column block of a row-major tensor (one run per row, more rows than one
// call of the kernel takes) into a contiguous tensor and into a column
// block of another width, read from the remote side or written to it:
// exactly the block's elements, in order, and nothing around the place
// written.
TEST_F(PeerMemoryTest, CopiesAStridedBlockBothWays) {
  for (Way way : {Way::kRead, Way::kWrite}) {
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kLong}) {
      SCOPED_TRACE(::testing::Message() << name_of(way) << ", " << dtype);
      const at::Tensor source = counting({3000, 9}, dtype);
      const at::Tensor block = source.narrow(1, 4, 3);
      // Compared with a copy made before: a copy the wrong way would make
      // the two equal by overwriting the source.
      const at::Tensor expected = block.clone();
      at::Tensor contiguous = at::full({3000, 3}, -1, dtype);
      ASSERT_TRUE(copy_through_kernel(way, block, contiguous));
      EXPECT_TRUE(at::equal(contiguous, expected));

      at::Tensor whole = at::full({3000, 5}, -1, dtype);
      ASSERT_TRUE(copy_through_kernel(way, block, whole.narrow(1, 1, 3)));
      EXPECT_TRUE(at::equal(whole.narrow(1, 1, 3), expected));
      EXPECT_TRUE(at::equal(source, counting({3000, 9}, dtype)));
      EXPECT_TRUE(at::equal(whole.narrow(1, 0, 1), at::full({3000, 1}, -1, dtype)));
      EXPECT_TRUE(at::equal(whole.narrow(1, 4, 1), at::full({3000, 1}, -1, dtype)));
    }
  }
}

// Runs as long as both sides allow, wherever they end, either way: a 3-D
// block whose runs span two dims on one side only, into a contiguous and a
// permuted place, with calls of the kernel cut at a few bytes, mid-run; a
// transposed source (runs of one element); an expanded source (one value
// for several places).
TEST_F(PeerMemoryTest, CopiesRunsContiguousOnBothSides) {
  const at::Tensor source = counting({6, 4, 10}, at::kLong);
  const at::Tensor block = source.narrow(0, 1, 4).narrow(2, 2, 5);  // runs of 5
  const at::Tensor expected = block.clone();  // see CopiesAStridedBlockBothWays
  for (Way way : {Way::kRead, Way::kWrite}) {
    for (int64_t max_call_bytes : {int64_t{8}, int64_t{24}, int64_t{56}, int64_t{1} << 30}) {
      SCOPED_TRACE(::testing::Message() << name_of(way) << ", " << max_call_bytes << " bytes");
      at::Tensor contiguous = at::full({4, 4, 5}, -1, at::kLong);
      ASSERT_TRUE(copy_through_kernel(way, block, contiguous, max_call_bytes));
      EXPECT_TRUE(at::equal(contiguous, expected));
      at::Tensor permuted_storage = at::full({5, 4, 4}, -1, at::kLong);
      at::Tensor permuted = permuted_storage.permute({2, 1, 0});
      ASSERT_TRUE(copy_through_kernel(way, block, permuted, max_call_bytes));
      EXPECT_TRUE(at::equal(permuted, expected));
    }
    SCOPED_TRACE(name_of(way));
    const at::Tensor transposed = source.select(1, 2).t();  // [10, 6]
    at::Tensor from_transposed = at::full({10, 6}, -1, at::kLong);
    ASSERT_TRUE(copy_through_kernel(way, transposed, from_transposed));
    EXPECT_TRUE(at::equal(from_transposed, counting({6, 4, 10}, at::kLong).select(1, 2).t()));
    const at::Tensor row = counting({1, 7}, at::kLong);
    at::Tensor rows = at::full({3, 7}, -1, at::kLong);
    ASSERT_TRUE(copy_through_kernel(way, row.expand({3, 7}), rows));
    EXPECT_TRUE(at::equal(rows, counting({1, 7}, at::kLong).expand({3, 7})));
  }
  EXPECT_TRUE(at::equal(source, counting({6, 4, 10}, at::kLong)));
}

// An empty destination reads nothing, wherever the source would be, even
// with strides that would place elements together if it had any.
TEST_F(PeerMemoryTest, AnEmptyDestinationReadsNothing) {
  at::Tensor empty = at::zeros({4, 0}, at::kFloat);
  EXPECT_TRUE(read_peer_bytes({static_cast<int64_t>(getpid()), 0, 0}, empty));
  at::Tensor empty_with_stride_0 = at::zeros({1}, at::kFloat).as_strided({3, 0}, {0, 1});
  EXPECT_TRUE(read_peer_bytes({static_cast<int64_t>(getpid()), 0, 0}, empty_with_stride_0));
}

// What cannot be written is refused with false before anything is written:
// remote places with a negative stride, with two elements at one address,
// with more strides than dims; a source that is not plain memory.
TEST_F(PeerMemoryTest, RefusesWhatCannotBeWritten) {
  const at::Tensor source = counting({16}, at::kFloat);
  at::Tensor destination = at::zeros({16}, at::kFloat);
  for (const std::vector<int64_t>& strides :
       {std::vector<int64_t>{-1}, std::vector<int64_t>{0}, std::vector<int64_t>{16, 1}}) {
    RemoteTensor place = remote_view(destination);
    place.strides = strides;
    EXPECT_FALSE(write_peer_tensor(source, place));
  }
  const at::Tensor complex_source = at::ones({2}, at::kComplexFloat);
  at::Tensor complex = at::zeros({2}, at::kComplexFloat);
  EXPECT_FALSE(write_peer_tensor(complex_source.conj(), remote_view(complex)));
  EXPECT_FALSE(write_peer_tensor(at::Tensor(), remote_view(destination)));
  EXPECT_TRUE(at::equal(destination, at::zeros({16}, at::kFloat)));
  EXPECT_TRUE(at::equal(complex, at::zeros({2}, at::kComplexFloat)));
}

// What cannot be read is refused with false, not an exception: sizes that
// differ, an address not mapped, a process that does not exist.
TEST_F(PeerMemoryTest, RefusesWhatCannotBeRead) {
  const at::Tensor source = counting({16}, at::kFloat);
  at::Tensor destination = at::zeros({16}, at::kFloat);
  RemoteBytes short_source = bytes_of(source);
  short_source.bytes -= 4;
  EXPECT_FALSE(read_peer_bytes(short_source, destination));
  EXPECT_FALSE(read_peer_bytes({static_cast<int64_t>(getpid()), 4096, 64}, destination));
  RemoteBytes no_process = bytes_of(source);
  no_process.pid = 0x7ffffff0;
  EXPECT_FALSE(read_peer_bytes(no_process, destination));

  // A remote tensor with more strides than dims, or a negative one.
  RemoteTensor two_strides_for_one_dim = remote_view(source);
  two_strides_for_one_dim.strides = {16, 1};
  EXPECT_FALSE(read_peer_tensor(two_strides_for_one_dim, destination));
  RemoteTensor backwards = remote_view(source);
  backwards.strides = {-1};
  EXPECT_FALSE(read_peer_tensor(backwards, destination));
  EXPECT_TRUE(at::equal(destination, at::zeros({16}, at::kFloat)));
}

// Destinations whose memory is not their values, one per element, are
// refused before anything is read: an expanded view (elements sharing an
// address), a lazily conjugated view, an undefined tensor.
TEST_F(PeerMemoryTest, RefusesDestinationsThatAreNotPlainMemory) {
  const at::Tensor source = counting({4, 3}, at::kFloat);
  at::Tensor row = at::zeros({1, 3}, at::kFloat);
  EXPECT_FALSE(read_peer_bytes(bytes_of(source), row.expand({4, 3})));
  EXPECT_TRUE(at::equal(row, at::zeros({1, 3}, at::kFloat)));

  const at::Tensor complex_source = at::zeros({2}, at::kComplexFloat);
  at::Tensor complex = at::zeros({2}, at::kComplexFloat);
  EXPECT_FALSE(read_peer_bytes(bytes_of(complex_source), complex.conj()));
  EXPECT_FALSE(read_peer_bytes(bytes_of(source), at::Tensor()));
}

}  // namespace
}  // namespace dtensor
