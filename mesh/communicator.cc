// Copyright 2026 The dtensor Authors.
#include <dtensor/mesh/communicator.h>

#include <mutex>
#include <numeric>
#include <optional>

#include <ATen/ATen.h>

#include <dtensor/base/buffer_pool.h>
#include <dtensor/base/check.h>
#include <dtensor/mesh/row_copy.h>
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_join.h"

namespace dtensor {
namespace {

// Rows along dim 0, with a 0-dim tensor counting as one row.
int64_t rows_of(const at::Tensor& t) { return t.dim() == 0 ? 1 : t.size(0); }

// A complex tensor as its real and imaginary parts ([..., 2] of the real
// dtype): sums and averages reduce them apart, and every backend has real
// types. Other tensors as they are.
at::Tensor as_real(const at::Tensor& t) { return t.is_complex() ? at::view_as_real(t) : t; }

// Elements in one row: the product of the sizes after dim 0.
int64_t row_numel(const at::Tensor& t) {
  int64_t numel = 1;
  for (int64_t d = 1; d < t.dim(); ++d) numel *= t.size(d);
  return numel;
}

bool same_memory(const at::Tensor& a, const at::Tensor& b) {
  return a.data_ptr() == b.data_ptr() && a.nbytes() == b.nbytes();
}

bool are_apart(const at::Tensor& a, const at::Tensor& b) {
  const auto* a_begin = static_cast<const char*>(a.data_ptr());
  const auto* b_begin = static_cast<const char*>(b.data_ptr());
  return a.nbytes() == 0 || b.nbytes() == 0 || a_begin + a.nbytes() <= b_begin ||
         b_begin + b.nbytes() <= a_begin;
}

class ArgumentChecker {
 public:
  ArgumentChecker(const Communicator& comm, const char* call) : comm_(comm), call_(call) {}

  void tensor(const at::Tensor& t, const char* name) const {
    DTENSOR_CHECK(t.defined(), call_, ": ", name, ": expected a defined tensor, found undefined");
    DTENSOR_CHECK(t.is_contiguous(), call_, ": ", name,
                  ": expected a contiguous tensor, found strides ", t.strides(), " for sizes ",
                  t.sizes());
    device(t, name);
    stored_as_read(t, name);
  }

  // Backends move raw bytes: a lazily conjugated or negated view would
  // travel without its conjugation or negation.
  void stored_as_read(const at::Tensor& t, const char* name) const {
    DTENSOR_CHECK(!t.is_conj() && !t.is_neg(), call_, ": ", name,
                  ": expected a tensor whose memory holds its values, found a lazy ",
                  t.is_conj() ? "conjugate" : "negation", " (call resolve_conj()/resolve_neg())");
  }

  void device(const at::Tensor& t, const char* name) const {
    const c10::Device want = comm_.device();
    const bool same_device = want.is_cpu() ? t.device().is_cpu()
                                           : (t.device().type() == want.type() &&
                                              (!want.has_index() || t.device() == want));
    DTENSOR_CHECK(same_device, call_, ": ", name, ": the ", comm_.backend_name(),
                  " backend expects tensors on ", want, ", found ", t.device());
  }

  void same_dtype(const at::Tensor& input, const at::Tensor& output) const {
    DTENSOR_CHECK(input.scalar_type() == output.scalar_type(), call_,
                  ": output dtype: expected the input's ", input.scalar_type(), ", found ",
                  output.scalar_type());
  }

  // The checks every collective with an input and an output makes.
  void input_and_output(const at::Tensor& input, const at::Tensor& output) const {
    tensor(input, "input");
    tensor(output, "output");
    same_dtype(input, output);
  }

  // Checks that `t` has `rows` rows whose shape is that of `like`'s rows.
  void shape(const at::Tensor& t, const char* name, int64_t rows, const at::Tensor& like) const {
    std::vector<int64_t> want(like.sizes().begin(), like.sizes().end());
    if (want.empty()) want.push_back(1);
    want[0] = rows;
    DTENSOR_CHECK(t.sizes() == c10::IntArrayRef(want), call_, ": ", name, ": expected shape ",
                  c10::IntArrayRef(want), ", found ", t.sizes());
  }

