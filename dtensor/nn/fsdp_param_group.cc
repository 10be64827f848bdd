// Copyright 2026 The dtensor Authors.
#include <dtensor/nn/fsdp_param_group.h>

#include <algorithm>
#include <utility>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/engine.h>

#include <dtensor/base/check.h>
#include <dtensor/dtensor.h>
#include <dtensor/nn/module_parameters.h>
#include <dtensor/nn/reduce_gradients.h>
#include <dtensor/placements/partial.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/placements/shard.h>

namespace dtensor::nn::nn_internal {
namespace {

// Gathered parameters are freed and refilled in place, as PyTorch's FSDP
// does: autograd saved them for backward (the same TensorImpl must come
// back), and a group's memory is held only while it computes.
void resize_storage(const at::Tensor& tensor, size_t nbytes) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(storage->allocator()->allocate(nbytes));
  storage->set_nbytes(nbytes);
}

size_t storage_bytes(const at::Tensor& tensor) {
  return static_cast<size_t>(tensor.numel()) * tensor.element_size();
}

// A tensor on `tensor`'s storage with a version counter of its own: filling
// a gathered parameter must not look like an in-place change to the
// autograd graphs that saved it (PyTorch's FSDP preserves the counter).
at::Tensor writable_alias(const at::Tensor& tensor) {
  return at::empty({0}, tensor.options())
      .set_(tensor.storage(), tensor.storage_offset(), tensor.sizes(), tensor.strides());
}

// The flat buffers' placements on the data-parallel mesh: the last dim
// shards, a leading one (HSDP) replicates.
std::vector<PlacementPtr> flat_placements(const DeviceMesh& mesh, const PlacementPtr& last) {
  std::vector<PlacementPtr> placements(mesh.ndim(), Replicate::make());
  placements.back() = last;
  return placements;
}

// Copies between a parameter's rows ([rows, row_numel]) and its blocks in
// a flat buffer viewed [ranks, segment]: rank r's block holds rows
// [r * chunk_rows, (r + 1) * chunk_rows) (torch.chunk's), padded to
// chunk_rows. One strided copy for the ranks whose block is full, one for
// the rank holding the rest; `to_blocks` also zeroes the padding.
void copy_rows(const at::Tensor& by_rank, const FsdpParam& param, const at::Tensor& rows,
               bool to_blocks) {
  const int64_t ranks = by_rank.size(0);
  const int64_t chunk = param.chunk_rows;
  const at::Tensor blocks = by_rank.narrow(1, param.flat_offset, chunk * param.row_numel)
                                .view({ranks, chunk, param.row_numel});
  const int64_t full = chunk == 0 ? 0 : param.rows / chunk;
  const int64_t rest = param.rows - full * chunk;
  auto copy = [&](const at::Tensor& block_part, const at::Tensor& row_part) {
    to_blocks ? block_part.copy_(row_part) : row_part.copy_(block_part);
  };
  if (full > 0) {
    copy(blocks.narrow(0, 0, full),
         rows.narrow(0, 0, full * chunk).view({full, chunk, param.row_numel}));
  }
  if (rest > 0) copy(blocks[full].narrow(0, 0, rest), rows.narrow(0, full * chunk, rest));
  if (!to_blocks) return;
  if (rest > 0) blocks[full].narrow(0, rest, chunk - rest).zero_();
  const int64_t first_empty = full + (rest > 0 ? 1 : 0);
  if (first_empty < ranks) blocks.narrow(0, first_empty, ranks - first_empty).zero_();
}

}  // namespace

std::shared_ptr<FsdpParamGroup> FsdpParamGroup::create(DeviceMesh mesh, FullyShardOptions options,
                                                       std::vector<FsdpParam> params) {
  std::shared_ptr<FsdpParamGroup> group(
      new FsdpParamGroup(std::move(mesh), options, std::move(params)));
  group->model_state_->groups.push_back(group);
  group->store_shards_in_one_buffer();
  for (const FsdpParam& param : group->params_) {
    resize_storage(param.unsharded_data, 0);
    if (!param.unsharded.requires_grad()) continue;
    // Any gradient reaching a gathered parameter means a backward is
    // running: the model's end-of-backward callback must be queued.
    param.unsharded.register_hook([weak = std::weak_ptr<FsdpParamGroup>(group)](const at::Tensor&) {
      if (std::shared_ptr<FsdpParamGroup> alive = weak.lock()) alive->queue_final_callback();
    });
  }
  return group;
}

