// Copyright 2026 The dtensor Authors.
#include "tests/support/collective_cases.h"

#include <numeric>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "tests/support/expect_error.h"

namespace dtensor::testing {
namespace {

// Small integers in [-3, 7] that differ by rank and position.
at::Tensor rank_values(int rank, at::IntArrayRef shape, int64_t salt = 0) {
  int64_t numel = 1;
  for (int64_t extent : shape) numel *= extent;
  return ((at::arange(numel, at::kLong) * 3 + rank * 7 + salt) % 11 - 3).reshape(shape);
}

// 1 or 2, so that a product over 8 ranks (at most 256) is exact in every dtype.
at::Tensor product_values(int rank, at::IntArrayRef shape) {
  return (rank_values(rank, shape) % 2).abs() + 1;
}

at::Tensor on(const Communicator& comm, const at::Tensor& values, c10::ScalarType dtype) {
  return values.to(at::TensorOptions().dtype(dtype).device(comm.device()));
}

void expect_same(const at::Tensor& actual, const at::Tensor& expected, c10::ScalarType dtype) {
  const at::Tensor got = actual.cpu();
  const at::Tensor want = expected.to(dtype);
  EXPECT_EQ(got.scalar_type(), dtype);
  EXPECT_EQ(got.sizes(), want.sizes());
  EXPECT_TRUE(got.sizes() == want.sizes() && at::equal(got, want)) << "got\n"
                                                                   << got << "\nexpected\n"
                                                                   << want;
}

std::vector<int64_t> rows_per_rank(int n, int64_t (*rows)(int)) {
  std::vector<int64_t> counts(n);
  for (int p = 0; p < n; ++p) counts[p] = rows(p);
  return counts;
}

int64_t total(const std::vector<int64_t>& counts) {
  return std::accumulate(counts.begin(), counts.end(), int64_t{0});
}

std::vector<int64_t> with_rows(int64_t rows, at::IntArrayRef trailing) {
  std::vector<int64_t> shape{rows};
  shape.insert(shape.end(), trailing.begin(), trailing.end());
  return shape;
}

// The single-process result of reducing every rank's `make(rank)` with `op`,
// as `dtype` reduces it: each term is first converted to `dtype` (so that -3
// is 253 for uint8 and max/min see that), integers accumulate in int64 and
// wrap on the final conversion like the backends' sums and products do.
template <typename Make>
at::Tensor reduce_all_ranks(int n, ReduceOp op, c10::ScalarType dtype, Make make) {
  const c10::ScalarType wide =
      c10::isIntegralType(dtype, /*includeBool=*/true) ? at::kLong : at::kDouble;
  auto term_of = [&](int rank) { return make(rank).to(dtype).to(wide); };
  at::Tensor acc = term_of(0);
  for (int p = 1; p < n; ++p) {
    const at::Tensor term = term_of(p);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc = acc + term;
        break;
      case ReduceOp::kMax:
        acc = at::maximum(acc, term);
        break;
      case ReduceOp::kMin:
        acc = at::minimum(acc, term);
        break;
      case ReduceOp::kProduct:
        acc = acc * term;
        break;
      default:
        ADD_FAILURE() << "reduce_all_ranks: bitwise ops are checked separately";
    }
  }
  return op == ReduceOp::kAvg ? acc / n : acc;
}

std::vector<ReduceOp> arithmetic_ops(c10::ScalarType dtype) {
  std::vector<ReduceOp> ops{ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kProduct};
  if (c10::isFloatingType(dtype)) ops.push_back(ReduceOp::kAvg);
  return ops;
}

}  // namespace

const std::vector<c10::ScalarType>& collective_test_dtypes() {
  static const std::vector<c10::ScalarType> dtypes{at::kFloat, at::kBFloat16, at::kHalf, at::kLong};
  return dtypes;
}

void check_all_reduce(Communicator& comm, c10::ScalarType dtype) {
  const int n = comm.size();
  const std::vector<std::vector<int64_t>> shapes{{5}, {0}, {}, {2, 3}, {37}};
  for (ReduceOp op : arithmetic_ops(dtype)) {
    for (const std::vector<int64_t>& shape : shapes) {
      SCOPED_TRACE(::testing::Message()
                   << "all_reduce " << reduce_op_name(op) << " shape " << c10::IntArrayRef(shape));
      // avg data is a multiple of n, so the mean is exact whatever the backend's
      // order of division.
      auto make = [&](int rank) {
        if (op == ReduceOp::kProduct) return product_values(rank, shape);
        return op == ReduceOp::kAvg ? rank_values(rank, shape) * n : rank_values(rank, shape);
      };
      at::Tensor tensor = on(comm, make(comm.rank()), dtype);
      comm.all_reduce(tensor, op);
      expect_same(tensor, reduce_all_ranks(n, op, dtype, make), dtype);
    }
  }
}