  void counts(absl::Span<const int64_t> counts, const char* name) const {
    DTENSOR_CHECK(static_cast<int64_t>(counts.size()) == comm_.size(), call_, ": ", name,
                  ": expected one count per rank (", comm_.size(), "), found ", counts.size());
    for (size_t r = 0; r < counts.size(); ++r) {
      DTENSOR_CHECK(counts[r] >= 0, call_, ": ", name, "[", r,
                    "]: expected a non-negative row count, found ", counts[r]);
    }
  }

  // One defined tensor per rank, each on the backend's device (any strides).
  void parts(absl::Span<const at::Tensor> parts, const char* name) const {
    DTENSOR_CHECK(static_cast<int64_t>(parts.size()) == comm_.size(), call_, ": ", name,
                  ": expected one tensor per rank (", comm_.size(), "), found ", parts.size());
    for (size_t r = 0; r < parts.size(); ++r) {
      DTENSOR_CHECK(parts[r].defined(), call_, ": ", name, "[", r,
                    "]: expected a defined tensor, found undefined");
      device(parts[r], name);
      stored_as_read(parts[r], name);
    }
  }

  void part_dtypes(absl::Span<const at::Tensor> parts, const char* name,
                   const at::Tensor& first_sent) const {
    for (size_t r = 0; r < parts.size(); ++r) {
      DTENSOR_CHECK(parts[r].scalar_type() == first_sent.scalar_type(), call_, ": ", name, "[", r,
                    "]: expected dtype ", first_sent.scalar_type(),
                    " (that of send_parts[0]), found ", parts[r].scalar_type());
    }
  }

  void peer(int peer, const char* name) const {
    DTENSOR_CHECK(peer >= 0 && peer < comm_.size(), call_, ": ", name, ": expected a rank in [0, ",
                  comm_.size(), "), found ", peer);
  }

  void reduce_op(ReduceOp op, const at::Tensor& t) const {
    check_reduce_op_supports(op, t.scalar_type(), call_);
  }

  // `output` is `input` itself (when `may_be_input`) or apart from it.
  void apart(const at::Tensor& input, const at::Tensor& output, bool may_be_input) const {
    DTENSOR_CHECK(are_apart(input, output) || (may_be_input && same_memory(input, output)), call_,
                  ": output: expected ", may_be_input ? "the input itself or " : "",
                  "memory apart from the input, found an overlap");
  }

  // `input` is apart from `output` or is exactly `own_slot`, this rank's
  // place in it (a gather in place).
  void apart_or_at(const at::Tensor& input, const at::Tensor& output,
                   const at::Tensor& own_slot) const {
    DTENSOR_CHECK(
        are_apart(input, output) || (own_slot.is_contiguous() && same_memory(input, own_slot)),
        call_, ": input: expected memory apart from the output or this rank's own slot of it, ",
        "found an overlap");
  }

  void dim(int64_t dim, const at::Tensor& t, const char* name) const {
    DTENSOR_CHECK(dim >= 0 && dim < t.dim(), call_, ": ", name, ": expected a dim in [0, ", t.dim(),
                  "), found ", dim);
  }

  // Checks that `t` has `extent` at `dim` and otherwise the sizes of `like`,
  // except at `free_dim` (pass `dim` to compare all others).
  void shape_along(const at::Tensor& t, const char* name, int64_t dim, int64_t extent,
                   const at::Tensor& like, int64_t free_dim) const {
    DTENSOR_CHECK(t.dim() == like.dim(), call_, ": ", name, ": expected ", like.dim(),
                  " dims, found ", t.dim());
    std::vector<int64_t> want(like.sizes().begin(), like.sizes().end());
    want[dim] = extent;
    want[free_dim] = free_dim == dim ? extent : t.size(free_dim);
    DTENSOR_CHECK(t.sizes() == c10::IntArrayRef(want), call_, ": ", name, ": expected shape ",
                  c10::IntArrayRef(want), ", found ", t.sizes());
  }

