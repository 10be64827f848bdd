// Copyright 2026 The dtensor Authors.
#include <dtensor/mesh/mpi_communicator.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <unistd.h>

#include <ATen/ATen.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <c10/util/accumulate.h>
#include <c10/util/strides.h>

#include <dtensor/base/check.h>
#include <dtensor/base/tensor_memory.h>
#include <dtensor/mesh/peer_memory.h>

namespace dtensor {
namespace mpi_internal {

int to_mpi_count(int64_t value, std::string_view call, std::string_view what) {
  constexpr int64_t kLimit = std::numeric_limits<int>::max();
  DTENSOR_CHECK(value <= kLimit, call, ": ", what, ": expected at most ", kLimit,
                " (MPI counts are int), found ", value);
  return static_cast<int>(value);
}

PackedLayout packed_layout(const std::vector<int64_t>& numel_per_rank, int64_t element_size,
                           std::string_view call) {
  int64_t total = 0;
  int64_t unit = 0;
  for (int64_t numel : numel_per_rank) {
    total += numel * element_size;
    unit = std::gcd(unit, numel * element_size);
  }
  PackedLayout layout;
  layout.unit = total <= std::numeric_limits<int>::max() || unit == 0 ? 1 : unit;
  const char* counted = layout.unit == 1 ? "bytes of one rank" : "units of one rank";
  layout.counts.reserve(numel_per_rank.size());
  layout.displacements.reserve(numel_per_rank.size());
  int64_t offset = 0;
  for (int64_t numel : numel_per_rank) {
    const int64_t bytes = numel * element_size;
    layout.counts.push_back(to_mpi_count(bytes / layout.unit, call, counted));
    layout.displacements.push_back(to_mpi_count(offset / layout.unit, call, "displacement"));
    offset += bytes;
  }
  return layout;
}

}  // namespace mpi_internal

namespace {

using mpi_internal::packed_layout;
using mpi_internal::PackedLayout;
using mpi_internal::to_mpi_count;

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "unknown MPI error";
  return std::string(text, length);
}

void check_mpi(int code, const char* call) {
  DTENSOR_CHECK(code == MPI_SUCCESS, call, ": expected MPI_SUCCESS, found error ", code, " (",
                mpi_error_string(code), ")");
}

bool mpi_finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

bool mpi_initialized() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  return initialized != 0;
}

// Registered only when dtensor initialized MPI, so an application that owns
// MPI's life cycle keeps it; skipped when the application finalized anyway.
void finalize_mpi_at_exit() {
  if (!mpi_finalized()) MPI_Finalize();
}

// Called once, from MpiCommunicator::world's static initializer.
void initialize_mpi() {
  if (mpi_initialized()) return;
  DTENSOR_CHECK(!mpi_finalized(),
                "MpiCommunicator::world: MPI state: expected initialized or not yet "
                "initialized, found already finalized");
  int provided = 0;
  check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
  std::atexit(finalize_mpi_at_exit);
}

MPI_Comm duplicate(MPI_Comm comm) {
  DTENSOR_CHECK(comm != MPI_COMM_NULL,
                "MpiCommunicator: comm: expected a communicator, found MPI_COMM_NULL");
  DTENSOR_CHECK(mpi_initialized() && !mpi_finalized(),
                "MpiCommunicator: MPI state: expected initialized (MPI_Init or "
                "MpiCommunicator::world()), found ",
                mpi_finalized() ? "finalized" : "not initialized");
  MPI_Comm copy = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(comm, &copy), "MPI_Comm_dup");
  return copy;
}

char* bytes_of(const at::Tensor& tensor) { return static_cast<char*>(tensor.data_ptr()); }

// MPI forbids a send buffer that overlaps the receive buffer; an input that
// already sits at this rank's slot of the output is MPI's in-place case.
const void* send_buffer(const at::Tensor& input, const char* own_slot) {
  return input.numel() > 0 && bytes_of(input) == own_slot ? MPI_IN_PLACE : input.data_ptr();
}

std::vector<int> to_mpi_counts(const std::vector<int64_t>& values, const char* call,
                               const char* what) {
  std::vector<int> counts;
  counts.reserve(values.size());
  for (int64_t value : values) counts.push_back(to_mpi_count(value, call, what));
  return counts;
}

// A committed MPI datatype, freed with the object; MPI_BYTE, predefined,
// is held but never freed.
class Datatype {
 public:
  // Bytes counted in units of `unit` bytes: MPI_BYTE for one, else a
  // contiguous datatype of `unit` bytes.
  static Datatype unit_of(int64_t unit) {
    return unit == 1 ? Datatype(MPI_BYTE) : committed(contiguous_bytes(unit));
  }