void check_all_reduce_out_of_place(Communicator& comm, c10::ScalarType dtype) {
  const int n = comm.size();
  const std::vector<std::vector<int64_t>> shapes{{5}, {0}, {}, {2, 3}, {37}};
  for (ReduceOp op : arithmetic_ops(dtype)) {
    for (const std::vector<int64_t>& shape : shapes) {
      SCOPED_TRACE(::testing::Message() << "all_reduce(input, output) " << reduce_op_name(op)
                                        << " shape " << c10::IntArrayRef(shape));
      auto make = [&](int rank) {
        if (op == ReduceOp::kProduct) return product_values(rank, shape);
        return op == ReduceOp::kAvg ? rank_values(rank, shape) * n : rank_values(rank, shape);
      };
      const at::Tensor expected = reduce_all_ranks(n, op, dtype, make);
      const at::Tensor input = on(comm, make(comm.rank()), dtype);
      at::Tensor output = on(comm, at::full(shape, 99, at::kLong), dtype);
      comm.all_reduce(input, output, op);
      expect_same(output, expected, dtype);
      expect_same(input, make(comm.rank()), dtype);
      // The output may be the input itself: the in-place call.
      at::Tensor both = on(comm, make(comm.rank()), dtype);
      comm.all_reduce(both, both, op);
      expect_same(both, expected, dtype);
    }
  }
}

void check_bitwise_all_reduce(Communicator& comm) {
  const int n = comm.size();
  for (c10::ScalarType dtype : {at::kLong, at::kInt}) {
    for (ReduceOp op : {ReduceOp::kBand, ReduceOp::kBor, ReduceOp::kBxor}) {
      SCOPED_TRACE(::testing::Message() << "all_reduce " << reduce_op_name(op) << " " << dtype);
      auto make = [](int rank) { return (at::arange(16, at::kLong) * 5 + rank * 3) % 16; };
      at::Tensor expected = make(0);
      for (int p = 1; p < n; ++p) {
        if (op == ReduceOp::kBand) expected = expected.bitwise_and(make(p));
        if (op == ReduceOp::kBor) expected = expected.bitwise_or(make(p));
        if (op == ReduceOp::kBxor) expected = expected.bitwise_xor(make(p));
      }
      at::Tensor tensor = on(comm, make(comm.rank()), dtype);
      comm.all_reduce(tensor, op);
      expect_same(tensor, expected, dtype);
    }
  }
}

void check_all_gather(Communicator& comm, c10::ScalarType dtype) {
  const int n = comm.size();
  const std::vector<std::vector<int64_t>> shapes{{2, 3}, {}, {0, 3}, {1}};
  for (const std::vector<int64_t>& shape : shapes) {
    SCOPED_TRACE(::testing::Message() << "all_gather shape " << c10::IntArrayRef(shape));
    std::vector<at::Tensor> parts;
    for (int p = 0; p < n; ++p) parts.push_back(rank_values(p, shape).reshape(with_rows(-1, {})));
    at::Tensor expected = at::cat(parts).reshape(
        shape.empty() ? std::vector<int64_t>{n}
                      : with_rows(n * shape[0], c10::IntArrayRef(shape).slice(1)));
    at::Tensor output = on(comm, at::full(expected.sizes(), 99, at::kLong), dtype);
    comm.all_gather(on(comm, rank_values(comm.rank(), shape), dtype), output);
    expect_same(output, expected, dtype);
    // In place: the input already sits in this rank's slot of the output.
    at::Tensor gathered = on(comm, at::full(expected.sizes(), 99, at::kLong), dtype);
    const int64_t rows = shape.empty() ? 1 : shape[0];
    at::Tensor own = gathered.narrow(0, comm.rank() * rows, rows);
    own.copy_(on(comm, rank_values(comm.rank(), shape), dtype).reshape(own.sizes()));
    comm.all_gather(shape.empty() ? own.select(0, 0) : own, gathered);
    expect_same(gathered, expected, dtype);
  }
}

void check_all_gather_v(Communicator& comm, c10::ScalarType dtype) {
  const int n = comm.size();
  for (auto rows : {+[](int p) -> int64_t { return p % 3; }, +[](int) -> int64_t { return 0; },
                    +[](int p) -> int64_t { return 2 * p + 1; }}) {
    const std::vector<int64_t> counts = rows_per_rank(n, rows);
    SCOPED_TRACE(::testing::Message() << "all_gather_v rows " << c10::IntArrayRef(counts));
    std::vector<at::Tensor> parts;
    for (int p = 0; p < n; ++p) parts.push_back(rank_values(p, {counts[p], 2}));
    at::Tensor output = on(comm, at::full({total(counts), 2}, 99, at::kLong), dtype);
    comm.all_gather_v(on(comm, parts[comm.rank()], dtype), output, counts);
    expect_same(output, at::cat(parts), dtype);
  }
}