 private:
  const Communicator& comm_;
  const char* call_;
};

int64_t sum_of(absl::Span<const int64_t> values) {
  return std::accumulate(values.begin(), values.end(), int64_t{0});
}

std::vector<int64_t> rows_to_numel(absl::Span<const int64_t> rows, int64_t numel_per_row) {
  std::vector<int64_t> numel(rows.begin(), rows.end());
  for (int64_t& n : numel) n *= numel_per_row;
  return numel;
}

// This rank's slices of gathered `output`: `sizes[r]` slices along `dim` per rank r.
at::Tensor own_slot(const at::Tensor& output, int64_t dim, absl::Span<const int64_t> sizes,
                    int rank) {
  return output.narrow(dim, sum_of(sizes.first(rank)), sizes[rank]);
}

// Elements in one slice of `t` along `dim`.
int64_t slice_numel(const at::Tensor& t, int64_t dim) {
  int64_t numel = 1;
  for (int64_t d = 0; d < t.dim(); ++d) numel *= d == dim ? 1 : t.size(d);
  return numel;
}

// The views of flat `packed` that hold `parts` one after the other, each
// shaped like its part.
std::vector<at::Tensor> packed_views(const at::Tensor& packed,
                                     const std::vector<at::Tensor>& parts) {
  std::vector<at::Tensor> views;
  views.reserve(parts.size());
  int64_t offset = 0;
  for (const at::Tensor& part : parts) {
    views.push_back(packed.narrow(0, offset, part.numel()).view(part.sizes()));
    offset += part.numel();
  }
  return views;
}

// Writes the parts into `packed`, each flattened, one after the other:
// those whose rows lie apart (column blocks of one tensor, say) row by row
// across all of them, in one pass over the rows they come from
// (mesh/row_copy.h); `copy(p, place)` copies the others into `place`, a
// view of `packed`.
void pack(const std::vector<StridedPart>& parts, at::Tensor& packed,
          absl::FunctionRef<void(size_t, const at::Tensor&)> copy) {
  std::vector<RowCopy> by_rows;
  auto* base = static_cast<char*>(packed.data_ptr());
  const auto element_size = static_cast<int64_t>(packed.element_size());
  int64_t offset = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    const StridedPart& part = parts[p];
    const int64_t numel = part.numel();
    if (std::optional<RowCopy> rows = row_copy_packing(part, base + offset * element_size)) {
      by_rows.push_back(*rows);
    } else if (numel > 0) {
      copy(p, packed.narrow(0, offset, numel));
    }
    offset += numel;
  }
  copy_rows_interleaved(by_rows);
}

// Writes `parts` into `packed`, each flattened, one after the other.
void pack_parts(const std::vector<at::Tensor>& parts, at::Tensor& packed) {
  std::vector<at::Tensor> shaped;  // 0-dim parts as one element along dim 0
  shaped.reserve(parts.size());
  for (const at::Tensor& part : parts) shaped.push_back(part.dim() == 0 ? part.view({1}) : part);
  std::vector<StridedPart> strided;
  strided.reserve(parts.size());
  for (const at::Tensor& part : shaped) strided.push_back(StridedPart{part, 0, 0, part.size(0)});
  pack(strided, packed,
       [&](size_t p, const at::Tensor& place) { place.view(shaped[p].sizes()).copy_(shaped[p]); });
}

// Writes the consecutive slices of `t` along `dim`, `sizes[p]` slices in
// part p, into `packed`, as pack_parts would write them as views.
void pack_slices(const at::Tensor& t, int64_t dim, const std::vector<int64_t>& sizes,
                 at::Tensor& packed) {
  std::vector<StridedPart> strided;
  strided.reserve(sizes.size());
  int64_t offset = 0;
  for (int64_t size : sizes) {
    strided.push_back(StridedPart{t, dim, offset, size});
    offset += size;
  }
  pack(strided, packed, [&](size_t p, const at::Tensor& place) {
    const at::Tensor slice = t.narrow(dim, strided[p].offset, strided[p].length);
    place.view(slice.sizes()).copy_(slice);
  });
}

// The inverse of pack_parts for `slices`, the consecutive slices of `t`
// along `dim`: one cat (one pass over the rows of every part, faster than a
// strided copy per part).
void unpack_slices(const at::Tensor& packed, const std::vector<at::Tensor>& slices, at::Tensor& t,
                   int64_t dim) {
  at::cat_out(t, packed_views(packed, slices), dim);
}

}  // namespace

