// Copyright 2026 The dtensor Authors.
//
// The transition of last resort: one exchange of the intersections of what
// each group member holds and what each needs. Works for any pair of
// non-partial placements that merge the same leading dims, user placements
// included, because it only reads layouts; for the same reason it also
// serves the planner's cross steps, which change mesh dims outside their
// group (planner.h). Pieces that are boxes of the local tensors (a Shard of
// a Shard, say) are sent from and received into views: no pack, no unpack.
#include <algorithm>
#include <optional>

#include <ATen/ATen.h>

#include <dtensor/base/buffer_pool.h>
#include <dtensor/base/check.h>
#include <dtensor/redistribute/index_exchange.h>
#include <dtensor/redistribute/transition.h>

namespace dtensor {
namespace {

using redistribute_internal::box_of;
using redistribute_internal::gather_positions;
using redistribute_internal::Narrow;
using redistribute_internal::narrow_to;
using redistribute_internal::product_shape;
using redistribute_internal::scatter_positions;
using redistribute_internal::shared_positions;
using redistribute_internal::SharedPositions;

using Box = std::optional<std::vector<Narrow>>;

class GenericAllToAll final : public Transition {
 public:
  std::string_view collective() const override { return "all_to_all_v"; }
  int priority() const override { return 100; }
  bool reads_layouts_only() const override { return true; }

  // Moving elements cannot sum a Partial, nor move one between members that
  // hold different terms: no mesh dim that changes or that the group spans
  // may be Partial (one that stays outside the group is moved as it is).
  bool applies(const StepContext& step) const override {
    const std::vector<PlacementPtr>& before = step.source().placements();
    const std::vector<PlacementPtr>& after = step.target().placements();
    const std::vector<int64_t>& group = step.mesh_dims();
    for (int64_t m = 0; m < static_cast<int64_t>(before.size()); ++m) {
      const bool moves =
          *before[m] != *after[m] || std::find(group.begin(), group.end(), m) != group.end();
      if (moves && (before[m]->is_partial() || after[m]->is_partial())) return false;
    }
    return step.source_merged() == step.target_merged();
  }

  int64_t bytes(const StepContext& step) const override {
    const Exchange& exchange = exchange_of(step);
    int64_t elements = 0;
    for (int64_t p = 0; p < step.group_size(); ++p) {
      if (p != step.group_rank()) elements += exchange.outgoing[p].numel();
    }
    return elements * step.element_size();
  }

  int64_t peers(const StepContext& step) const override {
    const Exchange& exchange = exchange_of(step);
    int64_t peers = 0;
    for (int64_t p = 0; p < step.group_size(); ++p) {
      peers += p != step.group_rank() && exchange.outgoing[p].numel() > 0;
    }
    return peers;
  }

  at::Tensor run(const at::Tensor& local, const StepContext& step) const override {
    const Exchange& exchange = exchange_of(step);
    const int64_t n = step.group_size();
    at::Tensor result = pooled_empty(step.my_target_layout().local_shape, local.options());
    // Pieces that are not boxes of the result arrive one after another in
    // one buffer (a backend packing the exchange receives straight into it).
    at::Tensor unboxed;
    if (exchange.unboxed_numel) unboxed = pooled_empty({*exchange.unboxed_numel}, local.options());
    int64_t offset = 0;
    std::vector<at::Tensor> send(n), recv(n);
    for (int64_t p = 0; p < n; ++p) {
      const SharedPositions& out = exchange.outgoing[p];
      send[p] = exchange.send_boxes[p]
                    ? narrow_to(local, *exchange.send_boxes[p])
                    : gather_positions(local, out.held).view(product_shape(out.held));
      if (exchange.recv_boxes[p]) {
        recv[p] = narrow_to(result, *exchange.recv_boxes[p]);
      } else {
        const SharedPositions& in = exchange.incoming[p];
        recv[p] = unboxed.narrow(0, offset, in.numel()).view(product_shape(in.wanted));
        offset += in.numel();
      }
    }
    step.communicator()->exchange(send, recv);
    for (int64_t p = 0; p < n; ++p) {
      if (!exchange.recv_boxes[p]) {
        scatter_positions(result, exchange.incoming[p].wanted, recv[p].reshape({-1}));
      }
    }
    return result;
  }

 private:
  // What the step alone decides: per group member, the positions this rank
  // sends it and receives from it, and whether each is a box of the local
  // tensor it lies in.
  struct Exchange {
    std::vector<SharedPositions> outgoing, incoming;
    std::vector<Box> send_boxes, recv_boxes;
    // Elements received into pieces that are not boxes; unset when all are.
    std::optional<int64_t> unboxed_numel;
  };

  static const Exchange& exchange_of(const StepContext& step) {
    return step.derived<Exchange>([&] { return make_exchange(step); });
  }

  static Exchange make_exchange(const StepContext& step) {
    const LocalLayout& mine = step.my_target_layout();
    Exchange exchange;
    int64_t received = 0;
    for (int64_t p = 0; p < step.group_size(); ++p) {
      exchange.outgoing.push_back(shared_positions(step.my_source_layout().global_indices(),
                                                   step.target_layout(p).global_indices()));
      exchange.incoming.push_back(
          shared_positions(step.source_layout(p).global_indices(), mine.global_indices()));
      exchange.send_boxes.push_back(
          box_of(exchange.outgoing[p].held, step.my_source_layout().local_shape));
      exchange.recv_boxes.push_back(box_of(exchange.incoming[p].wanted, mine.local_shape));
      received += exchange.incoming[p].numel();
      if (!exchange.recv_boxes[p]) {
        exchange.unboxed_numel = exchange.unboxed_numel.value_or(0) + exchange.incoming[p].numel();
      }
    }
    DTENSOR_CHECK(received == mine.local_numel(),
                  "redistribute: internal: ", step.source().to_string(), " -> ",
                  placements_to_string(step.target().placements()), ": the group holds ", received,
                  " of the ", mine.local_numel(), " elements this rank needs");
    return exchange;
  }
};

}  // namespace

DTENSOR_REGISTER(generic_all_to_all) {
  transitions().add("*->*", std::make_shared<GenericAllToAll>());
}

}  // namespace dtensor