void check_all_gather_v_along(Communicator& comm, c10::ScalarType dtype) {
  const int n = comm.size();
  // Small outputs, and strided ones of at least 512 KiB in every dtype on 3
  // or more ranks (MPI gathers those through a packed buffer, smaller ones
  // in place).
  const std::vector<std::pair<int64_t, std::vector<int64_t>>> cases = {
      {0, {2, 3, 4}}, {1, {2, 3, 4}}, {2, {2, 3, 4}}, {1, {64, 3, 4096}}, {2, {64, 4096, 3}}};
  for (const auto& [dim, base_shape] : cases) {
    // Uneven, with empty parts.
    const std::vector<int64_t> sizes = rows_per_rank(n, [](int p) -> int64_t { return p % 3; });
    SCOPED_TRACE(::testing::Message()
                 << "all_gather_v along dim " << dim << " of " << c10::IntArrayRef(base_shape)
                 << ", sizes " << c10::IntArrayRef(sizes));
    const auto shape_for = [&, dim = dim, &base_shape = base_shape](int64_t extent) {
      std::vector<int64_t> shape = base_shape;
      shape[dim] = extent;
      return shape;
    };
    std::vector<at::Tensor> parts;
    for (int p = 0; p < n; ++p) parts.push_back(rank_values(p, shape_for(sizes[p])));
    at::Tensor output = on(comm, at::full(shape_for(total(sizes)), 99, at::kLong), dtype);
    comm.all_gather_v(on(comm, parts[comm.rank()], dtype), output, sizes, dim);
    expect_same(output, at::cat(parts, dim), dtype);
  }
}

void check_reduce_scatter(Communicator& comm, c10::ScalarType dtype) {
  const int n = comm.size();
  for (ReduceOp op : arithmetic_ops(dtype)) {
    SCOPED_TRACE(::testing::Message() << "reduce_scatter " << reduce_op_name(op));
    auto make = [&](int rank) {
      if (op == ReduceOp::kProduct) return product_values(rank, {n * 2, 3});
      at::Tensor values = rank_values(rank, {n * 2, 3});
      return op == ReduceOp::kAvg ? values * n : values;
    };
    at::Tensor output = on(comm, at::full({2, 3}, 99, at::kLong), dtype);
    comm.reduce_scatter(on(comm, make(comm.rank()), dtype), output, op);
    expect_same(output, reduce_all_ranks(n, op, dtype, make).narrow(0, 2 * comm.rank(), 2), dtype);
  }
}

void check_reduce_scatter_v(Communicator& comm, c10::ScalarType dtype) {
  const int n = comm.size();
  const std::vector<int64_t> counts =
      rows_per_rank(n, [](int p) -> int64_t { return (p + 1) % 3; });
  SCOPED_TRACE(::testing::Message() << "reduce_scatter_v rows " << c10::IntArrayRef(counts));
  const int64_t offset = std::accumulate(counts.begin(), counts.begin() + comm.rank(), int64_t{0});
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    auto make = [&](int rank) { return rank_values(rank, {total(counts), 2}); };
    at::Tensor output = on(comm, at::full({counts[comm.rank()], 2}, 99, at::kLong), dtype);
    comm.reduce_scatter_v(on(comm, make(comm.rank()), dtype), output, counts, op);
    expect_same(output, reduce_all_ranks(n, op, dtype, make).narrow(0, offset, counts[comm.rank()]),
                dtype);
  }
}

void check_all_to_all(Communicator& comm, c10::ScalarType dtype) {
  const int n = comm.size();
  std::vector<at::Tensor> blocks;
  for (int p = 0; p < n; ++p)
    blocks.push_back(rank_values(p, {n * 2, 2}).narrow(0, 2 * comm.rank(), 2));
  at::Tensor output = on(comm, at::full({n * 2, 2}, 99, at::kLong), dtype);
  comm.all_to_all(on(comm, rank_values(comm.rank(), {n * 2, 2}), dtype), output);
  expect_same(output, at::cat(blocks), dtype);
}

void check_all_to_all_v(Communicator& comm, c10::ScalarType dtype) {
  const int n = comm.size();
  // Rank q sends (q + 2p) % 3 rows to rank p: uneven, with empty messages.
  auto send_counts = [n](int q) {
    std::vector<int64_t> counts(n);
    for (int p = 0; p < n; ++p) counts[p] = (q + 2 * p) % 3;
    return counts;
  };
  const int me = comm.rank();
  std::vector<int64_t> recv_counts(n);
  std::vector<at::Tensor> expected_parts;
  for (int p = 0; p < n; ++p) {
    const std::vector<int64_t> theirs = send_counts(p);
    recv_counts[p] = theirs[me];
    const int64_t offset = std::accumulate(theirs.begin(), theirs.begin() + me, int64_t{0});
    expected_parts.push_back(rank_values(p, {total(theirs), 2}).narrow(0, offset, theirs[me]));
  }
  at::Tensor output = on(comm, at::full({total(recv_counts), 2}, 99, at::kLong), dtype);
  const std::vector<int64_t> mine = send_counts(me);
  comm.all_to_all_v(on(comm, rank_values(me, {total(mine), 2}), dtype), mine, output, recv_counts);
  expect_same(output, at::cat(expected_parts), dtype);
}

