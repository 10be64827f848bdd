// Copyright 2026 The dtensor Authors.
#include "mesh/communicator.h"

#include <mutex>
#include <numeric>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/check.h"

namespace dtensor {
namespace {

// Rows along dim 0, with a 0-dim tensor counting as one row.
int64_t rows_of(const at::Tensor& t) { return t.dim() == 0 ? 1 : t.size(0); }

// Elements in one row: the product of the sizes after dim 0.
int64_t row_numel(const at::Tensor& t) {
  int64_t numel = 1;
  for (int64_t d = 1; d < t.dim(); ++d) numel *= t.size(d);
  return numel;
}

class ArgumentChecker {
 public:
  ArgumentChecker(const Communicator& comm, const char* call) : comm_(comm), call_(call) {}

  void tensor(const at::Tensor& t, const char* name) const {
    DTENSOR_CHECK(t.defined(), call_, ": ", name, ": expected a defined tensor, found undefined");
    DTENSOR_CHECK(t.is_contiguous(), call_, ": ", name,
                  ": expected a contiguous tensor, found strides ", t.strides(), " for sizes ",
                  t.sizes());
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

  void peer(int peer, const char* name) const {
    DTENSOR_CHECK(peer >= 0 && peer < comm_.size(), call_, ": ", name, ": expected a rank in [0, ",
                  comm_.size(), "), found ", peer);
  }

  void reduce_op(ReduceOp op, const at::Tensor& t) const {
    check_reduce_op_supports(op, t.scalar_type(), call_);
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

}  // namespace

void Communicator::all_reduce(at::Tensor& tensor, ReduceOp op) {
  ArgumentChecker check(*this, "all_reduce");
  check.tensor(tensor, "tensor");
  check.reduce_op(op, tensor);
  do_all_reduce(tensor, op);
}

void Communicator::all_gather(const at::Tensor& input, at::Tensor& output) {
  ArgumentChecker check(*this, "all_gather");
  check.tensor(input, "input");
  check.tensor(output, "output");
  check.same_dtype(input, output);
  check.shape(output, "output", size() * rows_of(input), input);
  do_all_gather(input, output);
}

void Communicator::all_gather_v(const at::Tensor& input, at::Tensor& output,
                                absl::Span<const int64_t> rows_per_rank) {
  ArgumentChecker check(*this, "all_gather_v");
  check.tensor(input, "input");
  check.tensor(output, "output");
  check.same_dtype(input, output);
  check.counts(rows_per_rank, "rows_per_rank");
  check.shape(input, "input", rows_per_rank[rank()], input);
  check.shape(output, "output", sum_of(rows_per_rank), input);
  do_all_gather_v(input, output, rows_to_numel(rows_per_rank, row_numel(input)));
}

void Communicator::reduce_scatter(const at::Tensor& input, at::Tensor& output, ReduceOp op) {
  ArgumentChecker check(*this, "reduce_scatter");
  check.tensor(input, "input");
  check.tensor(output, "output");
  check.same_dtype(input, output);
  check.reduce_op(op, input);
  check.shape(input, "input", size() * rows_of(output), output);
  do_reduce_scatter(input, output, op);
}

void Communicator::reduce_scatter_v(const at::Tensor& input, at::Tensor& output,
                                    absl::Span<const int64_t> rows_per_rank, ReduceOp op) {
  ArgumentChecker check(*this, "reduce_scatter_v");
  check.tensor(input, "input");
  check.tensor(output, "output");
  check.same_dtype(input, output);
  check.reduce_op(op, input);
  check.counts(rows_per_rank, "rows_per_rank");
  check.shape(input, "input", sum_of(rows_per_rank), input);
  check.shape(output, "output", rows_per_rank[rank()], input);
  do_reduce_scatter_v(input, output, rows_to_numel(rows_per_rank, row_numel(input)), op);
}

void Communicator::all_to_all(const at::Tensor& input, at::Tensor& output) {
  ArgumentChecker check(*this, "all_to_all");
  check.tensor(input, "input");
  check.tensor(output, "output");
  check.same_dtype(input, output);
  DTENSOR_CHECK(rows_of(input) % size() == 0,
                "all_to_all: input rows: expected a multiple of the group size ", size(),
                ", found ", rows_of(input));
  check.shape(output, "output", rows_of(input), input);
  do_all_to_all(input, output);
}

void Communicator::all_to_all_v(const at::Tensor& input, absl::Span<const int64_t> send_rows,
                                at::Tensor& output, absl::Span<const int64_t> recv_rows) {
  ArgumentChecker check(*this, "all_to_all_v");
  check.tensor(input, "input");
  check.tensor(output, "output");
  check.same_dtype(input, output);
  check.counts(send_rows, "send_rows");
  check.counts(recv_rows, "recv_rows");
  check.shape(input, "input", sum_of(send_rows), input);
  check.shape(output, "output", sum_of(recv_rows), input);
  const int64_t per_row = row_numel(input);
  do_all_to_all_v(input, rows_to_numel(send_rows, per_row), output,
                  rows_to_numel(recv_rows, per_row));
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
  check.tensor(output, "output");
  if (rank() == root) {
    check.tensor(input, "input");
    check.same_dtype(input, output);
    check.shape(input, "input", size() * rows_of(output), output);
  }
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