void Communicator::all_reduce(at::Tensor& tensor, ReduceOp op) {
  ArgumentChecker check(*this, "all_reduce");
  check.tensor(tensor, "tensor");
  check.reduce_op(op, tensor);
  at::Tensor real = as_real(tensor);
  do_all_reduce(real, real, op);
}

void Communicator::all_reduce(const at::Tensor& input, at::Tensor& output, ReduceOp op) {
  ArgumentChecker check(*this, "all_reduce");
  check.input_and_output(input, output);
  check.reduce_op(op, input);
  DTENSOR_CHECK(input.sizes() == output.sizes(), "all_reduce: output: expected shape ",
                input.sizes(), ", found ", output.sizes());
  check.apart(input, output, /*may_be_input=*/true);
  at::Tensor real_output = as_real(output);
  do_all_reduce(as_real(input), real_output, op);
}

void Communicator::all_gather(const at::Tensor& input, at::Tensor& output) {
  ArgumentChecker check(*this, "all_gather");
  check.input_and_output(input, output);
  check.shape(output, "output", size() * rows_of(input), input);
  check.apart_or_at(input, output, output.narrow(0, rank() * rows_of(input), rows_of(input)));
  do_all_gather(input, output);
}

void Communicator::all_gather_v(const at::Tensor& input, at::Tensor& output,
                                absl::Span<const int64_t> rows_per_rank) {
  ArgumentChecker check(*this, "all_gather_v");
  check.input_and_output(input, output);
  check.counts(rows_per_rank, "rows_per_rank");
  check.shape(input, "input", rows_per_rank[rank()], input);
  check.shape(output, "output", sum_of(rows_per_rank), input);
  check.apart_or_at(input, output, own_slot(output, 0, rows_per_rank, rank()));
  do_all_gather_v(input, output, rows_to_numel(rows_per_rank, row_numel(input)));
}

void Communicator::all_gather_v(const at::Tensor& input, at::Tensor& output,
                                absl::Span<const int64_t> sizes_per_rank, int64_t dim) {
  ArgumentChecker check(*this, "all_gather_v");
  check.input_and_output(input, output);
  check.counts(sizes_per_rank, "sizes_per_rank");
  check.dim(dim, output, "dim");
  check.shape_along(output, "output", dim, sum_of(sizes_per_rank), output, dim);
  check.shape_along(input, "input", dim, sizes_per_rank[rank()], output, dim);
  check.apart_or_at(input, output, own_slot(output, dim, sizes_per_rank, rank()));
  do_all_gather_v_along(input, output, {sizes_per_rank.begin(), sizes_per_rank.end()}, dim);
}

void Communicator::reduce_scatter(const at::Tensor& input, at::Tensor& output, ReduceOp op) {
  ArgumentChecker check(*this, "reduce_scatter");
  check.input_and_output(input, output);
  check.reduce_op(op, input);
  check.shape(input, "input", size() * rows_of(output), output);
  check.apart(input, output, /*may_be_input=*/false);
  at::Tensor real_output = as_real(output);
  do_reduce_scatter(as_real(input), real_output, op);
}

void Communicator::reduce_scatter_v(const at::Tensor& input, at::Tensor& output,
                                    absl::Span<const int64_t> rows_per_rank, ReduceOp op) {
  ArgumentChecker check(*this, "reduce_scatter_v");
  check.input_and_output(input, output);
  check.reduce_op(op, input);
  check.counts(rows_per_rank, "rows_per_rank");
  check.shape(input, "input", sum_of(rows_per_rank), input);
  check.shape(output, "output", rows_per_rank[rank()], input);
  check.apart(input, output, /*may_be_input=*/false);
  const at::Tensor real_input = as_real(input);
  at::Tensor real_output = as_real(output);
  do_reduce_scatter_v(real_input, real_output, rows_to_numel(rows_per_rank, row_numel(real_input)),
                      op);
}