  // One tensor part's elements where they lie, whatever its strides: the
  // contiguous innermost run as bytes, then one hvector per outer dim.
  static Datatype part_of(const at::Tensor& part) {
    const int64_t element = part.element_size();
    int64_t run = element;  // bytes of the contiguous innermost run
    int64_t d = part.dim() - 1;
    for (; d >= 0 && (part.size(d) == 1 || part.stride(d) * element == run); --d) {
      run *= part.size(d);
    }
    MPI_Datatype type = contiguous_bytes(run);
    for (; d >= 0; --d) {
      if (part.size(d) == 1) continue;
      MPI_Datatype outer = MPI_DATATYPE_NULL;
      check_mpi(
          MPI_Type_create_hvector(to_mpi_count(part.size(d), "MPI_Type_create_hvector", "slices"),
                                  1, part.stride(d) * element, type, &outer),
          "MPI_Type_create_hvector");
      MPI_Type_free(&type);
      type = outer;
    }
    return committed(type);
  }

  Datatype(Datatype&& other) noexcept : type_(std::exchange(other.type_, MPI_BYTE)) {}
  Datatype(const Datatype&) = delete;
  Datatype& operator=(const Datatype&) = delete;
  Datatype& operator=(Datatype&&) = delete;
  ~Datatype() {
    if (type_ != MPI_BYTE) MPI_Type_free(&type_);
  }
  MPI_Datatype type() const { return type_; }

 private:
  explicit Datatype(MPI_Datatype type) : type_(type) {}

  // An uncommitted datatype of `bytes` consecutive bytes.
  static MPI_Datatype contiguous_bytes(int64_t bytes) {
    MPI_Datatype type = MPI_DATATYPE_NULL;
    check_mpi(
        MPI_Type_contiguous(to_mpi_count(bytes, "MPI_Type_contiguous", "bytes"), MPI_BYTE, &type),
        "MPI_Type_contiguous");
    return type;
  }

  // `type` committed and owned; freed before the throw when committing fails.
  static Datatype committed(MPI_Datatype type) {
    const int code = MPI_Type_commit(&type);
    if (code != MPI_SUCCESS) MPI_Type_free(&type);
    check_mpi(code, "MPI_Type_commit");
    return Datatype(type);
  }

  MPI_Datatype type_;
};

// ---- Reductions -----------------------------------------------------------

// Element-wise combiners for the 16-bit floating dtypes, computed through
// float as c10's own arithmetic does. max/min propagate NaN like at::maximum.
struct Add {
  template <typename T>
  T operator()(T a, T b) const {
    return a + b;
  }
};
struct Multiply {
  template <typename T>
  T operator()(T a, T b) const {
    return a * b;
  }
};
struct Larger {
  template <typename T>
  T operator()(T a, T b) const {
    const float x = a, y = b;
    return x > y || std::isnan(x) ? a : b;
  }
};
struct Smaller {
  template <typename T>
  T operator()(T a, T b) const {
    const float x = a, y = b;
    return x < y || std::isnan(x) ? a : b;
  }
};

// An MPI_User_function: inout[i] = in[i] (op) inout[i].
template <typename T, typename Combine>
void combine_elements(void* in, void* inout, int* length, MPI_Datatype* /*type*/) {
  const T* lhs = static_cast<const T*>(in);
  T* accumulator = static_cast<T*>(inout);
  const Combine combine;
  for (int i = 0; i < *length; ++i) accumulator[i] = combine(lhs[i], accumulator[i]);
}

// MPI has no bfloat16 or float16 type: their values travel as MPI_UINT16_T
// under user-defined operations, one per (dtype, op), so an operation never
// has to guess what its bits mean. Created once per process on first use and
// released by MPI_Finalize.
class HalfPrecisionOps {
 public:
  static const HalfPrecisionOps& instance() {
    static const HalfPrecisionOps ops;
    return ops;
  }

  MPI_Op find(c10::ScalarType dtype, ReduceOp op) const {
    return (dtype == c10::kBFloat16 ? bfloat16_ : float16_)[slot(op)];
  }

 private:
  HalfPrecisionOps() : bfloat16_(create<c10::BFloat16>()), float16_(create<c10::Half>()) {}

  // kAvg reduces as a sum; bitwise ops never reach floating dtypes.
  static size_t slot(ReduceOp op) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        return 0;
      case ReduceOp::kMax:
        return 1;
      case ReduceOp::kMin:
        return 2;
      case ReduceOp::kProduct:
        return 3;
      default:
        DTENSOR_CHECK(false, "mpi backend: reduce op on a 16-bit float: expected sum, avg, max, ",
                      "min or product, found ", reduce_op_name(op));
    }
  }

  template <typename T>
  static std::array<MPI_Op, 4> create() {
    return {create_op(&combine_elements<T, Add>), create_op(&combine_elements<T, Larger>),
            create_op(&combine_elements<T, Smaller>), create_op(&combine_elements<T, Multiply>)};
  }

  static MPI_Op create_op(MPI_User_function* function) {
    MPI_Op op = MPI_OP_NULL;
    check_mpi(MPI_Op_create(function, /*commute=*/1, &op), "MPI_Op_create");
    return op;
  }

  std::array<MPI_Op, 4> bfloat16_;
  std::array<MPI_Op, 4> float16_;
};

