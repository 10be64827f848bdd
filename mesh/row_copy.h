// Copyright 2026 The dtensor Authors.
//
// mesh/row_copy.h: copying several strided parts at once, row by row across
// all of them, for the communicators' packing and the local backend's sends.
//
// An S(0) -> S(1) all-to-all sends each peer a column block of the rank's
// rows. Copying one block after another reads every row once per peer at a
// stride, which streams from memory at about two thirds of a flat copy's
// speed here; copying row i of every block before row i + 1 of any reads the
// rows once, in order, as fast as a flat copy (benchmarks/RESULTS.md,
// S0_to_S1). A part qualifies when, on both of its sides, it is rows of one
// contiguous run at a constant stride:
//
//   std::vector<RowCopy> copies;
//   for (...) {
//     std::optional<RowCopy> rows = row_copy_of(source_part, destination_part);
//     if (!rows) { /* copy the part with at::Tensor::copy_ */ continue; }
//     copies.push_back(*rows);
//   }
//   copy_rows_interleaved(copies);
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/ATen.h>

namespace dtensor {

// One part's copy: `rows` runs of `run_bytes` bytes, row i read at
// source + i * source_step and written at destination + i * destination_step.
struct RowCopy {
  const char* source = nullptr;
  char* destination = nullptr;
  int64_t rows = 0;
  int64_t run_bytes = 0;
  int64_t source_step = 0;
  int64_t destination_step = 0;
};

// Below this many bytes per run, a memcpy per run costs more than reading
// the rows in order saves: in the cache, ATen's strided copy of 64-byte runs
// took about half the time, of 128-byte runs three quarters; out of it the
// two were about even.
inline constexpr int64_t kShortestRowCopyRun = 256;

// The `length` slices of `t` along `dim` from slice `offset`: a narrow,
// described without making one (the local backend decides for every peer on
// every call, where a narrow would cost more than a small copy).
struct StridedPart {
  const at::Tensor& t;
  int64_t dim;
  int64_t offset;
  int64_t length;

  // The part's size along dim `d` of `t`.
  int64_t size(int64_t d) const { return d == dim ? length : t.size(d); }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d = 0; d < t.dim(); ++d) n *= size(d);
    return n;
  }
};

// `source` copied into `destination` as a RowCopy: nullopt unless both are
// CPU memory of one dtype and shape holding their values as stored (no
// conjugate or negative bit, no zero tensor, not quantized:
// base/tensor_memory.h), and nullopt when either side
// is not rows of one contiguous run at a constant stride, when its runs are
// shorter than kShortestRowCopyRun bytes, or when it is a single run (a plain
// copy, which ATen spreads over threads as it sees fit).
std::optional<RowCopy> row_copy_of(const StridedPart& source, const StridedPart& destination);
// The same with `destination` contiguous memory of the part's shape (packing).
std::optional<RowCopy> row_copy_packing(const StridedPart& source, void* destination);

// Performs `copies`, row i of every copy before row i + 1 of any, spread
// over ATen's intra-op threads by blocks of rows. The copies' destinations
// must not overlap each other or any source.
void copy_rows_interleaved(const std::vector<RowCopy>& copies);

}  // namespace dtensor
