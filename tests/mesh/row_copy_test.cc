// Copyright 2026 The dtensor Authors.
//
// mesh/row_copy.h: which parts are copied row by row, and that the copies
// are exact (the collectives' suites check them inside every backend).
#include <dtensor/mesh/row_copy.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

namespace dtensor {
namespace {

at::Tensor distinct_values(at::IntArrayRef shape, at::ScalarType dtype) {
  int64_t numel = 1;
  for (int64_t extent : shape) numel *= extent;
  return at::arange(numel, at::kLong).reshape(shape).to(dtype);
}

// Column blocks of uneven widths (one empty) of a [5, 2, 400] tensor, as an
// S(0) -> S(2) sender cuts them, packed one after another: each equal to its
// block, bit for bit, in every dtype.
TEST(RowCopyTest, ColumnBlocksPackExactly) {
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kLong}) {
    SCOPED_TRACE(::testing::Message() << dtype);
    const at::Tensor t = distinct_values({5, 2, 400}, dtype);
    const std::vector<int64_t> widths = {160, 0, 240};
    at::Tensor packed = at::full({t.numel()}, -1, dtype);
    std::vector<RowCopy> copies;
    int64_t offset = 0, packed_offset = 0;
    for (int64_t width : widths) {
      const std::optional<RowCopy> rows =
          row_copy_packing(StridedPart{t, 2, offset, width}, static_cast<char*>(packed.data_ptr()) +
                                                                 packed_offset * t.element_size());
      EXPECT_EQ(rows.has_value(), width > 0);
      if (rows) {
        EXPECT_EQ(rows->rows, 10);
        EXPECT_EQ(rows->run_bytes, width * t.element_size());
        EXPECT_EQ(rows->source_step, 400 * t.element_size());
        copies.push_back(*rows);
      }
      offset += width;
      packed_offset += 10 * width;
    }
    copy_rows_interleaved(copies);
    EXPECT_TRUE(at::equal(packed.narrow(0, 0, 1600).view({5, 2, 160}), t.narrow(2, 0, 160)));
    EXPECT_TRUE(at::equal(packed.narrow(0, 1600, 2400).view({5, 2, 240}), t.narrow(2, 160, 240)));
  }
}

// Copies part `from` into part `to` of a tensor of zeros as row_copy_of
// describes the copy, and expects the part to equal its source and the rest
// of `to.t` to stay zero. Returns the copy, for checks of its steps.
std::optional<RowCopy> copy_and_check(const StridedPart& from, const StridedPart& to) {
  const std::optional<RowCopy> copy = row_copy_of(from, to);
  if (!copy) {
    ADD_FAILURE() << "expected a row copy";
    return copy;
  }
  copy_rows_interleaved({*copy});
  const at::Tensor written = to.t.narrow(to.dim, to.offset, to.length);
  EXPECT_TRUE(at::equal(written, from.t.narrow(from.dim, from.offset, from.length)));
  EXPECT_EQ(to.t.count_nonzero().item<int64_t>(), written.count_nonzero().item<int64_t>());
  return copy;
}

// Part to part, both sides strided: rows of a narrowed source land at the
// destination's own stride.
TEST(RowCopyTest, StridedToStridedIsExact) {
  const at::Tensor source = distinct_values({6, 256}, at::kFloat);
  const at::Tensor destination = at::zeros({6, 320}, at::kFloat);
  copy_and_check(StridedPart{source, 1, 16, 128}, StridedPart{destination, 1, 160, 128});
}

// S(0) -> S(1)'s part: a column block of the sender's rows lands in a row
// block of the receiver's output, one run per row.
TEST(RowCopyTest, AColumnBlockLandsInARowBlock) {
  const at::Tensor rows = distinct_values({6, 256}, at::kFloat);
  const at::Tensor columns = at::zeros({12, 128}, at::kFloat);
  const std::optional<RowCopy> copy =
      copy_and_check(StridedPart{rows, 1, 128, 128}, StridedPart{columns, 0, 6, 6});
  ASSERT_TRUE(copy.has_value());
  EXPECT_EQ(copy->rows, 6);
  EXPECT_EQ(copy->run_bytes, 512);
  EXPECT_EQ(copy->source_step, 1024);
  EXPECT_EQ(copy->destination_step, 512);
}

// What is left to ATen's copy: one contiguous run, runs under
// kShortestRowCopyRun bytes, rows that fold into no single stride, empty
// parts.
TEST(RowCopyTest, OtherPartsAreLeftToATen) {
  const at::Tensor t = distinct_values({4, 6, 256}, at::kFloat);
  at::Tensor out = at::zeros({4, 6, 256}, at::kFloat);
  EXPECT_FALSE(row_copy_of(StridedPart{t, 0, 1, 2}, StridedPart{out, 0, 1, 2}));
  EXPECT_FALSE(row_copy_of(StridedPart{t, 2, 0, 32}, StridedPart{out, 2, 0, 32}));
  // Rows of dim 1 three apart, those of dim 0 six: no single stride.
  const at::Tensor gapped = t.narrow(1, 0, 3);
  at::Tensor gapped_out = at::zeros({4, 3, 256}, at::kFloat);
  EXPECT_FALSE(row_copy_of(StridedPart{gapped, 2, 0, 128}, StridedPart{gapped_out, 2, 0, 128}));
  EXPECT_FALSE(row_copy_of(StridedPart{t, 2, 0, 0}, StridedPart{out, 2, 0, 0}));
  // Destinations of another shape, and values not stored as they read.
  EXPECT_FALSE(row_copy_of(StridedPart{t, 2, 0, 128}, StridedPart{out, 2, 0, 64}));
  EXPECT_FALSE(row_copy_of(StridedPart{t, 2, 0, 128}, StridedPart{gapped_out, 2, 0, 128}));
  const at::Tensor complex = at::zeros({4, 256}, at::kComplexFloat);
  at::Tensor complex_out = at::zeros({4, 256}, at::kComplexFloat);
  EXPECT_TRUE(row_copy_of(StridedPart{complex, 1, 0, 128}, StridedPart{complex_out, 1, 0, 128}));
  EXPECT_FALSE(
      row_copy_of(StridedPart{complex.conj(), 1, 0, 128}, StridedPart{complex_out, 1, 0, 128}));
  // The same part with rows that do fold (t is not gapped).
  EXPECT_TRUE(row_copy_of(StridedPart{t, 2, 0, 128}, StridedPart{out, 2, 128, 128}));
}

}  // namespace
}  // namespace dtensor