MPI_Op builtin_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return MPI_SUM;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kMin:
      return MPI_MIN;
    case ReduceOp::kProduct:
      return MPI_PROD;
    case ReduceOp::kBand:
      return MPI_BAND;
    case ReduceOp::kBor:
      return MPI_BOR;
    case ReduceOp::kBxor:
      return MPI_BXOR;
  }
  DTENSOR_CHECK(false, "mpi backend: reduce op: expected a ReduceOp enumerator, found value ",
                static_cast<int>(op));
}

MPI_Datatype builtin_type(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kFloat:
      return MPI_FLOAT;
    case c10::kDouble:
      return MPI_DOUBLE;
    case c10::kChar:
      return MPI_INT8_T;
    // torch's bool is one byte holding 0 or 1, which max, min and the bitwise
    // ops keep 0 or 1; MPI_C_BOOL would refuse max, min and the bitwise ops.
    case c10::kBool:
    case c10::kByte:
      return MPI_UINT8_T;
    case c10::kShort:
      return MPI_INT16_T;
    case c10::kInt:
      return MPI_INT32_T;
    case c10::kLong:
      return MPI_INT64_T;
    default:
      DTENSOR_CHECK(false, "mpi backend: dtype to reduce: expected float32, float64, bfloat16, ",
                    "float16, int8, uint8, int16, int32, int64 or bool, found ", dtype);
  }
}

struct Reduction {
  MPI_Datatype type;
  MPI_Op op;
};

Reduction reduction_for(c10::ScalarType dtype, ReduceOp op) {
  if (dtype == c10::kBFloat16 || dtype == c10::kHalf) {
    return {MPI_UINT16_T, HalfPrecisionOps::instance().find(dtype, op)};
  }
  return {builtin_type(dtype), builtin_op(op)};
}

}  // namespace

// ---- Life cycle -------------------------------------------------------------

MpiCommunicator::MpiCommunicator(MPI_Comm comm) : MpiCommunicator(Adopt{}, duplicate(comm)) {}

MpiCommunicator::MpiCommunicator(Adopt, MPI_Comm comm) : comm_(comm) {
  check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
}

