// Copyright 2026 The dtensor Authors.
//
// Between placements that cut a dim into consecutive blocks in group order
// (Shard, Ragged): S(a) -> S(b), Ragged -> Ragged, Shard <-> Ragged. One
// all-to-all-v whose messages are blocks of slices along one dim, instead of
// gathering index lists per peer; the generic transition remains for
// everything else.
#include <ATen/ATen.h>
#include <c10/util/accumulate.h>

#include <dtensor/base/buffer_pool.h>
#include <dtensor/base/check.h>
#include <dtensor/redistribute/transition.h>

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
    blocks.length.push_back(static_cast<int64_t>(layout.global_indices()[dim].size()));
    blocks.offset.push_back(offset);
    offset += blocks.length.back();
  }
  return blocks;
}

int64_t overlap(int64_t begin_a, int64_t length_a, int64_t begin_b, int64_t length_b) {
  return std::max<int64_t>(
      0, std::min(begin_a + length_a, begin_b + length_b) - std::max(begin_a, begin_b));
}

// What the exchange derives from its step alone: the slices this rank sends
// each member along the target's dim and receives from each along the
// source's dim.
struct Exchange {
  int64_t send_dim = 0;
  int64_t recv_dim = 0;
  std::vector<int64_t> send;
  std::vector<int64_t> recv;
  std::vector<int64_t> output_shape;
};

Exchange make_exchange(const StepContext& step, at::IntArrayRef local_shape) {
  const int64_t a = local_split_dim(step.source_placement(), step.source_merged());
  const int64_t b = local_split_dim(step.target_placement(), step.target_merged());
  const Blocks sources = blocks_of(step, a, /*source=*/true);
  const Blocks targets = blocks_of(step, b, /*source=*/false);
  const int64_t n = step.group_size();
  const int64_t me = step.group_rank();
  Exchange exchange{b, a, std::vector<int64_t>(n), std::vector<int64_t>(n),
                    std::vector<int64_t>(local_shape.begin(), local_shape.end())};
  int64_t received = 0;
  for (int64_t p = 0; p < n; ++p) {
    if (a == b) {
      // One dim cut twice: send each peer the overlap of this rank's interval
      // with the peer's.
      exchange.send[p] =
          overlap(sources.offset[me], sources.length[me], targets.offset[p], targets.length[p]);
      exchange.recv[p] =
          overlap(sources.offset[p], sources.length[p], targets.offset[me], targets.length[me]);
    } else {
      // Each peer gets its block of dim b; what arrives is the peers' blocks
      // of dim a, in group order.
      exchange.send[p] = targets.length[p];
      exchange.recv[p] = sources.length[p];
    }
    received += exchange.recv[p];
  }
  exchange.output_shape[b] = targets.length[me];
  exchange.output_shape[a] = received;
  const int64_t numel = c10::multiply_integers(exchange.output_shape);
  DTENSOR_CHECK(numel == step.my_target_layout().local_numel(),
                "redistribute: internal: block all-to-all receives ", numel, " elements, expected ",
                step.my_target_layout().local_numel());
  return exchange;
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

  // Every message is a block of slices along one dim, sent from and received
  // into place: no pack, join or transpose here.
  at::Tensor run(const at::Tensor& local, const StepContext& step) const override {
    const Exchange& e = step.derived<Exchange>([&] { return make_exchange(step, local.sizes()); });
    at::Tensor output = pooled_empty(e.output_shape, local.options());
    // The collective reads a contiguous buffer (a view's shard may be strided).
    step.communicator()->all_to_all_v(pooled_contiguous(local), e.send, e.send_dim, output, e.recv,
                                      e.recv_dim);
    return output.reshape(step.my_target_layout().local_shape);
  }
};

}  // namespace

DTENSOR_REGISTER(block_all_to_all) { transitions().add("*->*", std::make_shared<BlockAllToAll>()); }

}  // namespace dtensor