FsdpParamGroup::FsdpParamGroup(DeviceMesh mesh, FullyShardOptions options,
                               std::vector<FsdpParam> params)
    : mesh_(std::move(mesh)),
      options_(options),
      params_(std::move(params)),
      model_state_(std::make_shared<FsdpModelState>()) {
  int64_t offset = 0;
  for (FsdpParam& param : params_) {
    param.flat_offset = offset;
    offset += param.chunk_rows * param.row_numel;
    const c10::ScalarType first = DTensor(params_.front().sharded).dtype();
    DTENSOR_CHECK(DTensor(param.sharded).dtype() == first,
                  "fully_shard: expected the parameters of a group in one dtype (one buffer holds ",
                  "their shards, one all-gather moves them), found ", first, " for '",
                  params_.front().path, "' and ", DTensor(param.sharded).dtype(), " for '",
                  param.path, "'; fully_shard them separately");
  }
}

void FsdpParamGroup::store_shards_in_one_buffer() {
  if (params_.empty()) return;
  at::NoGradGuard no_grad;
  const DTensor first(params_.front().sharded);
  sharded_flat_ =
      at::zeros({segment_numel()}, at::TensorOptions().dtype(first.dtype()).device(mesh_.device()));
  for (FsdpParam& param : params_) {
    const DTensor shard(param.sharded);
    const at::Tensor local = shard.to_local();
    at::Tensor slot = sharded_flat_.narrow(0, param.flat_offset, local.numel()).view(local.sizes());
    slot.copy_(local);
    param.sharded = DTensor(slot, shard.spec_ptr()).tensor();
  }
}

void FsdpParamGroup::join(const std::shared_ptr<FsdpModelState>& state) {
  if (model_state_ == state) return;
  const std::shared_ptr<FsdpModelState> old = model_state_;
  for (const std::weak_ptr<FsdpParamGroup>& weak : old->groups) {
    if (std::shared_ptr<FsdpParamGroup> group = weak.lock()) {
      group->model_state_ = state;
      state->groups.push_back(group);
    }
  }
  state->unsharded_bytes += old->unsharded_bytes;
  state->prefetch = state->prefetch && old->prefetch;
}

void FsdpParamGroup::for_each_in_subtree(const std::function<void(FsdpParamGroup&)>& visit) {
  visit(*this);
  for (const std::shared_ptr<FsdpParamGroup>& child : children_) child->for_each_in_subtree(visit);
}

int64_t FsdpParamGroup::segment_numel() const {
  return params_.empty()
             ? 0
             : params_.back().flat_offset + params_.back().chunk_rows * params_.back().row_numel;
}

c10::ScalarType FsdpParamGroup::param_dtype() const {
  return options_.mp_policy.param_dtype.value_or(sharded_flat_.scalar_type());
}

c10::ScalarType FsdpParamGroup::reduce_dtype() const {
  return options_.mp_policy.reduce_dtype.value_or(param_dtype());
}

void FsdpParamGroup::account(int64_t bytes) {
  model_state_->unsharded_bytes += bytes;
  model_state_->peak_unsharded_bytes =
      std::max(model_state_->peak_unsharded_bytes, model_state_->unsharded_bytes);
}

std::vector<int64_t> FsdpParamGroup::shard_versions() const {
  std::vector<int64_t> versions;
  for (const FsdpParam& param : params_) versions.push_back(param.sharded._version());
  return versions;
}

void FsdpParamGroup::start_unshard() {
  if (unsharded_ || params_.empty() || pending_gather_.defined()) return;
  at::NoGradGuard no_grad;
  const c10::ScalarType dtype = param_dtype();
  // The shards' own buffer when no cast is needed: nothing is packed.
  const at::Tensor segment = sharded_flat_.to(dtype);
  auto spec = std::make_shared<const DTensorSpec>(
      mesh_, flat_placements(mesh_, Shard::make(0)),
      std::vector<int64_t>{segment_numel() * mesh_.size(-1)}, dtype);
  RedistributeOptions async;
  async.async_op = true;
  pending_gather_ = DTensor(segment, spec)
                        .redistribute(flat_placements(mesh_, Replicate::make()), async)
                        .tensor();
  pending_versions_ = shard_versions();
}