MpiCommunicator::~MpiCommunicator() {
  // After MPI_Finalize every handle is gone already, and MPI may not be
  // called; a destructor has no way to report a failed free anyway.
  if (mpi_finalized()) return;
  if (exchange_comm_ != MPI_COMM_NULL) MPI_Comm_free(&exchange_comm_);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::shared_ptr<MpiCommunicator> MpiCommunicator::world() {
  // Built after initialize_mpi registered MPI_Finalize with atexit, so
  // this static is destroyed, and its communicator freed, before that runs.
  static const std::shared_ptr<MpiCommunicator> world = [] {
    initialize_mpi();
    return std::make_shared<MpiCommunicator>(MPI_COMM_WORLD);
  }();
  return world;
}

int MpiCommunicator::thread_level() {
  int provided = MPI_THREAD_SINGLE;
  check_mpi(MPI_Query_thread(&provided), "MPI_Query_thread");
  return provided;
}

void MpiCommunicator::finish_average(at::Tensor& tensor, ReduceOp op) const {
  if (op == ReduceOp::kAvg) tensor.div_(size_);
}

// ---- Reductions -------------------------------------------------------------

void MpiCommunicator::do_all_reduce(const at::Tensor& input, at::Tensor& output, ReduceOp op) {
  const Reduction reduction = reduction_for(input.scalar_type(), op);
  const int count = to_mpi_count(input.numel(), "MPI_Allreduce", "elements");
  check_mpi(MPI_Allreduce(send_buffer(input, bytes_of(output)), output.data_ptr(), count,
                          reduction.type, reduction.op, comm_),
            "MPI_Allreduce");
  finish_average(output, op);
}

void MpiCommunicator::do_reduce_scatter(const at::Tensor& input, at::Tensor& output, ReduceOp op) {
  const Reduction reduction = reduction_for(input.scalar_type(), op);
  const int count =
      to_mpi_count(output.numel(), "MPI_Reduce_scatter_block", "elements of one rank");
  check_mpi(MPI_Reduce_scatter_block(input.data_ptr(), output.data_ptr(), count, reduction.type,
                                     reduction.op, comm_),
            "MPI_Reduce_scatter_block");
  finish_average(output, op);
}

void MpiCommunicator::do_reduce_scatter_v(const at::Tensor& input, at::Tensor& output,
                                          const std::vector<int64_t>& numel_per_rank, ReduceOp op) {
  const Reduction reduction = reduction_for(input.scalar_type(), op);
  const std::vector<int> counts =
      to_mpi_counts(numel_per_rank, "MPI_Reduce_scatter", "elements of one rank");
  check_mpi(MPI_Reduce_scatter(input.data_ptr(), output.data_ptr(), counts.data(), reduction.type,
                               reduction.op, comm_),
            "MPI_Reduce_scatter");
  finish_average(output, op);
}

// ---- Data movement: bytes, whatever the dtype -----------------------------

void MpiCommunicator::do_all_gather(const at::Tensor& input, at::Tensor& output) {
  const int bytes = to_mpi_count(input.nbytes(), "MPI_Allgather", "bytes of one rank");
  char* out = bytes_of(output);
  check_mpi(MPI_Allgather(send_buffer(input, out + int64_t{rank_} * bytes), bytes, MPI_BYTE, out,
                          bytes, MPI_BYTE, comm_),
            "MPI_Allgather");
}

void MpiCommunicator::do_all_gather_v(const at::Tensor& input, at::Tensor& output,
                                      const std::vector<int64_t>& numel_per_rank) {
  const PackedLayout layout =
      packed_layout(numel_per_rank, output.element_size(), "MPI_Allgatherv");
  const Datatype unit = Datatype::unit_of(layout.unit);
  char* out = bytes_of(output);
  check_mpi(MPI_Allgatherv(send_buffer(input, out + layout.displacements[rank_] * layout.unit),
                           layout.counts[rank_], unit.type(), out, layout.counts.data(),
                           layout.displacements.data(), unit.type(), comm_),
            "MPI_Allgatherv");
}

void MpiCommunicator::do_all_to_all(const at::Tensor& input, at::Tensor& output) {
  const int bytes =
      to_mpi_count(static_cast<int64_t>(input.nbytes()) / size_, "MPI_Alltoall", "bytes per peer");
  check_mpi(
      MPI_Alltoall(input.data_ptr(), bytes, MPI_BYTE, output.data_ptr(), bytes, MPI_BYTE, comm_),
      "MPI_Alltoall");
}

void MpiCommunicator::do_all_to_all_v(const at::Tensor& input,
                                      const std::vector<int64_t>& send_numel, at::Tensor& output,
                                      const std::vector<int64_t>& recv_numel) {
  // Each side counts in its own unit: MPI matches messages by their bytes.
  const PackedLayout send = packed_layout(send_numel, input.element_size(), "MPI_Alltoallv");
  const PackedLayout recv = packed_layout(recv_numel, output.element_size(), "MPI_Alltoallv");
  const Datatype send_unit = Datatype::unit_of(send.unit);
  const Datatype recv_unit = Datatype::unit_of(recv.unit);
  check_mpi(MPI_Alltoallv(input.data_ptr(), send.counts.data(), send.displacements.data(),
                          send_unit.type(), output.data_ptr(), recv.counts.data(),
                          recv.displacements.data(), recv_unit.type(), comm_),
            "MPI_Alltoallv");
}

// One message per peer, each read from or written to its part where the
// part lies (strided parts through a derived datatype): no pack, no unpack.
void MpiCommunicator::do_exchange(const std::vector<at::Tensor>& send_parts,
                                  const std::vector<at::Tensor>& recv_parts) {
  // Whatever can fail locally fails before anything is posted, or takes the
  // posted messages back: a throw with messages in flight would let MPI
  // write into freed memory.
  const at::Tensor& own = send_parts[rank_];
  // As from any peer, only the element counts must agree (communicator.h).
  DTENSOR_CHECK(own.numel() == recv_parts[rank_].numel(), "exchange: the part rank ", rank_,
                " sends itself: expected the ", recv_parts[rank_].numel(),
                " elements of its place (shape ", recv_parts[rank_].sizes(), "), found ",
                own.numel(), " (shape ", own.sizes(), ")");
  std::vector<int> peers;  // of `types`: the receives, then the sends
  std::vector<Datatype> types;
  types.reserve(2 * size_);
  const auto describe = [&](const std::vector<at::Tensor>& parts) {
    for (int p = 0; p < size_; ++p) {
      if (p == rank_ || parts[p].numel() == 0) continue;
      types.push_back(Datatype::part_of(parts[p]));
      peers.push_back(p);
    }
  };
  describe(recv_parts);
  const size_t receives = types.size();
  describe(send_parts);
  if (exchange_comm_ == MPI_COMM_NULL) {
    check_mpi(MPI_Comm_dup(comm_, &exchange_comm_), "MPI_Comm_dup");
  }
  std::vector<MPI_Request> requests(types.size(), MPI_REQUEST_NULL);
  // Takes back what was posted before rethrowing.
  const auto abandon = [&] {
    for (MPI_Request& request : requests) {
      if (request != MPI_REQUEST_NULL) MPI_Cancel(&request);
    }
    MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
  };
  for (size_t i = 0; i < types.size(); ++i) {
    const int p = peers[i];
    const int posted = i < receives ? MPI_Irecv(recv_parts[p].data_ptr(), 1, types[i].type(), p, 0,
                                                exchange_comm_, &requests[i])
                                    : MPI_Isend(send_parts[p].data_ptr(), 1, types[i].type(), p, 0,
                                                exchange_comm_, &requests[i]);
    if (posted != MPI_SUCCESS) {
      abandon();
      check_mpi(posted, i < receives ? "MPI_Irecv" : "MPI_Isend");
    }
  }
  // The rank's own part, while the messages travel.
  try {
    if (own.numel() > 0) recv_parts[rank_].copy_(own.reshape(recv_parts[rank_].sizes()));
  } catch (...) {
    abandon();
    throw;
  }
  check_mpi(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE),
            "MPI_Waitall");
}

