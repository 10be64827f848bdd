// Copyright 2026 The dtensor Authors.
#include <dtensor/mesh/row_copy.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>

#include <dtensor/base/tensor_memory.h>

namespace dtensor {
namespace {

// Rows of one run shared by both sides: the innermost dims contiguous on
// both make the run; the dims outside it must fold into one dim of constant
// stride on each side.
std::optional<RowCopy> rows_of(c10::IntArrayRef sizes, const char* source,
                               c10::IntArrayRef source_strides, char* destination,
                               c10::IntArrayRef destination_strides, int64_t element_size,
                               int64_t slice_dim, int64_t slices) {
  const auto size = [&](int64_t d) { return d == slice_dim ? slices : sizes[d]; };
  int64_t run = 1;
  auto d = static_cast<int64_t>(sizes.size()) - 1;
  for (; d >= 0; --d) {
    if (size(d) == 1) continue;
    if (source_strides[d] != run || destination_strides[d] != run) break;
    run *= size(d);
  }
  RowCopy copy{source, destination, 1, run * element_size, 0, 0};
  for (; d >= 0; --d) {
    if (size(d) == 1) continue;
    if (copy.rows == 1) {
      copy.source_step = source_strides[d];
      copy.destination_step = destination_strides[d];
    } else if (source_strides[d] != copy.source_step * copy.rows ||
               destination_strides[d] != copy.destination_step * copy.rows) {
      return std::nullopt;
    }
    copy.rows *= size(d);
  }
  if (copy.rows == 1 || copy.run_bytes < kShortestRowCopyRun || copy.destination_step == 0) {
    return std::nullopt;
  }
  copy.source_step *= element_size;
  copy.destination_step *= element_size;
  return copy;
}

// A part whose bytes are its values (base/tensor_memory.h), not empty.
bool copyable(const StridedPart& part) { return part.length > 0 && holds_plain_cpu_values(part.t); }

// Whether the part `destination` describes has the shape of `source`'s.
bool same_shape(const StridedPart& source, const StridedPart& destination) {
  if (source.t.dim() != destination.t.dim()) return false;
  for (int64_t d = 0; d < source.t.dim(); ++d) {
    if (source.size(d) != destination.size(d)) return false;
  }
  return true;
}

char* part_data(const StridedPart& part) {
  return static_cast<char*>(part.t.data_ptr()) +
         part.offset * part.t.stride(part.dim) * static_cast<int64_t>(part.t.element_size());
}

}  // namespace

std::optional<RowCopy> row_copy_of(const StridedPart& source, const StridedPart& destination) {
  if (!copyable(source) || !copyable(destination) ||
      source.t.scalar_type() != destination.t.scalar_type() || !same_shape(source, destination)) {
    return std::nullopt;
  }
  return rows_of(source.t.sizes(), part_data(source), source.t.strides(), part_data(destination),
                 destination.t.strides(), static_cast<int64_t>(source.t.element_size()), source.dim,
                 source.length);
}

std::optional<RowCopy> row_copy_packing(const StridedPart& source, void* destination) {
  if (!copyable(source)) return std::nullopt;
  const c10::IntArrayRef sizes = source.t.sizes();
  c10::SmallVector<int64_t, 8> contiguous(sizes.size());
  int64_t stride = 1;
  for (auto d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    contiguous[d] = stride;
    stride *= source.size(d);
  }
  return rows_of(sizes, part_data(source), source.t.strides(), static_cast<char*>(destination),
                 contiguous, static_cast<int64_t>(source.t.element_size()), source.dim,
                 source.length);
}

void copy_rows_interleaved(const std::vector<RowCopy>& copies) {
  int64_t most_rows = 0, bytes_per_row = 0;
  for (const RowCopy& copy : copies) {
    most_rows = std::max(most_rows, copy.rows);
    bytes_per_row += copy.run_bytes;
  }
  if (most_rows == 0) return;
  // ATen's grain (elements per task) counted in bytes of float32.
  const int64_t grain = std::max<int64_t>(1, at::internal::GRAIN_SIZE * 4 / bytes_per_row);
  at::parallel_for(0, most_rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      for (const RowCopy& copy : copies) {
        if (i >= copy.rows) continue;
        std::memcpy(copy.destination + i * copy.destination_step,
                    copy.source + i * copy.source_step, static_cast<size_t>(copy.run_bytes));
      }
    }
  });
}

}  // namespace dtensor