void FsdpParamGroup::prefetch(int step) {
  if (!model_state_->forward_order_known || !model_state_->prefetch) return;
  const auto& order = model_state_->forward_order;
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i].lock().get() != this) continue;
    const int64_t neighbour = static_cast<int64_t>(i) + step;
    if (neighbour < 0 || neighbour >= static_cast<int64_t>(order.size())) return;
    if (std::shared_ptr<FsdpParamGroup> group = order[neighbour].lock()) group->start_unshard();
    return;
  }
}

void FsdpParamGroup::allocate_unsharded() {
  for (const FsdpParam& param : params_) {
    resize_storage(param.unsharded_data, storage_bytes(param.unsharded_data));
    account(static_cast<int64_t>(storage_bytes(param.unsharded_data)));
  }
}

void FsdpParamGroup::point_members_at(bool gathered) {
  for (const FsdpParam& param : params_) {
    std::shared_ptr<torch::nn::Module> owner = param.owner.lock();
    if (owner)
      rebind_parameter_members(*owner, param.name, gathered ? param.unsharded : param.sharded);
  }
}

void FsdpParamGroup::unshard() {
  if (unsharded_ || params_.empty()) return;
  at::NoGradGuard no_grad;
  if (pending_gather_.defined() && pending_versions_ != shard_versions()) {
    pending_gather_.reset();  // gathered before the shards changed
  }
  start_unshard();
  const at::Tensor gathered = DTensor(pending_gather_).to_local();
  pending_gather_.reset();
  allocate_unsharded();
  const int64_t ranks = mesh_.size(-1);
  const at::Tensor by_rank = gathered.view({ranks, segment_numel()});
  for (const FsdpParam& param : params_) {
    copy_rows(by_rank, param,
              writable_alias(param.unsharded_data).view({param.rows, param.row_numel}),
              /*to_blocks=*/false);
  }
  point_members_at(true);
  unsharded_ = true;
}

void FsdpParamGroup::reshard() {
  if (!unsharded_) return;
  for (const FsdpParam& param : params_) {
    account(-static_cast<int64_t>(storage_bytes(param.unsharded_data)));
    resize_storage(param.unsharded_data, 0);
  }
  point_members_at(false);
  unsharded_ = false;
}

at::Tensor FsdpParamGroup::pre_forward(const at::Tensor& input) {
  FsdpModelState& state = *model_state_;
  if (!state.forward_order_known &&
      std::none_of(
          state.forward_order.begin(), state.forward_order.end(),
          [this](const std::weak_ptr<FsdpParamGroup>& g) { return g.lock().get() == this; })) {
    state.forward_order.push_back(weak_from_this());
  }
  unshard();
  prefetch(+1);
  if (!c10::GradMode::is_enabled() || !input.defined() || !input.requires_grad()) return input;
  // The gradient of the module's input is complete once the module's whole
  // backward ran: its arrival ends the group's backward.
  at::Tensor marked = input.view_as(input);
  ++pending_backwards_;
  marked.register_hook([weak = weak_from_this()](const at::Tensor&) {
    std::shared_ptr<FsdpParamGroup> group = weak.lock();
    if (group && --group->pending_backwards_ == 0) group->post_backward();
  });
  return marked;
}

at::Tensor FsdpParamGroup::post_forward(const at::Tensor& output) {
  if (options_.reshard_after_forward) reshard();
  if (!c10::GradMode::is_enabled() || !output.defined() || !output.requires_grad()) return output;
  // The output's gradient arrives before any of the module's backward runs:
  // gather again there.
  at::Tensor marked = output.view_as(output);
  marked.register_hook([weak = weak_from_this()](const at::Tensor&) {
    std::shared_ptr<FsdpParamGroup> group = weak.lock();
    if (!group) return;
    group->queue_final_callback();
    group->unshard();
    group->prefetch(-1);
  });
  return marked;
}

at::Tensor FsdpParamGroup::local_gradient(const FsdpParam& param) const {
  const at::Tensor grad = param.unsharded.grad();
  if (!grad.defined() || !param.tp_spec) return grad;
  DTensor gradient(grad);
  const PlacementPtr& wanted = param.tp_spec->placements().front();
  const PlacementPtr& found = gradient.placements().front();
  if (!found->equals(*wanted) && !(found->is_partial() && wanted->is_replicate())) {
    gradient = gradient.redistribute({wanted});
  }
  return gradient.to_local();
}