namespace {

// The slices [offset, offset + size) along `dim` of rank p's input, where the
// offset is that of `counts_of(p)[me]` among the counts before it.
template <typename CountsOf>
at::Tensor part_for(int p, int me, int64_t dim, const at::Tensor& input, CountsOf counts_of) {
  const std::vector<int64_t> counts = counts_of(p);
  const int64_t offset = std::accumulate(counts.begin(), counts.begin() + me, int64_t{0});
  return input.narrow(dim, offset, counts[me]);
}

// Both ways cut dim 1 of [2, *, 3] tensors, with an irregular pattern of
// counts (not only the overlaps of two partitions), empty messages included.
void check_all_to_all_v_same_dim(Communicator& comm, c10::ScalarType dtype) {
  const int n = comm.size();
  const int me = comm.rank();
  auto send_counts = [n](int q) {
    std::vector<int64_t> counts(n);
    for (int p = 0; p < n; ++p) counts[p] = (q + 2 * p) % 3;
    return counts;
  };
  auto input_of = [&](int q) { return rank_values(q, {2, total(send_counts(q)), 3}); };
  std::vector<int64_t> recv_counts(n);
  std::vector<at::Tensor> expected_parts;
  for (int p = 0; p < n; ++p) {
    recv_counts[p] = send_counts(p)[me];
    expected_parts.push_back(part_for(p, me, 1, input_of(p), send_counts));
  }
  SCOPED_TRACE(::testing::Message()
               << "all_to_all_v along dim 1, recv " << c10::IntArrayRef(recv_counts));
  at::Tensor output = on(comm, at::full({2, total(recv_counts), 3}, 99, at::kLong), dtype);
  comm.all_to_all_v(on(comm, input_of(me), dtype), send_counts(me), 1, output, recv_counts, 1);
  expect_same(output, at::cat(expected_parts, 1), dtype);
}

// The large case's units: runs of 512 elements (1 KiB in 2-byte dtypes),
// and 2 MiB or more of every dtype, 16 MiB or more of 4-byte ones, on 3 or
// more ranks (the sizes from which MPI's direct copies pay).
struct AcrossDimsUnits {
  int64_t column_width, row_height;
};
constexpr AcrossDimsUnits kLargeAcrossDims = {512, 512};
constexpr int kLargeAcrossDimsUpTo = 4;  // ranks

// S(0) -> S(2) of [rows, 2, columns] and back: rank q holds rows(q) rows of
// every column and receives columns(q) columns of every row (uneven, some
// ranks with none), `column_width` columns and `row_height` rows per unit:
// wide ones make runs long enough for the backends' row-by-row copies
// (mesh/row_copy.h: the local backend's senders and the default path's
// packing), and with many rows, tensors large enough for MPI's direct reads
// (large_all_to_all_v_across_dims).
// Rank p's rows and columns there: (p + 1) % 3 and p % 3 units.
std::vector<int64_t> across_dims_rows(int n, int64_t row_height) {
  std::vector<int64_t> rows = rows_per_rank(n, [](int p) -> int64_t { return (p + 1) % 3; });
  for (int64_t& r : rows) r *= row_height;
  return rows;
}
std::vector<int64_t> across_dims_columns(int n, int64_t column_width) {
  std::vector<int64_t> columns = rows_per_rank(n, [](int p) -> int64_t { return p % 3; });
  for (int64_t& c : columns) c *= column_width;
  return columns;
}

void check_all_to_all_v_across_dims(Communicator& comm, c10::ScalarType dtype, int64_t column_width,
                                    int64_t row_height) {
  const int n = comm.size();
  const int me = comm.rank();
  const std::vector<int64_t> rows = across_dims_rows(n, row_height);
  const std::vector<int64_t> columns = across_dims_columns(n, column_width);
  SCOPED_TRACE(::testing::Message()
               << "all_to_all_v dim 2 -> dim 0, rows " << c10::IntArrayRef(rows) << ", columns "
               << c10::IntArrayRef(columns));
  const at::Tensor whole = rank_values(0, {total(rows), 2, total(columns)});
  const auto offset = [](const std::vector<int64_t>& counts, int p) {
    return std::accumulate(counts.begin(), counts.begin() + p, int64_t{0});
  };
  const at::Tensor my_rows = whole.narrow(0, offset(rows, me), rows[me]).contiguous();
  const at::Tensor my_columns = whole.narrow(2, offset(columns, me), columns[me]).contiguous();

  at::Tensor by_columns = on(comm, at::full(my_columns.sizes(), 99, at::kLong), dtype);
  comm.all_to_all_v(on(comm, my_rows, dtype), columns, 2, by_columns, rows, 0);
  expect_same(by_columns, my_columns, dtype);

  at::Tensor by_rows = on(comm, at::full(my_rows.sizes(), 99, at::kLong), dtype);
  comm.all_to_all_v(on(comm, my_columns, dtype), rows, 0, by_rows, columns, 2);
  expect_same(by_rows, my_rows, dtype);
}

}  // namespace