namespace {

// Direct copies cost two small collectives (where the tensors are, and
// that every rank copied) and one call of the kernel per batch of rows,
// where the packed collective costs one collective and a pack or unpack
// pass; they pay from some total size, with rows long enough (a part's rows
// are its `sizes[p]` slices along the innermost cut dim, each `slice_bytes`
// long). Callers pass what every rank has alike, so all choose alike.
struct DirectCopyPays {
  int64_t from_bytes;
  int64_t shortest_row;

  bool operator()(int64_t total_bytes, const std::vector<int64_t>& sizes,
                  int64_t slice_bytes) const {
    return total_bytes >= from_bytes && std::none_of(sizes.begin(), sizes.end(), [&](int64_t size) {
             return size > 0 && size * slice_bytes < shortest_row;
           });
  }
};

// Measured with 4 ranks on 2 cores, direct against packed. S(1) -> R,
// reading peers' parts into strided places: at 1 MiB about 50 us slower,
// at 4 MiB about even, from 16 MiB ahead; [rows, w] float parts along dim
// 1: 10.8 vs 13.8 ms at 256-byte rows, 64.6 vs 15.0 ms at 16-byte rows.
constexpr DirectCopyPays kGatherByReads = {int64_t{2} << 20, 256};
// S(0) -> S(1), writing strided blocks into peers' outputs ([rows, cols]
// float, 2 / 4 / 16 / 64 MiB): 0.98, 0.81, 0.97, 1.08x the packed time at
// 256-byte rows; 0.91, 0.62, 0.69, 0.79x at 512; 0.56, 0.54, 0.53, 0.70x at
// 1 KiB.
constexpr DirectCopyPays kAllToAllByWrites = {int64_t{2} << 20, 512};
// S(1) -> S(0), reading peers' blocks into strided places: 1.55, 1.51,
// 1.25, 1.22x at 256-byte rows; 1.14, 0.99, 0.88, 0.78x at 1 KiB; 1.02,
// 0.87, 0.70, 0.80x at 4 KiB.
constexpr DirectCopyPays kAllToAllByReads = {int64_t{16} << 20, 1024};

// Bytes of one slice of `t` along `dim`, with every dim after it.
int64_t slice_bytes_after(const at::Tensor& t, int64_t dim) {
  int64_t bytes = static_cast<int64_t>(t.element_size());
  for (int64_t d = dim + 1; d < t.dim(); ++d) bytes *= t.size(d);
  return bytes;
}

int64_t offset_of(const std::vector<int64_t>& sizes, int p) {
  return std::accumulate(sizes.begin(), sizes.begin() + p, int64_t{0});
}

// Whether the packed all_to_all_v along two dims packs the input or unpacks
// the output on some rank: a dim before the inner cut has more than one
// index there. `global` is the whole tensor's shape; the outer cut dim's
// extent differs per rank (the input's along recv_dim, the output's along
// send_dim), so its largest counts.
bool some_rank_packs_or_unpacks(const std::vector<int64_t>& global,
                                const std::vector<int64_t>& send_sizes, int64_t send_dim,
                                const std::vector<int64_t>& recv_sizes, int64_t recv_dim) {
  const int64_t outer = std::min(send_dim, recv_dim);
  const std::vector<int64_t>& outer_sizes = outer == recv_dim ? recv_sizes : send_sizes;
  for (int64_t d = 0; d < std::max(send_dim, recv_dim); ++d) {
    const int64_t extent =
        d == outer ? *std::max_element(outer_sizes.begin(), outer_sizes.end()) : global[d];
    if (extent > 1) return true;
  }
  return false;
}

}  // namespace

