// Copyright 2026 The dtensor Authors.
//
// Between placements that cut a dim into consecutive blocks in group order
// (Shard, Ragged): S(a) -> S(b), Ragged -> Ragged, Shard <-> Ragged. One
// all-to-all-v whose messages are contiguous row ranges, so packing is one
// transpose (none when the target splits dim 0) instead of gathering index
// lists per peer; the generic transition remains for everything else.
#include <ATen/ATen.h>

#include "dtensor/base/check.h"
#include "dtensor/redistribute/transition.h"

namespace dtensor {
namespace {

struct Blocks {
  std::vector<int64_t> length;  // per member
  std::vector<int64_t> offset;  // exclusive prefix sums of length
};

Blocks blocks_of(const StepContext& step, int64_t dim, bool source) {
  Blocks blocks;
  int64_t offset = 0;
  for (int64_t p = 0; p < step.group_size(); ++p) {
    const LocalLayout& layout = source ? step.source_layout(p) : step.target_layout(p);
    blocks.length.push_back(static_cast<int64_t>(layout.global_indices[dim].size()));
    blocks.offset.push_back(offset);
    offset += blocks.length.back();
  }
  return blocks;
}

int64_t overlap(int64_t begin_a, int64_t length_a, int64_t begin_b, int64_t length_b) {
  return std::max<int64_t>(
      0, std::min(begin_a + length_a, begin_b + length_b) - std::max(begin_a, begin_b));
}

class BlockAllToAll final : public Transition {
 public:
  std::string_view collective() const override { return "all_to_all_v"; }
  int priority() const override { return 10; }

  bool applies(const StepContext& step) const override {
    const Placement& from = step.source_placement();
    const Placement& to = step.target_placement();
    return from.splits_into_ordered_blocks() && to.splits_into_ordered_blocks() &&
           step.source_merged() == step.target_merged();
  }

  int64_t bytes(const StepContext& step) const override {
    const int64_t n = step.group_size();
    return (n - 1) * step.my_source_layout().local_numel() * step.element_size() / n;
  }

  at::Tensor run(const at::Tensor& local, const StepContext& step) const override {
    const int64_t a = StepContext::local_split_dim(step.source_placement(), step.source_merged());
    const int64_t b = StepContext::local_split_dim(step.target_placement(), step.target_merged());
    const Blocks sources = blocks_of(step, a, /*source=*/true);
    const Blocks targets = blocks_of(step, b, /*source=*/false);
    // Rows along the target's dim: every peer's share is a consecutive range.
    const at::Tensor rows = local.movedim(b, 0).contiguous();
    const at::Tensor moved = a == b ? same_dim(rows, step, sources, targets)
                                    : other_dim(rows, step, a < b ? a + 1 : a, sources, targets);
    return moved.movedim(0, b).contiguous().reshape(step.my_target_layout().local_shape);
  }

 private:
  // Source and target cut the same dim: send each peer the overlap of this
  // rank's interval with the peer's; the pieces arrive in order.
  static at::Tensor same_dim(const at::Tensor& rows, const StepContext& step, const Blocks& sources,
                             const Blocks& targets) {
    const int64_t n = step.group_size();
    const int64_t me = step.group_rank();
    std::vector<int64_t> send(n), recv(n);
    int64_t received = 0;
    for (int64_t p = 0; p < n; ++p) {
      send[p] =
          overlap(sources.offset[me], sources.length[me], targets.offset[p], targets.length[p]);
      recv[p] =
          overlap(sources.offset[p], sources.length[p], targets.offset[me], targets.length[me]);
      received += recv[p];
    }
    DTENSOR_CHECK(received == targets.length[me], "redistribute: internal: block all-to-all ",
                  "receives ", received, " rows, expected ", targets.length[me]);
    std::vector<int64_t> shape(rows.sizes().begin(), rows.sizes().end());
    shape[0] = received;
    at::Tensor out = at::empty(shape, rows.options());
    step.communicator()->all_to_all_v(rows, send, out, recv);
    return out;
  }

  // Source cuts dim `a` (of the row-major moved tensor), target cuts rows:
  // send each peer its rows; what arrives is the peers' pieces of dim `a`,
  // joined in group order.
  static at::Tensor other_dim(const at::Tensor& rows, const StepContext& step, int64_t a,
                              const Blocks& sources, const Blocks& targets) {
    const int64_t n = step.group_size();
    const int64_t me = step.group_rank();
    int64_t per_row_and_a = 1;  // elements per (row, index along a)
    for (int64_t d = 1; d < rows.dim(); ++d) per_row_and_a *= d == a ? 1 : rows.size(d);
    std::vector<int64_t> send(n), recv(n);
    int64_t received = 0;
    for (int64_t p = 0; p < n; ++p) {
      send[p] = targets.length[p] * sources.length[me] * per_row_and_a;
      recv[p] = targets.length[me] * sources.length[p] * per_row_and_a;
      received += recv[p];
    }
    at::Tensor flat_out = at::empty({received}, rows.options());
    step.communicator()->all_to_all_v(rows.reshape({-1}), send, flat_out, recv);
    std::vector<at::Tensor> pieces;
    int64_t offset = 0;
    for (int64_t p = 0; p < n; ++p) {
      std::vector<int64_t> shape(rows.sizes().begin(), rows.sizes().end());
      shape[0] = targets.length[me];
      shape[a] = sources.length[p];
      pieces.push_back(flat_out.narrow(0, offset, recv[p]).view(shape));
      offset += recv[p];
    }
    return at::cat(pieces, a);
  }
};

DTENSOR_REGISTER_TRANSITION(BlockAllToAll);

}  // namespace
}  // namespace dtensor