void Communicator::all_to_all(const at::Tensor& input, at::Tensor& output) {
  ArgumentChecker check(*this, "all_to_all");
  check.input_and_output(input, output);
  DTENSOR_CHECK(rows_of(input) % size() == 0,
                "all_to_all: input rows: expected a multiple of the group size ", size(),
                ", found ", rows_of(input));
  check.shape(output, "output", rows_of(input), input);
  check.apart(input, output, /*may_be_input=*/false);
  do_all_to_all(input, output);
}

void Communicator::all_to_all_v(const at::Tensor& input, absl::Span<const int64_t> send_rows,
                                at::Tensor& output, absl::Span<const int64_t> recv_rows) {
  ArgumentChecker check(*this, "all_to_all_v");
  check.input_and_output(input, output);
  check.counts(send_rows, "send_rows");
  check.counts(recv_rows, "recv_rows");
  check.shape(input, "input", sum_of(send_rows), input);
  check.shape(output, "output", sum_of(recv_rows), input);
  check.apart(input, output, /*may_be_input=*/false);
  const int64_t per_row = row_numel(input);
  do_all_to_all_v(input, rows_to_numel(send_rows, per_row), output,
                  rows_to_numel(recv_rows, per_row));
}

void Communicator::all_to_all_v(const at::Tensor& input, absl::Span<const int64_t> send_sizes,
                                int64_t send_dim, at::Tensor& output,
                                absl::Span<const int64_t> recv_sizes, int64_t recv_dim) {
  ArgumentChecker check(*this, "all_to_all_v");
  check.input_and_output(input, output);
  check.counts(send_sizes, "send_sizes");
  check.counts(recv_sizes, "recv_sizes");
  check.dim(send_dim, input, "send_dim");
  check.dim(recv_dim, output, "recv_dim");
  check.shape_along(input, "input", send_dim, sum_of(send_sizes), input, send_dim);
  // Only the cut dims may differ between input and output.
  check.shape_along(output, "output", recv_dim, sum_of(recv_sizes), input, send_dim);
  check.apart(input, output, /*may_be_input=*/false);
  do_all_to_all_v_along(input, {send_sizes.begin(), send_sizes.end()}, send_dim, output,
                        {recv_sizes.begin(), recv_sizes.end()}, recv_dim);
}

void Communicator::exchange(absl::Span<const at::Tensor> send_parts,
                            absl::Span<const at::Tensor> recv_parts) {
  ArgumentChecker check(*this, "exchange");
  check.parts(send_parts, "send_parts");
  check.parts(recv_parts, "recv_parts");
  check.part_dtypes(send_parts, "send_parts", send_parts[0]);
  check.part_dtypes(recv_parts, "recv_parts", send_parts[0]);
  do_exchange({send_parts.begin(), send_parts.end()}, {recv_parts.begin(), recv_parts.end()});
}

bool Communicator::slices_are_consecutive(const at::Tensor& t, int64_t dim) {
  for (int64_t d = 0; d < dim; ++d) {
    if (t.size(d) != 1) return false;
  }
  return true;
}

std::vector<at::Tensor> Communicator::slices_along(const at::Tensor& t, int64_t dim,
                                                   const std::vector<int64_t>& sizes) {
  std::vector<at::Tensor> slices;
  slices.reserve(sizes.size());
  int64_t offset = 0;
  for (int64_t size : sizes) {
    slices.push_back(t.narrow(dim, offset, size));
    offset += size;
  }
  return slices;
}

std::vector<int64_t> Communicator::shape_with(at::IntArrayRef sizes, int64_t dim, int64_t extent) {
  std::vector<int64_t> shape(sizes.begin(), sizes.end());
  shape[dim] = extent;
  return shape;
}