void check_all_to_all_v_along(Communicator& comm, c10::ScalarType dtype) {
  check_all_to_all_v_same_dim(comm, dtype);
  check_all_to_all_v_across_dims(comm, dtype, /*column_width=*/1, /*row_height=*/1);
  check_all_to_all_v_across_dims(comm, dtype, /*column_width=*/128, /*row_height=*/1);
  // The large case is there for MPI's direct copies, which run on 2 to 4
  // ranks; it grows with the group (2 GB over 8 local ranks).
  if (comm.size() <= kLargeAcrossDimsUpTo) {
    check_all_to_all_v_across_dims(comm, dtype, kLargeAcrossDims.column_width,
                                   kLargeAcrossDims.row_height);
  }
}

LargeAcrossDimsCase large_all_to_all_v_across_dims(int n, c10::ScalarType dtype) {
  if (n > kLargeAcrossDimsUpTo) return {};
  const int64_t rows = total(across_dims_rows(n, kLargeAcrossDims.row_height));
  const int64_t columns = total(across_dims_columns(n, kLargeAcrossDims.column_width));
  const auto element = static_cast<int64_t>(c10::elementSize(dtype));
  return {rows * 2 * columns * element, kLargeAcrossDims.column_width * element};
}

namespace {

// Rank q sends rank p the first (q + 2p) % 3 units of `width` columns of its
// [3, 4 * width] input: strided views, the same memory for several ranks,
// empty messages; rank p receives them into strided column ranges of its
// output, in rank order.
void check_exchange_of_strided_parts(Communicator& comm, c10::ScalarType dtype, int64_t width) {
  const int n = comm.size();
  const int me = comm.rank();
  const auto count = [width](int q, int p) -> int64_t { return (q + 2 * p) % 3 * width; };
  const auto input_of = [width](int q) { return rank_values(q, {3, 2 * width}).repeat({1, 2}); };
  const at::Tensor input = on(comm, input_of(me), dtype);
  std::vector<int64_t> from(n);
  std::vector<at::Tensor> expected_parts;
  for (int q = 0; q < n; ++q) {
    from[q] = count(q, me);
    expected_parts.push_back(input_of(q).narrow(1, 0, from[q]));
  }
  at::Tensor output = on(comm, at::full({3, total(from)}, 99, at::kLong), dtype);
  std::vector<at::Tensor> send, recv;
  int64_t offset = 0;
  for (int p = 0; p < n; ++p) {
    send.push_back(input.narrow(1, 0, count(me, p)));
    recv.push_back(output.narrow(1, offset, from[p]));
    offset += from[p];
  }
  comm.exchange(send, recv);
  expect_same(output, at::cat(expected_parts, 1), dtype);
}

// A ring: one contiguous part each way, which backends may send and receive
// in place.
void check_exchange_in_a_ring(Communicator& comm, c10::ScalarType dtype) {
  const int n = comm.size();
  const int me = comm.rank();
  const int next = (me + 1) % n;
  const int previous = (me + n - 1) % n;
  const auto options = at::TensorOptions().dtype(dtype).device(comm.device());
  std::vector<at::Tensor> send(n, at::empty({0}, options)), recv(n, at::empty({0}, options));
  send[next] = on(comm, rank_values(me, {5}), dtype);
  at::Tensor received = on(comm, at::full({5}, 99, at::kLong), dtype);
  recv[previous] = received;
  comm.exchange(send, recv);
  expect_same(received, rank_values(previous, {5}), dtype);
}

// Parts whose strides rise (transposed views) and 0-dim parts, sent on in
// a ring.
void check_exchange_of_transposed_and_scalar_parts(Communicator& comm, c10::ScalarType dtype) {
  const int n = comm.size();
  const int me = comm.rank();
  const int next = (me + 1) % n;
  const int previous = (me + n - 1) % n;
  const auto options = at::TensorOptions().dtype(dtype).device(comm.device());
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{2, 3}, std::vector<int64_t>{}}) {
    std::vector<at::Tensor> send(n, at::empty({0}, options)), recv(n, at::empty({0}, options));
    send[next] = on(comm, rank_values(me, shape), dtype).t();
    at::Tensor place = on(comm, at::full(shape, 99, at::kLong), dtype);
    recv[previous] = place.t();
    comm.exchange(send, recv);
    expect_same(place, rank_values(previous, shape), dtype);
  }
}

}  // namespace

