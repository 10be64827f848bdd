// Uses the installed headers and library: a 2x2 mesh on the local backend and
// one all-reduce per mesh dim. Prints "consumer ok" when every value is right.
#include <atomic>
#include <iostream>

#include <ATen/ATen.h>

#include <dtensor/mesh/device_mesh.h>
#include <dtensor/mesh/local_communicator.h>

int main() {
  std::atomic<int> correct{0};
  dtensor::run_ranks(4, [&](int rank) {
    dtensor::DeviceMesh mesh = dtensor::init_device_mesh("local", {2, 2}, {"dp", "tp"});
    at::Tensor t = at::full({1}, rank, at::kLong);
    mesh.communicator(1)->all_reduce(t, dtensor::ReduceOp::kSum);
    if (t.item<int64_t>() == (rank < 2 ? 1 : 5)) ++correct;
  });
  if (correct != 4) {
    std::cerr << "consumer: wrong all_reduce results on " << 4 - correct << " ranks\n";
    return 1;
  }
  std::cout << "consumer ok\n";
  return 0;
}