void Communicator::broadcast(at::Tensor& tensor, int root) {
  ArgumentChecker check(*this, "broadcast");
  check.tensor(tensor, "tensor");
  check.peer(root, "root");
  do_broadcast(tensor, root);
}

void Communicator::scatter(const at::Tensor& input, at::Tensor& output, int root) {
  ArgumentChecker check(*this, "scatter");
  check.peer(root, "root");
  // Only the root can check its input, and ranks whose arguments are fine
  // would wait in the scatter for one that stopped: all learn of any refusal.
  std::string refusal;
  try {
    check.tensor(output, "output");
    if (rank() == root) {
      check.tensor(input, "input");
      check.same_dtype(input, output);
      check.shape(input, "input", size() * rows_of(output), output);
    }
  } catch (const Error& e) {
    refusal = e.what();
  }
  at::Tensor refused =
      at::full({1}, refusal.empty() ? 0 : 1, at::TensorOptions().dtype(at::kInt).device(device()));
  do_all_reduce(refused, refused, ReduceOp::kMax);
  if (!refusal.empty()) throw Error(refusal);
  DTENSOR_CHECK(refused.item<int>() == 0, "scatter: expected valid arguments on every rank, ",
                "found a rank that refused its own (its error says why)");
  do_scatter(input, output, root);
}

void Communicator::send(const at::Tensor& tensor, int peer, int tag) {
  ArgumentChecker check(*this, "send");
  check.tensor(tensor, "tensor");
  check.peer(peer, "peer");
  DTENSOR_CHECK(peer != rank(), "send: peer: expected a rank other than this one (", rank(), ")");
  DTENSOR_CHECK(tag >= 0, "send: tag: expected a non-negative tag, found ", tag);
  do_send(tensor, peer, tag);
}

void Communicator::recv(at::Tensor& tensor, int peer, int tag) {
  ArgumentChecker check(*this, "recv");
  check.tensor(tensor, "tensor");
  check.peer(peer, "peer");
  DTENSOR_CHECK(peer != rank(), "recv: peer: expected a rank other than this one (", rank(), ")");
  DTENSOR_CHECK(tag >= 0, "recv: tag: expected a non-negative tag, found ", tag);
  do_recv(tensor, peer, tag);
}

void Communicator::barrier() { do_barrier(); }

std::shared_ptr<Communicator> Communicator::split(int color, int key) {
  return do_split(color, key);
}

// The staging buffers below come from the buffer pool (base/buffer_pool.h):
// a fresh multi-MiB buffer page-faults on every call, which cost MPI's S(1)
// -> R of 16 MiB 3.5x its gather (benchmarks/RESULTS.md at 390419a).
void Communicator::do_all_gather_v_along(const at::Tensor& input, at::Tensor& output,
                                         const std::vector<int64_t>& sizes_per_rank, int64_t dim) {
  const std::vector<int64_t> numel = rows_to_numel(sizes_per_rank, slice_numel(output, dim));
  if (slices_are_consecutive(output, dim)) return do_all_gather_v(input, output, numel);
  at::Tensor gathered = pooled_empty({output.numel()}, output.options());
  do_all_gather_v(input, gathered, numel);
  unpack_slices(gathered, slices_along(output, dim, sizes_per_rank), output, dim);
}

void Communicator::do_all_to_all_v_along(const at::Tensor& input,
                                         const std::vector<int64_t>& send_sizes, int64_t send_dim,
                                         at::Tensor& output, const std::vector<int64_t>& recv_sizes,
                                         int64_t recv_dim) {
  at::Tensor packed = input;
  if (!slices_are_consecutive(input, send_dim)) {
    packed = pooled_empty({input.numel()}, input.options());
    pack_slices(input, send_dim, send_sizes, packed);
  }
  const bool direct = slices_are_consecutive(output, recv_dim);
  at::Tensor received = direct ? output : pooled_empty({output.numel()}, output.options());
  do_all_to_all_v(packed, rows_to_numel(send_sizes, slice_numel(input, send_dim)), received,
                  rows_to_numel(recv_sizes, slice_numel(output, recv_dim)));
  if (!direct)
    unpack_slices(received, slices_along(output, recv_dim, recv_sizes), output, recv_dim);
}