void check_exchange(Communicator& comm, c10::ScalarType dtype) {
  check_exchange_of_strided_parts(comm, dtype, /*width=*/1);
  // Wide enough for the default path's row-by-row packing (mesh/row_copy.h).
  check_exchange_of_strided_parts(comm, dtype, /*width=*/128);
  check_exchange_in_a_ring(comm, dtype);
  check_exchange_of_transposed_and_scalar_parts(comm, dtype);
}

void check_broadcast(Communicator& comm, c10::ScalarType dtype) {
  for (int root : {0, comm.size() - 1}) {
    SCOPED_TRACE(::testing::Message() << "broadcast root " << root);
    at::Tensor tensor = on(comm, rank_values(comm.rank(), {4, 2}), dtype);
    comm.broadcast(tensor, root);
    expect_same(tensor, rank_values(root, {4, 2}), dtype);
  }
}

void check_scatter(Communicator& comm, c10::ScalarType dtype) {
  const int n = comm.size();
  const int root = n / 2;
  const at::Tensor all = rank_values(root, {n * 3, 2});
  at::Tensor input = comm.rank() == root ? on(comm, all, dtype) : at::Tensor();
  at::Tensor output = on(comm, at::full({3, 2}, 99, at::kLong), dtype);
  comm.scatter(input, output, root);
  expect_same(output, all.narrow(0, 3 * comm.rank(), 3), dtype);
}

void check_send_recv(Communicator& comm, c10::ScalarType dtype) {
  const int n = comm.size();
  if (n < 2) return;
  const int me = comm.rank();
  const int to = (me + 1) % n;
  const int from = (me + n - 1) % n;
  at::Tensor payload = on(comm, rank_values(me, {3, 2}), dtype);
  at::Tensor received = on(comm, at::full({3, 2}, 99, at::kLong), dtype);
  if (me % 2 == 0) {
    comm.send(payload, to);
    comm.recv(received, from);
  } else {
    comm.recv(received, from);
    comm.send(payload, to);
  }
  expect_same(received, rank_values(from, {3, 2}), dtype);
}

void check_split(Communicator& comm) {
  const int n = comm.size();
  const int me = comm.rank();
  // Two groups by parity, ordered by descending rank (key = -rank).
  std::shared_ptr<Communicator> sub = comm.split(me % 2, -me);
  ASSERT_NE(sub, nullptr);
  std::vector<int64_t> members;
  for (int p = n - 1; p >= 0; --p) {
    if (p % 2 == me % 2) members.push_back(p);
  }
  EXPECT_EQ(sub->size(), static_cast<int>(members.size()));
  EXPECT_EQ(sub->rank(), std::find(members.begin(), members.end(), me) - members.begin());
  at::Tensor mine = on(comm, at::full({1}, me, at::kLong), at::kLong);
  at::Tensor gathered = on(comm, at::zeros({sub->size()}, at::kLong), at::kLong);
  sub->all_gather(mine, gathered);
  expect_same(gathered, at::tensor(members, at::kLong), at::kLong);

  // A negative color joins no group.
  std::shared_ptr<Communicator> without_zero = comm.split(me == 0 ? -1 : 0, me);
  EXPECT_EQ(without_zero == nullptr, me == 0);
  if (without_zero) {
    EXPECT_EQ(without_zero->size(), n - 1);
    EXPECT_EQ(without_zero->rank(), me - 1);
  }
}