// S(1) -> R. Small outputs: each rank's part goes straight into its strided
// place (derived datatypes, no unpack). From kGatherPackedFrom bytes, one
// MPI_Allgatherv into a pooled buffer and one unpack copy are faster: Open
// MPI moves a strided datatype in pipelined fragments (redistribute_bench
// S1_to_R, 4 ranks, in place vs packed: 205 vs 290 us at 256 KiB, 0.77 vs
// 0.58 ms at 1 MiB, 14.8 vs 9.2 ms at 16 MiB), unless the ranks can read
// each other's memory and kGatherByReads says it pays: then each takes its
// peers' parts straight into place (reads_peers_directly). The output's
// shape is the same on every rank, so they all choose alike.
void MpiCommunicator::do_all_gather_v_along(const at::Tensor& input, at::Tensor& output,
                                            const std::vector<int64_t>& sizes_per_rank,
                                            int64_t dim) {
  constexpr int64_t kGatherPackedFrom = int64_t{512} << 10;
  if (slices_are_consecutive(output, dim)) {
    return Communicator::do_all_gather_v_along(input, output, sizes_per_rank, dim);
  }
  if (static_cast<int64_t>(output.nbytes()) < kGatherPackedFrom) {
    return do_exchange(std::vector<at::Tensor>(size_, input),
                       slices_along(output, dim, sizes_per_rank));
  }
  if (kGatherByReads(static_cast<int64_t>(output.nbytes()), sizes_per_rank,
                     slice_bytes_after(output, dim)) &&
      reads_peers_directly() && gather_along_by_reading(input, output, sizes_per_rank, dim)) {
    return;
  }
  Communicator::do_all_gather_v_along(input, output, sizes_per_rank, dim);
}

// S(0) -> S(1) and back. The packed form packs the input's column blocks
// (or unpacks the output's) around MPI_Alltoallv; where the ranks can read
// each other's memory and it pays (kAllToAllByWrites, kAllToAllByReads),
// each copies its blocks from where they lie into where they go, in one
// copy (all_to_all_along_directly). Between
// two different dims every valid call has the same sizes on every rank
// (rank p's input extends recv_sizes[p] along recv_dim, on every rank's
// count, and every peer sends rank p send_sizes[p] slices), so the global
// shape, and the choice made from it, are the same everywhere. One dim cut
// twice (Ragged -> Ragged) has per-rank sizes and keeps MPI's path.
void MpiCommunicator::do_all_to_all_v_along(const at::Tensor& input,
                                            const std::vector<int64_t>& send_sizes,
                                            int64_t send_dim, at::Tensor& output,
                                            const std::vector<int64_t>& recv_sizes,
                                            int64_t recv_dim) {
  if (send_dim != recv_dim) {
    const int64_t inner = std::max(send_dim, recv_dim);
    const std::vector<int64_t> global = shape_with(
        input.sizes(), recv_dim, std::accumulate(recv_sizes.begin(), recv_sizes.end(), int64_t{0}));
    const int64_t total_bytes = c10::multiply_integers(global) * input.element_size();
    // The remote side is the one of long runs (peer_memory.h): with the
    // inner cut along send_dim, each place in a peer's output (written from
    // a strided block of the input); along recv_dim, each peer's block of
    // its input (read into a strided place).
    const bool writes = inner == send_dim;
    if (some_rank_packs_or_unpacks(global, send_sizes, send_dim, recv_sizes, recv_dim) &&
        (writes ? kAllToAllByWrites : kAllToAllByReads)(
            total_bytes, writes ? send_sizes : recv_sizes, slice_bytes_after(input, inner)) &&
        reads_peers_directly() &&
        all_to_all_along_directly(input, send_sizes, send_dim, output, recv_sizes, recv_dim,
                                  writes)) {
      return;
    }
  }
  Communicator::do_all_to_all_v_along(input, send_sizes, send_dim, output, recv_sizes, recv_dim);
}

bool MpiCommunicator::all_agree(bool ok) {
  int agreed = ok ? 1 : 0;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &agreed, 1, MPI_INT, MPI_LAND, comm_), "MPI_Allreduce");
  return agreed != 0;
}

std::vector<int64_t> MpiCommunicator::all_gather_words(absl::Span<const int64_t> words) {
  const int count = static_cast<int>(words.size());
  std::vector<int64_t> all(words.size() * static_cast<size_t>(size_));
  check_mpi(MPI_Allgather(words.data(), count, MPI_INT64_T, all.data(), count, MPI_INT64_T, comm_),
            "MPI_Allgather");
  return all;
}