namespace {

std::vector<int64_t> numel_of(const std::vector<at::Tensor>& parts) {
  std::vector<int64_t> numel;
  numel.reserve(parts.size());
  for (const at::Tensor& part : parts) numel.push_back(part.numel());
  return numel;
}

// The flat tensor an exchange side's non-empty parts tile, in order, when
// they are contiguous and lie one after another in one storage (a single
// part, or consecutive views of one buffer): nothing to pack. nullopt
// otherwise (aliased parts, gaps, strided parts).
std::optional<at::Tensor> tiled_buffer(const std::vector<at::Tensor>& parts) {
  const at::Tensor* first = nullptr;
  const char* next = nullptr;
  int64_t numel = 0;
  for (const at::Tensor& part : parts) {
    if (part.numel() == 0) continue;
    if (!part.is_contiguous()) return std::nullopt;
    const auto* begin = static_cast<const char*>(part.data_ptr());
    if (first == nullptr) {
      first = &part;
    } else if (begin != next || !part.is_alias_of(*first)) {
      return std::nullopt;
    }
    next = begin + part.numel() * static_cast<int64_t>(part.element_size());
    numel += part.numel();
  }
  if (first == nullptr) return std::nullopt;
  return first->as_strided({numel}, {1});
}

}  // namespace

void Communicator::do_exchange(const std::vector<at::Tensor>& send_parts,
                               const std::vector<at::Tensor>& recv_parts) {
  const std::vector<int64_t> send_numel = numel_of(send_parts);
  const std::vector<int64_t> recv_numel = numel_of(recv_parts);
  const at::TensorOptions options = send_parts[0].options();
  std::optional<at::Tensor> packed = tiled_buffer(send_parts);
  if (!packed) {
    packed = pooled_empty({sum_of(send_numel)}, options);
    pack_parts(send_parts, *packed);
  }
  std::optional<at::Tensor> received = tiled_buffer(recv_parts);
  const bool direct = received.has_value();
  if (!direct) received = pooled_empty({sum_of(recv_numel)}, options);
  do_all_to_all_v(*packed, send_numel, *received, recv_numel);
  if (direct) return;
  const std::vector<at::Tensor> views = packed_views(*received, recv_parts);
  for (size_t p = 0; p < recv_parts.size(); ++p) recv_parts[p].copy_(views[p]);
}

namespace {

struct BackendRegistry {
  std::mutex mutex;
  absl::flat_hash_map<std::string, WorldCommunicatorFactory> factories;
};

BackendRegistry& backend_registry() {
  static BackendRegistry* registry = new BackendRegistry();
  return *registry;
}

}  // namespace

bool register_communicator_backend(std::string_view name, WorldCommunicatorFactory factory) {
  BackendRegistry& registry = backend_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  const bool inserted = registry.factories.emplace(std::string(name), factory).second;
  DTENSOR_CHECK(inserted, "register_communicator_backend: expected a new backend name, found \"",
                name, "\" already registered");
  return inserted;
}

std::vector<std::string> registered_backends() {
  BackendRegistry& registry = backend_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  std::vector<std::string> names;
  for (const auto& [name, factory] : registry.factories) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

std::shared_ptr<Communicator> make_world_communicator(std::string_view backend) {
  WorldCommunicatorFactory factory = nullptr;
  {
    BackendRegistry& registry = backend_registry();
    std::lock_guard<std::mutex> lock(registry.mutex);
    auto it = registry.factories.find(std::string(backend));
    if (it != registry.factories.end()) factory = it->second;
  }
  DTENSOR_CHECK(factory != nullptr, "make_world_communicator: expected one of the backends [",
                absl::StrJoin(registered_backends(), ", "), "] built into this library, found \"",
                backend, "\"");
  return factory();
}

}  // namespace dtensor