void check_bad_arguments_throw(Communicator& comm) {
  const int n = comm.size();
  auto options = at::TensorOptions().dtype(at::kFloat).device(comm.device());
  at::Tensor transposed = at::zeros({4, 3}, options).t();
  DTENSOR_EXPECT_ERROR(comm.all_reduce(transposed, ReduceOp::kSum), "expected a contiguous tensor");
  at::Tensor undefined;
  DTENSOR_EXPECT_ERROR(comm.all_reduce(undefined, ReduceOp::kSum), "expected a defined tensor");
  at::Tensor longs = at::zeros({4}, options.dtype(at::kLong));
  DTENSOR_EXPECT_ERROR(comm.all_reduce(longs, ReduceOp::kAvg),
                       "avg expects a floating or complex dtype, found Long");
  at::Tensor floats = at::zeros({4}, options);
  DTENSOR_EXPECT_ERROR(comm.all_reduce(floats, ReduceOp::kBand),
                       "expects an integer or bool dtype");

  at::Tensor input = at::zeros({2, 3}, options);
  at::Tensor wrong_rows = at::zeros({2 * n + 1, 3}, options);
  DTENSOR_EXPECT_ERROR(comm.all_gather(input, wrong_rows), "output: expected shape");
  at::Tensor wrong_dtype = at::zeros({2 * n, 3}, options.dtype(at::kLong));
  DTENSOR_EXPECT_ERROR(comm.all_gather(input, wrong_dtype), "output dtype");

  at::Tensor gathered = at::zeros({2 * n, 3}, options);
  const std::vector<int64_t> too_many(n + 1, 2);
  DTENSOR_EXPECT_ERROR(comm.all_gather_v(input, gathered, too_many), "expected one count per rank");
  std::vector<int64_t> negative(n, 2);
  negative[n - 1] = -1;
  DTENSOR_EXPECT_ERROR(comm.all_gather_v(input, gathered, negative), "non-negative row count");

  if (n > 1) {
    at::Tensor odd_rows = at::zeros({n + 1, 1}, options);
    at::Tensor odd_out = at::zeros({n + 1, 1}, options);
    DTENSOR_EXPECT_ERROR(comm.all_to_all(odd_rows, odd_out), "multiple of the group size");
  }
  DTENSOR_EXPECT_ERROR(comm.broadcast(input, n), "expected a rank in [0, ");

  // Out-of-place reductions.
  at::Tensor wrong_shape = at::zeros({3, 2}, options);
  DTENSOR_EXPECT_ERROR(comm.all_reduce(input, wrong_shape, ReduceOp::kSum),
                       "output: expected shape");
  at::Tensor longs_out = at::zeros({2, 3}, options.dtype(at::kLong));
  DTENSOR_EXPECT_ERROR(comm.all_reduce(input, longs_out, ReduceOp::kSum), "output dtype");
  at::Tensor wide = at::zeros({7}, options);
  at::Tensor shifted = wide.narrow(0, 1, 6);
  DTENSOR_EXPECT_ERROR(comm.all_reduce(wide.narrow(0, 0, 6), shifted, ReduceOp::kSum),
                       "found an overlap");
  at::Tensor scattered = at::zeros({2 * n, 3}, options);
  at::Tensor scatter_out = scattered.narrow(0, 0, 2);
  DTENSOR_EXPECT_ERROR(comm.reduce_scatter(scattered, scatter_out, ReduceOp::kSum),
                       "memory apart from the input");

  // The forms along a dim.
  const std::vector<int64_t> twos(n, 2);
  at::Tensor along = at::zeros({3, 2 * n}, options);
  at::Tensor piece = at::zeros({3, 2}, options);
  DTENSOR_EXPECT_ERROR(comm.all_gather_v(piece, along, twos, 2), "dim: expected a dim in [0, 2)");
  DTENSOR_EXPECT_ERROR(comm.all_gather_v(piece, along, twos, 0), "output: expected shape");
  at::Tensor wrong_piece = at::zeros({4, 2}, options);
  DTENSOR_EXPECT_ERROR(comm.all_gather_v(wrong_piece, along, twos, 1), "input: expected shape");
  at::Tensor strided = at::zeros({2 * n, 3}, options).t();
  DTENSOR_EXPECT_ERROR(comm.all_gather_v(piece, strided, twos, 1), "expected a contiguous tensor");
  at::Tensor three_dims = at::zeros({3, 2, 1}, options);
  DTENSOR_EXPECT_ERROR(comm.all_gather_v(three_dims, along, twos, 1), "expected 2 dims, found 3");
  DTENSOR_EXPECT_ERROR(comm.all_to_all_v(along, twos, -1, along, twos, 1), "send_dim: expected");
  DTENSOR_EXPECT_ERROR(comm.all_to_all_v(along, twos, 1, along, twos, 2), "recv_dim: expected");
  at::Tensor taller = at::zeros({4, 2 * n}, options);
  DTENSOR_EXPECT_ERROR(comm.all_to_all_v(along, twos, 1, taller, twos, 1),
                       "output: expected shape");
  DTENSOR_EXPECT_ERROR(comm.all_to_all_v(along, too_many, 1, along, twos, 1),
                       "send_sizes: expected one count per rank");
  DTENSOR_EXPECT_ERROR(comm.send(input, comm.rank()), "expected a rank other than this one");
  const std::vector<at::Tensor> parts(n, piece);
  DTENSOR_EXPECT_ERROR(comm.exchange(std::vector<at::Tensor>(n + 1, piece), parts),
                       "send_parts: expected one tensor per rank");
  std::vector<at::Tensor> with_undefined = parts;
  with_undefined[n - 1] = at::Tensor();
  DTENSOR_EXPECT_ERROR(comm.exchange(parts, with_undefined),
                       "recv_parts[" + std::to_string(n - 1) + "]: expected a defined tensor");
  std::vector<at::Tensor> with_longs = parts;
  with_longs[0] = at::zeros({3, 2}, options.dtype(at::kLong));
  DTENSOR_EXPECT_ERROR(comm.exchange(parts, with_longs), "recv_parts[0]: expected dtype Float");
  // Lazy conjugates and negations would travel as the bytes in memory.
  at::Tensor conjugate = at::zeros({2}, options.dtype(at::kComplexFloat)).conj();
  DTENSOR_EXPECT_ERROR(comm.all_reduce(conjugate, ReduceOp::kSum),
                       "tensor: expected a tensor whose memory holds its values, found a lazy "
                       "conjugate (call resolve_conj()/resolve_neg())");
  at::Tensor negation = at::_neg_view(piece);
  DTENSOR_EXPECT_ERROR(comm.exchange(std::vector<at::Tensor>(n, negation), parts),
                       "send_parts: expected a tensor whose memory holds its values, found a "
                       "lazy negation");
  // Inputs overlapping outputs (a gather may start from its own slot).
  at::Tensor block_rows = at::zeros({2 * n, 3}, options);
  DTENSOR_EXPECT_ERROR(comm.all_to_all(block_rows, block_rows),
                       "all_to_all: output: expected memory apart from the input");
  const at::Tensor wrong_slot = gathered.narrow(0, 2 * ((comm.rank() + 1) % n), 2);
  if (n > 1) {
    DTENSOR_EXPECT_ERROR(comm.all_gather(wrong_slot, gathered),
                         "all_gather: input: expected memory apart from the output or this "
                         "rank's own slot of it");
  }
  DTENSOR_EXPECT_ERROR(comm.all_to_all_v(along, twos, 1, along, twos, 1),
                       "all_to_all_v: output: expected memory apart from the input");
  if (comm.device().is_cuda()) {
    at::Tensor on_cpu = at::zeros({4});
    DTENSOR_EXPECT_ERROR(comm.all_reduce(on_cpu, ReduceOp::kSum), "expects tensors on");
  }

  // Nothing was sent, so the communicator still works.
  at::Tensor ones = at::ones({3}, options);
  comm.all_reduce(ones, ReduceOp::kSum);
  expect_same(ones, at::full({3}, n, at::kLong), at::kFloat);
}

