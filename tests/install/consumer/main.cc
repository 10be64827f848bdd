// Uses the installed headers (every one as <dtensor/...>) and library: a 2x2
// mesh on the local backend, one all-reduce per mesh dim, and a DTensor
// redistributed and reassembled. Prints "consumer ok" when every value is
// right.
#include <atomic>
#include <iostream>

#include <ATen/ATen.h>

#include <dtensor/dtensor.h>
#include <dtensor/mesh/communicator.h>
#include <dtensor/mesh/device_mesh.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>

int main() {
  std::atomic<int> correct{0};
  const at::Tensor global = at::arange(35, at::kFloat).reshape({7, 5});
  dtensor::run_ranks(4, [&](int rank) {
    dtensor::DeviceMesh mesh = dtensor::init_device_mesh("local", {2, 2}, {"dp", "tp"});
    at::Tensor t = at::full({1}, rank, at::kLong);
    mesh.communicator(1)->all_reduce(t, dtensor::ReduceOp::kSum);
    const dtensor::DTensor d =
        dtensor::distribute_tensor(global, mesh, dtensor::parse_placements("S(0),S(1)"));
    const at::Tensor back = d.redistribute(dtensor::parse_placements("S(1),S(0)")).full_tensor();
    if (t.item<int64_t>() == (rank < 2 ? 1 : 5) && at::equal(back, global)) ++correct;
  });
  if (correct != 4) {
    std::cerr << "consumer: wrong results on " << 4 - correct << " ranks\n";
    return 1;
  }
  std::cout << "consumer ok\n";
  return 0;
}