bool MpiCommunicator::reads_peers_directly() {
  if (peers_readable_) return *peers_readable_;
  const char* setting = std::getenv("DTENSOR_MPI_DIRECT_READS");
  const std::string_view value = setting == nullptr ? "" : setting;
  const bool valid = value.empty() || value == "0" || value == "1";
  // Agreed first, so that a bad value throws on every rank alike instead of
  // leaving the others waiting in the next collective.
  DTENSOR_CHECK(all_agree(valid), "DTENSOR_MPI_DIRECT_READS",
                valid ? " on another rank:" : std::string(": found \"") + setting + "\";",
                " expected 0 (off), 1 (on) or unset");
  bool ok = value != "0";
  // One host: the ranks sharing memory with this one are all of them.
  MPI_Comm host = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &host),
            "MPI_Comm_split_type");
  int host_size = 0;
  check_mpi(MPI_Comm_size(host, &host_size), "MPI_Comm_size");
  check_mpi(MPI_Comm_free(&host), "MPI_Comm_free");
  ok = ok && host_size == size_;
  // A probe on real memory, of the kernel's permission both ways: each rank
  // reads every peer's value (slot 0) and writes its own into the peer's
  // slot 1 + rank.
  constexpr int64_t kProbe = 0x64746e73'00000000;
  const at::Tensor probe = at::zeros({1 + size_}, at::kLong);
  probe[0].fill_(kProbe + rank_);
  const std::array<int64_t, 2> mine = {
      static_cast<int64_t>(getpid()),
      static_cast<int64_t>(reinterpret_cast<uintptr_t>(probe.data_ptr()))};
  const std::vector<int64_t> posted = all_gather_words(mine);
  const at::Tensor own_value = at::full({1}, kProbe + rank_, at::kLong);
  for (int peer = 0; peer < size_ && ok; ++peer) {
    const auto address = static_cast<uint64_t>(posted[2 * peer + 1]);
    at::Tensor read = at::zeros({1}, at::kLong);
    ok = read_peer_bytes({posted[2 * peer], address, 8}, read) &&
         read.item<int64_t>() == kProbe + peer &&
         write_peer_tensor(own_value, {posted[2 * peer], address + 8 * (1 + rank_), {1}});
  }
  // The writes are done once every rank agrees they were made.
  ok = all_agree(ok) &&
       at::equal(probe.narrow(0, 1, size_), at::arange(kProbe, kProbe + size_, at::kLong));
  peers_readable_ = all_agree(ok);
  for (int peer = 0; peer < size_; ++peer) peer_pids_.push_back(posted[2 * peer]);
  return *peers_readable_;
}

bool MpiCommunicator::copy_with_posted(
    const at::Tensor& input, const at::Tensor& output, bool post_output,
    absl::FunctionRef<bool(const std::vector<int64_t>& posted)> copy) {
  // A rank whose tensors are not plain CPU memory, or whose posted one is
  // not contiguous, opts every rank out.
  const at::Tensor& posted_tensor = post_output ? output : input;
  const bool usable = holds_plain_cpu_values(input) && holds_plain_cpu_values(output) &&
                      posted_tensor.is_contiguous();
  const std::array<int64_t, 3> mine = {
      usable ? 1 : 0, static_cast<int64_t>(reinterpret_cast<uintptr_t>(posted_tensor.data_ptr())),
      static_cast<int64_t>(posted_tensor.nbytes())};
  const std::vector<int64_t> posted = all_gather_words(mine);
  for (int peer = 0; peer < size_; ++peer) {
    if (posted[3 * peer] == 0) return false;
  }
  bool ok = true;
  // Nothing may leave this rank out of the agreement below: its peers would wait.
  try {
    ok = copy(posted);
  } catch (...) {
    ok = false;
  }
  // Also keeps every posted tensor alive (and a written one unread) until
  // its peers are done with it.
  return all_agree(ok);
}

bool MpiCommunicator::gather_along_by_reading(const at::Tensor& input, at::Tensor& output,
                                              const std::vector<int64_t>& sizes_per_rank,
                                              int64_t dim) {
  const bool read = copy_with_posted(
      input, output, /*post_output=*/false, [&](const std::vector<int64_t>& posted) {
        const std::vector<at::Tensor> places = slices_along(output, dim, sizes_per_rank);
        places[rank_].copy_(input);
        // Starting after this rank, so that the ranks do not all read rank 0 first.
        for (int k = 1; k < size_; ++k) {
          const int peer = (rank_ + k) % size_;
          const RemoteBytes part{peer_pids_[peer], static_cast<uint64_t>(posted[3 * peer + 1]),
                                 posted[3 * peer + 2]};
          // A part of another length (sizes that differ between ranks) is refused.
          if (!read_peer_bytes(part, places[peer])) return false;
        }
        return true;
      });
  gathers_by_direct_reads_ += read ? 1 : 0;
  return read;
}

namespace {

// Peer `peer`'s posted tensor from slice `offset` along `dim` on, as a
// remote tensor (its start and strides; the local tensor copied with it
// gives the shape): the posted tensor is contiguous, of `shape`. Nullopt
// when the peer posted another number of bytes (sizes that differ between
// ranks).
std::optional<RemoteTensor> posted_block(const std::vector<int64_t>& posted, int peer, int64_t pid,
                                         const std::vector<int64_t>& shape, int64_t element,
                                         int64_t dim, int64_t offset) {
  if (posted[3 * peer + 2] != c10::multiply_integers(shape) * element) return std::nullopt;
  const c10::DimVector strides = c10::contiguous_strides(shape);
  return RemoteTensor{pid,
                      static_cast<uint64_t>(posted[3 * peer + 1]) +
                          static_cast<uint64_t>(offset * strides[dim] * element),
                      {strides.begin(), strides.end()}};
}

}  // namespace

