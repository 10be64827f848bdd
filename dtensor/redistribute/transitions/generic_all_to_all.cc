// Copyright 2026 The dtensor Authors.
//
// The transition of last resort: one all-to-all-v over the intersections of
// what each group member holds and what each needs. Works for any pair of
// non-partial placements that merge the same leading dims, user placements
// included, because it only reads layouts.
#include <ATen/ATen.h>

#include "dtensor/base/check.h"
#include "dtensor/redistribute/index_exchange.h"
#include "dtensor/redistribute/transition.h"

namespace dtensor {
namespace {

using redistribute_internal::gather_positions;
using redistribute_internal::scatter_positions;
using redistribute_internal::shared_positions;
using redistribute_internal::SharedPositions;

class GenericAllToAll final : public Transition {
 public:
  std::string_view collective() const override { return "all_to_all_v"; }
  int priority() const override { return 100; }

  bool applies(const StepContext& step) const override {
    return !step.source_placement().is_partial() && !step.target_placement().is_partial() &&
           step.source_merged() == step.target_merged();
  }

  int64_t bytes(const StepContext& step) const override {
    int64_t elements = 0;
    for (int64_t p = 0; p < step.group_size(); ++p) {
      if (p != step.group_rank()) elements += sends_to(step, p).numel();
    }
    return elements * step.element_size();
  }

  at::Tensor run(const at::Tensor& local, const StepContext& step) const override {
    const int64_t n = step.group_size();
    std::vector<at::Tensor> outgoing;
    std::vector<int64_t> send_counts(n), recv_counts(n);
    std::vector<SharedPositions> incoming(n);
    int64_t received = 0;
    for (int64_t p = 0; p < n; ++p) {
      const SharedPositions out = sends_to(step, p);
      send_counts[p] = out.numel();
      if (send_counts[p] > 0) outgoing.push_back(gather_positions(local, out.held));
      incoming[p] = shared_positions(step.source_layout(p).global_indices(),
                                     step.my_target_layout().global_indices());
      recv_counts[p] = incoming[p].numel();
      received += recv_counts[p];
    }
    const std::vector<int64_t>& target_shape = step.my_target_layout().local_shape;
    at::Tensor result = at::empty(target_shape, local.options());
    DTENSOR_CHECK(received == result.numel(), "redistribute: internal: ", step.source().to_string(),
                  " -> ", placements_to_string(step.target().placements()), ": the group holds ",
                  received, " of the ", result.numel(), " elements this rank needs");
    at::Tensor send = outgoing.empty() ? at::empty({0}, local.options()) : at::cat(outgoing);
    at::Tensor recv = at::empty({received}, local.options());
    step.communicator()->all_to_all_v(send, send_counts, recv, recv_counts);
    int64_t offset = 0;
    for (int64_t p = 0; p < n; ++p) {
      scatter_positions(result, incoming[p].wanted, recv.narrow(0, offset, recv_counts[p]));
      offset += recv_counts[p];
    }
    return result;
  }

 private:
  static SharedPositions sends_to(const StepContext& step, int64_t member) {
    return shared_positions(step.my_source_layout().global_indices(),
                            step.target_layout(member).global_indices());
  }
};

DTENSOR_REGISTER_TRANSITION(GenericAllToAll);

}  // namespace
}  // namespace dtensor
