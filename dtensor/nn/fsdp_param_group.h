// Copyright 2026 The dtensor Authors.
//
// dtensor/nn/fsdp_param_group.h: the state behind one fully_shard call
// (dtensor/nn/fully_shard.h): its parameters sharded and gathered, the flat
// buffers its collectives move, and the model-wide accounting its groups
// share. Internal to the nn layer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <dtensor/mesh/device_mesh.h>
#include <dtensor/nn/fully_shard.h>
#include <dtensor/placements/spec.h>

namespace dtensor::nn::nn_internal {

// One parameter of a group.
struct FsdpParam {
  std::weak_ptr<torch::nn::Module> owner;
  std::string name;  // as registered on `owner`
  std::string path;  // from the fully_shard'ed module, for messages
  // Registered on the owner: a DTensor leaf, the optimizer's.
  at::Tensor sharded;
  // What forward reads (the owner's member points here while gathered): a
  // plain leaf, or a DTensor leaf on the tp mesh; in param_dtype. Its
  // storage is freed while the group is sharded.
  at::Tensor unsharded;
  // The plain tensor holding `unsharded`'s data (itself, or its local
  // shard), whose storage is freed and refilled.
  at::Tensor unsharded_data;
  // The spec of `unsharded` when it is a DTensor.
  DTensorSpecPtr tp_spec;
  // Rows of `unsharded_data` (dim 0) and elements per row; each rank
  // stores torch.chunk's rows of them, padded to `chunk_rows` in the flat
  // buffers.
  int64_t rows = 0;
  int64_t row_numel = 0;
  int64_t chunk_rows = 0;
  int64_t flat_offset = 0;  // in a rank's segment of the flat buffers
};

class FsdpParamGroup;

// What the groups of one model share: the end-of-backward callback, and
// the bytes of gathered parameters held (for FSDPModule::unsharded_bytes).
struct FsdpModelState {
  std::vector<std::weak_ptr<FsdpParamGroup>> groups;
  // The groups in the order their forward ran, learnt until the first
  // backward ends; from then on, while prefetching is on, each group
  // prefetches its neighbour's all-gather (the next in forward, the previous
  // in backward).
  std::vector<std::weak_ptr<FsdpParamGroup>> forward_order;
  bool forward_order_known = false;
  // Off only to measure what prefetching hides (FSDPModule::set_prefetch).
  bool prefetch = true;
  bool final_callback_queued = false;
  int64_t unsharded_bytes = 0;
  int64_t peak_unsharded_bytes = 0;
};

class FsdpParamGroup : public std::enable_shared_from_this<FsdpParamGroup> {
 public:
  // A group of `params` (their `unsharded` tensors allocated, which this
  // frees: a group starts sharded) on the data-parallel `mesh`.
  static std::shared_ptr<FsdpParamGroup> create(DeviceMesh mesh, FullyShardOptions options,
                                                std::vector<FsdpParam> params);

  const std::vector<FsdpParam>& params() const { return params_; }
  const std::shared_ptr<FsdpModelState>& model_state() const { return model_state_; }
  // Makes this group (and the groups already sharing its state) share `state`.
  void join(const std::shared_ptr<FsdpModelState>& state);
  // A group fully_shard'ed inside this group's module.
  void add_child(std::shared_ptr<FsdpParamGroup> child) { children_.push_back(std::move(child)); }
  // Calls `visit` on this group and every group inside it.
  void for_each_in_subtree(const std::function<void(FsdpParamGroup&)>& visit);

  bool unsharded() const { return unsharded_; }
  // Issues the all-gather of every shard (on CUDA meshes without waiting for
  // it: the caller's next kernels overlap with it); unshard() finishes it.
  // No-op when gathered or issued.
  void start_unshard();
  // Gathers (or finishes the gather start_unshard issued) and points the
  // owners' members at the gathered parameters. No-op when gathered.
  void unshard();
  // Frees the gathered parameters; points the members at the shards.
  void reshard();

  // The hooks fully_shard registers (dtensor/nn/module_hooks.h).
  at::Tensor pre_forward(const at::Tensor& input);
  at::Tensor post_forward(const at::Tensor& output);
  // Reduce-scatters the gathered parameters' gradients into the shards'
  // (unless gradient sync is off), then reshards if set to.
  void post_backward();

  void set_requires_gradient_sync(bool value) { requires_gradient_sync_ = value; }
  bool reshard_after_forward() const { return options_.reshard_after_forward; }
  void set_reshard_after_backward(bool value) { reshard_after_backward_ = value; }

  // Queues, once per backward, the callback that finishes every group of
  // the model when the backward ends. Called from inside a backward.
  void queue_final_callback();

 private:
  FsdpParamGroup(DeviceMesh mesh, FullyShardOptions options, std::vector<FsdpParam> params);
  int64_t segment_numel() const;  // a rank's part of the flat buffers
  // Makes the shards views of `sharded_flat_`, each at its offset, so that
  // the all-gather reads them where they are (as PyTorch's FSDP2 does).
  void store_shards_in_one_buffer();
  c10::ScalarType param_dtype() const;  // what the gathered parameters compute in
  c10::ScalarType reduce_dtype() const;
  // Starts the all-gather of the neighbour `step` places away in forward
  // order, once the order is known and while prefetching is on.
  void prefetch(int step);
  std::vector<int64_t> shard_versions() const;
  void allocate_unsharded();
  void point_members_at(bool gathered);
  // `param`'s gathered gradient as the plain tensor of its unsharded data's
  // shape (a tp gradient laid out as the parameter; a pending sum over tp
  // where the parameter is replicated stays one).
  at::Tensor local_gradient(const FsdpParam& param) const;
  at::Tensor packed_gradients() const;
  void accumulate_sharded_gradients(const at::Tensor& reduced);
  void account(int64_t bytes);

  DeviceMesh mesh_;  // the data-parallel mesh (1-D, or 2-D for HSDP)
  FullyShardOptions options_;
  std::vector<FsdpParam> params_;
  // This rank's shards, each padded to chunk_rows rows (the padding stays
  // zero): the all-gather's input.
  at::Tensor sharded_flat_;
  std::shared_ptr<FsdpModelState> model_state_;
  std::vector<std::shared_ptr<FsdpParamGroup>> children_;
  bool unsharded_ = false;
  bool requires_gradient_sync_ = true;
  bool reshard_after_backward_ = true;
  // Forward calls whose input gradient has not arrived yet.
  int64_t pending_backwards_ = 0;
  // An issued all-gather (a DTensor being redistributed to Replicate), and
  // the shards' versions it read: an update in between (an optimizer step)
  // makes it stale.
  at::Tensor pending_gather_;
  std::vector<int64_t> pending_versions_;
};

}  // namespace dtensor::nn::nn_internal