at::Tensor FsdpParamGroup::packed_gradients() const {
  const int64_t ranks = mesh_.size(-1);
  at::Tensor packed = at::empty({ranks, segment_numel()},
                                at::TensorOptions().dtype(reduce_dtype()).device(mesh_.device()));
  for (const FsdpParam& param : params_) {
    const at::Tensor local = local_gradient(param);
    if (local.defined()) {
      copy_rows(packed, param, local.reshape({param.rows, param.row_numel}), /*to_blocks=*/true);
    } else {
      packed.narrow(1, param.flat_offset, param.chunk_rows * param.row_numel).zero_();
    }
  }
  return packed.view({-1});
}

void FsdpParamGroup::accumulate_sharded_gradients(const at::Tensor& reduced) {
  for (const FsdpParam& param : params_) {
    const at::Tensor grad = param.unsharded.grad();
    if (!grad.defined()) continue;
    const DTensor sharded(param.sharded);
    const std::vector<int64_t>& shape = sharded.spec().local_layout().local_shape;
    const int64_t numel = c10::multiply_integers(shape);
    at::Tensor local = reduced.narrow(0, param.flat_offset, numel).view(shape).to(sharded.dtype());
    // A gradient left as a pending sum over tp (a replicated parameter used
    // on split activations) stays one in the shard; the end of backward
    // reduces the model's together.
    DTensorSpecPtr spec = sharded.spec_ptr();
    if (param.tp_spec && is_dtensor(grad)) {
      std::vector<PlacementPtr> placements = sharded.placements();
      const DTensor gradient(grad);
      const PlacementPtr& tp_placement = gradient.placements().front();
      if (tp_placement->is_partial()) {
        placements[sharded.mesh().dim_index(param.tp_spec->mesh().dim_names().front())] =
            tp_placement;
        spec = std::make_shared<const DTensorSpec>(sharded.spec().with_placements(placements));
      }
    }
    at::Tensor incoming = DTensor(local, spec).tensor();
    at::Tensor& current = param.sharded.mutable_grad();
    current = current.defined() ? current + incoming : incoming;
  }
}

void FsdpParamGroup::post_backward() {
  pending_backwards_ = 0;
  bool any_gradient = false;
  for (const FsdpParam& param : params_) any_gradient |= param.unsharded.grad().defined();
  if (any_gradient && requires_gradient_sync_) {
    at::NoGradGuard no_grad;
    auto spec = std::make_shared<const DTensorSpec>(
        mesh_, std::vector<PlacementPtr>(mesh_.ndim(), Partial::make()),
        std::vector<int64_t>{segment_numel() * mesh_.size(-1)}, reduce_dtype());
    const at::Tensor reduced = DTensor(packed_gradients(), spec)
                                   .redistribute(flat_placements(mesh_, Shard::make(0)))
                                   .to_local();
    // Each rank's loss is the mean over its own batch: the average over the
    // data-parallel ranks is the gradient of the whole batch's mean.
    reduced.div_(static_cast<double>(mesh_.size()));
    accumulate_sharded_gradients(reduced);
    for (FsdpParam& param : params_) param.unsharded.mutable_grad() = at::Tensor();
  }
  if (reshard_after_backward_) reshard();
}

void FsdpParamGroup::queue_final_callback() {
  if (model_state_->final_callback_queued) return;
  model_state_->final_callback_queued = true;
  torch::autograd::Engine::get_default_engine().queue_callback([state = model_state_] {
    state->final_callback_queued = false;
    state->forward_order_known = true;
    std::vector<at::Tensor> sharded;
    for (const std::weak_ptr<FsdpParamGroup>& weak : state->groups) {
      std::shared_ptr<FsdpParamGroup> group = weak.lock();
      if (!group) continue;
      group->post_backward();
      for (const FsdpParam& param : group->params()) sharded.push_back(param.sharded);
    }
    // Pending sums over tp left in the shards (replicated parameters used on
    // split activations) are reduced in one bucket for the whole model, as a
    // hand-written plan does, not one per group.
    reduce_gradients(sharded);
  });
}

}  // namespace dtensor::nn::nn_internal
