// Copyright 2026 The dtensor Authors.
//
// examples/mesh_tour.cc: four ranks of the in-process "local" backend build a
// (dp=2, tp=2) DeviceMesh and run real collectives along each mesh dim.
// No launcher needed: `./build/examples/mesh_tour`.
#include <iostream>
#include <mutex>
#include <sstream>

#include <ATen/ATen.h>

#include <dtensor/mesh/device_mesh.h>
#include <dtensor/mesh/local_communicator.h>
#include "absl/strings/str_join.h"

namespace {

std::string values_of(const at::Tensor& t) {
  const at::Tensor flat = t.to(at::kLong).reshape({-1});
  return "[" +
         absl::StrJoin(flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel(), ", ") +
         "]";
}

}  // namespace

int main() {
  constexpr int kWorldSize = 4;
  std::vector<std::string> reports(kWorldSize);
  dtensor::run_ranks(kWorldSize, [&](int rank) {
    dtensor::DeviceMesh mesh = dtensor::init_device_mesh("local", {2, 2}, {"dp", "tp"});
    std::ostringstream out;
    out << "rank " << rank << " at [" << absl::StrJoin(mesh.coordinate(), ", ") << "]"
        << "  tp group [" << absl::StrJoin(mesh.group_ranks(1), ", ") << "]"
        << "  dp group [" << absl::StrJoin(mesh.group_ranks(0), ", ") << "]\n";

    // Each rank holds [rank, rank]; summing over tp adds the two tp peers.
    at::Tensor tp_sum = at::full({2}, rank, at::kFloat);
    mesh.communicator(mesh.dim_index("tp"))->all_reduce(tp_sum, dtensor::ReduceOp::kSum);
    out << "    all_reduce(sum) over tp -> " << values_of(tp_sum) << "\n";

    // Gather every dp peer's rank, uneven on purpose: dp rank r sends r + 1 rows.
    auto& dp = mesh.communicator(mesh.dim_index("dp"));
    const std::vector<int64_t> rows = {1, 2};
    at::Tensor mine = at::full({rows[dp->rank()]}, rank, at::kLong);
    at::Tensor gathered = at::empty({3}, at::kLong);
    dp->all_gather_v(mine, gathered, rows);
    out << "    all_gather_v over dp (rows 1,2) -> " << values_of(gathered) << "\n";

    // One communicator over all four ranks.
    dtensor::DeviceMesh flat = mesh.flatten("dp_tp");
    at::Tensor everyone = at::full({1}, rank, at::kLong);
    flat.communicator(0)->all_reduce(everyone, dtensor::ReduceOp::kMax);
    out << "    flatten(\"dp_tp\") size " << flat.size() << ", all_reduce(max) -> "
        << values_of(everyone) << "\n";
    reports[rank] = out.str();
  });
  std::cout << "dtensor mesh tour: 4 ranks of the local backend as DeviceMesh((dp=2, tp=2))\n";
  for (const std::string& report : reports) std::cout << report;
  return 0;
}
