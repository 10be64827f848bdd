// Copyright 2026 The dtensor Authors.
//
// mesh/peer_memory.h: reading bytes of a process (here this one, which the
// kernel always allows) into strided tensors, exactly, and refusing what
// cannot be read without throwing.
#include <dtensor/mesh/peer_memory.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>

#include <c10/util/accumulate.h>

namespace dtensor {
namespace {

// 1, 2, ..., 251, 1, 2, ...: exact in every dtype used here (bfloat16 holds
// integers to 256), with a prime period, so that a misplaced run shows.
at::Tensor counting(at::IntArrayRef shape, at::ScalarType dtype) {
  const at::Tensor n = at::arange(c10::multiply_integers(shape), at::kLong);
  return (n % 251 + 1).reshape(shape).to(dtype);
}

RemoteBytes bytes_of(const at::Tensor& contiguous) {
  return {static_cast<int64_t>(getpid()), reinterpret_cast<uint64_t>(contiguous.data_ptr()),
          static_cast<int64_t>(contiguous.nbytes())};
}

// A column block of a row-major tensor: one run per row, more rows than one
// call of the kernel takes (IOV_MAX, 1024 on Linux), so the reads go in
// batches. The block gets the source's elements in row-major order, bit for
// bit, and nothing around it changes.
TEST(PeerMemoryTest, ReadsIntoAColumnBlockInBatches) {
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kLong}) {
    SCOPED_TRACE(::testing::Message() << dtype);
    const at::Tensor source = counting({3000, 3}, dtype);
    at::Tensor whole = at::full({3000, 8}, -1, dtype);
    at::Tensor block = whole.narrow(1, 2, 3);
    ASSERT_TRUE(read_peer_bytes(bytes_of(source), block));
    EXPECT_TRUE(at::equal(block, source));
    EXPECT_TRUE(at::equal(whole.narrow(1, 0, 2), at::full({3000, 2}, -1, dtype)));
    EXPECT_TRUE(at::equal(whole.narrow(1, 5, 3), at::full({3000, 3}, -1, dtype)));
  }
}

// Any strides: a transposed destination (runs of one element), one with
// dims of one, one contiguous, a 0-dim one.
TEST(PeerMemoryTest, ReadsIntoAnyStrides) {
  const at::Tensor source = counting({35}, at::kDouble);
  at::Tensor transposed_storage = at::zeros({7, 5}, at::kDouble);
  at::Tensor transposed = transposed_storage.t();
  ASSERT_TRUE(read_peer_bytes(bytes_of(source), transposed));
  EXPECT_TRUE(at::equal(transposed, source.reshape({5, 7})));

  at::Tensor with_ones = at::zeros({1, 5, 1, 7}, at::kDouble);
  ASSERT_TRUE(read_peer_bytes(bytes_of(source), with_ones));
  EXPECT_TRUE(at::equal(with_ones, source.reshape({1, 5, 1, 7})));

  const at::Tensor scalar_source = at::full({}, 42, at::kLong);
  at::Tensor scalar = at::zeros({}, at::kLong);
  ASSERT_TRUE(read_peer_bytes(bytes_of(scalar_source), scalar));
  EXPECT_EQ(scalar.item<int64_t>(), 42);
}

// An empty destination reads nothing, wherever the source would be.
TEST(PeerMemoryTest, AnEmptyDestinationReadsNothing) {
  at::Tensor empty = at::zeros({4, 0}, at::kFloat);
  EXPECT_TRUE(read_peer_bytes({static_cast<int64_t>(getpid()), 0, 0}, empty));
}

// What cannot be read is refused with false, not an exception: sizes that
// differ, an address not mapped, a process that does not exist.
TEST(PeerMemoryTest, RefusesWhatCannotBeRead) {
  const at::Tensor source = counting({16}, at::kFloat);
  at::Tensor destination = at::zeros({16}, at::kFloat);
  RemoteBytes short_source = bytes_of(source);
  short_source.bytes -= 4;
  EXPECT_FALSE(read_peer_bytes(short_source, destination));
  EXPECT_FALSE(read_peer_bytes({static_cast<int64_t>(getpid()), 4096, 64}, destination));
  RemoteBytes no_process = bytes_of(source);
  no_process.pid = 0x7ffffff0;
  EXPECT_FALSE(read_peer_bytes(no_process, destination));
}

}  // namespace
}  // namespace dtensor
