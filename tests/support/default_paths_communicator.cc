// Copyright 2026 The dtensor Authors.
#include "tests/support/default_paths_communicator.h"

#include <ATen/ATen.h>

#include <dtensor/mesh/local_communicator.h>

namespace dtensor::testing {
namespace {

// The primitives go to `inner` as flat tensors: the element counts the
// defaults pass are then row counts.
class DefaultPathsCommunicator final : public Communicator {
 public:
  explicit DefaultPathsCommunicator(std::shared_ptr<Communicator> inner)
      : inner_(std::move(inner)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string_view backend_name() const override { return "local_default_paths"; }
  c10::Device device() const override { return inner_->device(); }
  CollectiveCosts costs() const override { return inner_->costs(); }

 protected:
  void do_all_reduce(const at::Tensor& input, at::Tensor& output, ReduceOp op) override {
    inner_->all_reduce(input, output, op);
  }
  void do_all_gather(const at::Tensor& input, at::Tensor& output) override {
    inner_->all_gather(input, output);
  }
  void do_all_gather_v(const at::Tensor& input, at::Tensor& output,
                       const std::vector<int64_t>& numel_per_rank) override {
    at::Tensor flat = output.view({-1});
    inner_->all_gather_v(input.reshape({-1}), flat, numel_per_rank);
  }
  void do_reduce_scatter(const at::Tensor& input, at::Tensor& output, ReduceOp op) override {
    inner_->reduce_scatter(input, output, op);
  }
  void do_reduce_scatter_v(const at::Tensor& input, at::Tensor& output,
                           const std::vector<int64_t>& numel_per_rank, ReduceOp op) override {
    at::Tensor flat = output.view({-1});
    inner_->reduce_scatter_v(input.reshape({-1}), flat, numel_per_rank, op);
  }
  void do_all_to_all(const at::Tensor& input, at::Tensor& output) override {
    inner_->all_to_all(input, output);
  }
  void do_all_to_all_v(const at::Tensor& input, const std::vector<int64_t>& send_numel,
                       at::Tensor& output, const std::vector<int64_t>& recv_numel) override {
    at::Tensor flat = output.view({-1});
    inner_->all_to_all_v(input.reshape({-1}), send_numel, flat, recv_numel);
  }
  void do_broadcast(at::Tensor& tensor, int root) override { inner_->broadcast(tensor, root); }
  void do_scatter(const at::Tensor& input, at::Tensor& output, int root) override {
    inner_->scatter(input, output, root);
  }
  void do_send(const at::Tensor& tensor, int peer, int tag) override {
    inner_->send(tensor, peer, tag);
  }
  void do_recv(at::Tensor& tensor, int peer, int tag) override { inner_->recv(tensor, peer, tag); }
  void do_barrier() override { inner_->barrier(); }
  std::shared_ptr<Communicator> do_split(int color, int key) override {
    std::shared_ptr<Communicator> part = inner_->split(color, key);
    if (part == nullptr) return nullptr;
    return std::make_shared<DefaultPathsCommunicator>(std::move(part));
  }

 private:
  std::shared_ptr<Communicator> inner_;
};

}  // namespace

// One per rank thread and local world, as every backend's world is one
// object (meshes on other world objects are other meshes).
std::shared_ptr<Communicator> default_paths_world() {
  thread_local std::shared_ptr<Communicator> inner, world;
  std::shared_ptr<Communicator> current = local_world();
  if (current != inner) {
    inner = current;
    world = std::make_shared<DefaultPathsCommunicator>(std::move(current));
  }
  return world;
}

void register_default_paths_backend() {
  static const bool registered [[maybe_unused]] =
      register_communicator_backend("local_default_paths", &default_paths_world);
}

}  // namespace dtensor::testing