bool MpiCommunicator::all_to_all_along_directly(const at::Tensor& input,
                                                const std::vector<int64_t>& send_sizes,
                                                int64_t send_dim, at::Tensor& output,
                                                const std::vector<int64_t>& recv_sizes,
                                                int64_t recv_dim, bool writes) {
  const bool copied = copy_with_posted(
      input, output, /*post_output=*/writes, [&](const std::vector<int64_t>& posted) {
        const std::vector<at::Tensor> blocks = slices_along(input, send_dim, send_sizes);
        const std::vector<at::Tensor> places = slices_along(output, recv_dim, recv_sizes);
        if (blocks[rank_].sizes() != places[rank_].sizes()) return false;
        places[rank_].copy_(blocks[rank_]);
        for (int k = 1; k < size_; ++k) {
          const int peer = (rank_ + k) % size_;
          // The peer's output extends send_sizes[peer] along send_dim; its
          // input, recv_sizes[peer] along recv_dim.
          const at::Tensor& local = writes ? blocks[peer] : places[peer];
          const int64_t element = input.element_size();
          const std::optional<RemoteTensor> remote =
              writes ? posted_block(posted, peer, peer_pids_[peer],
                                    shape_with(output.sizes(), send_dim, send_sizes[peer]), element,
                                    recv_dim, offset_of(recv_sizes, rank_))
                     : posted_block(posted, peer, peer_pids_[peer],
                                    shape_with(input.sizes(), recv_dim, recv_sizes[peer]), element,
                                    send_dim, offset_of(send_sizes, rank_));
          // What this rank sends or receives fills its share of the remote
          // dim (the sizes agree between ranks).
          const bool fits = writes ? local.size(recv_dim) == recv_sizes[rank_]
                                   : local.size(send_dim) == send_sizes[rank_];
          if (!remote || !fits ||
              !(writes ? write_peer_tensor(local, *remote) : read_peer_tensor(*remote, local))) {
            return false;
          }
        }
        return true;
      });
  all_to_alls_by_direct_copies_ += copied ? 1 : 0;
  return copied;
}

void MpiCommunicator::do_broadcast(at::Tensor& tensor, int root) {
  const int bytes = to_mpi_count(tensor.nbytes(), "MPI_Bcast", "bytes");
  check_mpi(MPI_Bcast(tensor.data_ptr(), bytes, MPI_BYTE, root, comm_), "MPI_Bcast");
}

void MpiCommunicator::do_scatter(const at::Tensor& input, at::Tensor& output, int root) {
  const int bytes = to_mpi_count(output.nbytes(), "MPI_Scatter", "bytes of one rank");
  const void* send = rank_ == root ? input.data_ptr() : nullptr;
  check_mpi(MPI_Scatter(send, bytes, MPI_BYTE, output.data_ptr(), bytes, MPI_BYTE, root, comm_),
            "MPI_Scatter");
}

void MpiCommunicator::do_send(const at::Tensor& tensor, int peer, int tag) {
  const int bytes = to_mpi_count(tensor.nbytes(), "MPI_Send", "bytes");
  check_mpi(MPI_Send(tensor.data_ptr(), bytes, MPI_BYTE, peer, tag, comm_), "MPI_Send");
}

void MpiCommunicator::do_recv(at::Tensor& tensor, int peer, int tag) {
  const int bytes = to_mpi_count(tensor.nbytes(), "MPI_Recv", "bytes");
  MPI_Status status;
  check_mpi(MPI_Recv(tensor.data_ptr(), bytes, MPI_BYTE, peer, tag, comm_, &status), "MPI_Recv");
  // A shorter message fits without complaint from MPI but would leave the
  // tail of `tensor` stale.
  int received = 0;
  check_mpi(MPI_Get_count(&status, MPI_BYTE, &received), "MPI_Get_count");
  DTENSOR_CHECK(received == bytes, "recv: message from rank ", peer, " with tag ", tag,
                ": expected ", bytes, " bytes (the tensor's size), found ", received);
}

// ---- Synchronization and groups -------------------------------------------

void MpiCommunicator::do_barrier() { check_mpi(MPI_Barrier(comm_), "MPI_Barrier"); }

std::shared_ptr<Communicator> MpiCommunicator::do_split(int color, int key) {
  MPI_Comm part = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &part), "MPI_Comm_split");
  if (part == MPI_COMM_NULL) return nullptr;
  return std::shared_ptr<MpiCommunicator>(new MpiCommunicator(Adopt{}, part));
}

namespace {

std::shared_ptr<Communicator> make_mpi_world_communicator() { return MpiCommunicator::world(); }

}  // namespace

DTENSOR_REGISTER_COMMUNICATOR_BACKEND("mpi", make_mpi_world_communicator);

}  // namespace dtensor