void check_complex_reductions(Communicator& comm) {
  const int n = comm.size();
  const at::TensorOptions options = at::TensorOptions().device(comm.device());
  // Rank r holds (r + 1) + (2 r) i in every element of rows [n * 2, 3].
  auto make = [&](int rank) {
    return at::complex(at::full({n * 2, 3}, rank + 1.0), at::full({n * 2, 3}, 2.0 * rank))
        .to(at::kComplexFloat);
  };
  at::Tensor sum = make(0);
  for (int r = 1; r < n; ++r) sum = sum + make(r);
  at::Tensor tensor = make(comm.rank()).to(options.device());
  comm.all_reduce(tensor, ReduceOp::kSum);
  EXPECT_TRUE(at::equal(tensor.cpu(), sum));
  at::Tensor averaged = make(comm.rank()).mul(n).to(options.device());
  comm.all_reduce(averaged, ReduceOp::kAvg);
  EXPECT_TRUE(at::equal(averaged.cpu(), sum));
  at::Tensor part = at::zeros({2, 3}, options.dtype(at::kComplexFloat));
  comm.reduce_scatter(make(comm.rank()).to(options.device()), part, ReduceOp::kSum);
  EXPECT_TRUE(at::equal(part.cpu(), sum.narrow(0, 2 * comm.rank(), 2)));
  std::vector<int64_t> rows(n, 1);
  rows[0] = n + 1;  // uneven: rank 0 takes n + 1 rows, the others one
  at::Tensor uneven = at::zeros({rows[comm.rank()], 3}, options.dtype(at::kComplexFloat));
  comm.reduce_scatter_v(make(comm.rank()).to(options.device()), uneven, rows, ReduceOp::kSum);
  const int64_t offset = comm.rank() == 0 ? 0 : n + comm.rank();
  EXPECT_TRUE(at::equal(uneven.cpu(), sum.narrow(0, offset, rows[comm.rank()])));
  at::Tensor unordered = make(comm.rank()).to(options.device());
  DTENSOR_EXPECT_ERROR(comm.all_reduce(unordered, ReduceOp::kMax),
                       "reduce op max on a complex dtype: expected sum or avg, found ComplexFloat");
}

void run_all_collective_cases(Communicator& comm) {
  for (c10::ScalarType dtype : collective_test_dtypes()) {
    SCOPED_TRACE(::testing::Message() << "dtype " << dtype << ", rank " << comm.rank() << " of "
                                      << comm.size() << " (" << comm.backend_name() << ")");
    check_all_reduce(comm, dtype);
    check_all_reduce_out_of_place(comm, dtype);
    check_all_gather(comm, dtype);
    check_all_gather_v(comm, dtype);
    check_all_gather_v_along(comm, dtype);
    check_reduce_scatter(comm, dtype);
    check_reduce_scatter_v(comm, dtype);
    check_all_to_all(comm, dtype);
    check_all_to_all_v(comm, dtype);
    check_all_to_all_v_along(comm, dtype);
    check_exchange(comm, dtype);
    check_broadcast(comm, dtype);
    check_scatter(comm, dtype);
    check_send_recv(comm, dtype);
  }
  check_bitwise_all_reduce(comm);
  check_complex_reductions(comm);
  check_split(comm);
  check_bad_arguments_throw(comm);
  comm.barrier();
}

}  // namespace dtensor::testing
