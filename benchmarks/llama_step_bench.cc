// Copyright 2026 The dtensor Authors.
//
// benchmarks/llama_step_bench.cc: one training step of the Llama-style model
// of examples/llama under each parallel plan, as dtensor runs it
// (parallelize_llama: DTensor parameters, the plan's styles as forward hooks)
// beside a hand-written Megatron plan of the same model: plain tensors
// holding each rank's shard, and the "f", "g", sequence gather/scatter,
// logits gather and vocabulary-parallel cross-entropy as autograd functions
// that call the communicators directly. The hand-written plan is the floor:
// per step, both report the collectives and the bytes of each rank's input
// buffers by kind, and the step time (forward, backward, gradient
// reductions, SGD update; the median over steps of the max over ranks).
// The losses are compared (step 0's with one device's, the last step's with
// each other): both train one model, or the program fails. Rank 0 prints a
// markdown table and, with --json=FILE, writes the same rows as JSON
// (benchmarks/make_results.py reads it). On the 2-D mesh (dp 2, tp 2) each
// plan runs over tp with every parameter fully sharded over dp
// (fully_shard: one group per block, the rest in the root's), beside the
// same Megatron plan with a hand-written ZeRO-3 over dp: per group one flat
// shard, one all-gather of it before the step, one reduce-scatter (averaged)
// of the group's flat gradient, SGD on the shard. fully_shard alone is
// measured by fsdp_step_bench.
//
//   build/benchmarks/llama_step_bench                        # 4 threads, local backend
//   mpirun -np 4 build/benchmarks/llama_step_bench --backend=mpi --json=llama.json
//   build/benchmarks/llama_step_bench --size=test --steps=2  # the tests' 2-layer model
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/autograd.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <dtensor/base/check.h>
#include <dtensor/dtensor.h>
#include <dtensor/mesh/communicator.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/nn/module_hooks.h>
#include <dtensor/nn/parallelize.h>
#include <dtensor/nn/reduce_gradients.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/collective_counter.h>
#include "benchmarks/bench_support.h"
#include "examples/llama/llama_parallel.h"

namespace dtensor::bench {
namespace {

using examples::Llama;
using examples::LlamaConfig;
using examples::LlamaPlan;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// ---------------------------------------------------------------------------
// The hand-written plan's collectives, counted as CollectiveCounter counts
// dtensor's: one per call, with the bytes of the rank's input buffer.

struct HandCounts {
  Counts calls, bytes;
};
thread_local HandCounts* hand_counts = nullptr;

void note(const char* kind, const at::Tensor& input) {
  if (hand_counts == nullptr) return;
  ++hand_counts->calls[kind];
  hand_counts->bytes[kind] += static_cast<int64_t>(input.nbytes());
}

Communicator& comm_of(AutogradContext* ctx) {
  return *reinterpret_cast<Communicator*>(ctx->saved_data["comm"].toInt());
}
int64_t handle(Communicator& comm) { return reinterpret_cast<int64_t>(&comm); }

at::Tensor all_reduce(Communicator& comm, const at::Tensor& x, ReduceOp op = ReduceOp::kSum) {
  at::Tensor out = x.contiguous().clone();
  note("all_reduce", out);
  comm.all_reduce(out, op);
  return out;
}

// All-gathers `x` along `dim` (rank order), through the leading dim.
at::Tensor all_gather(Communicator& comm, const at::Tensor& x, int64_t dim) {
  const at::Tensor front = x.movedim(dim, 0).contiguous();
  std::vector<int64_t> shape = front.sizes().vec();
  shape[0] *= comm.size();
  at::Tensor out = at::empty(shape, front.options());
  note("all_gather", front);
  comm.all_gather(front, out);
  return out.movedim(0, dim);
}

at::Tensor reduce_scatter(Communicator& comm, const at::Tensor& x, int64_t dim) {
  const at::Tensor front = x.movedim(dim, 0).contiguous();
  std::vector<int64_t> shape = front.sizes().vec();
  shape[0] /= comm.size();
  at::Tensor out = at::empty(shape, front.options());
  note("reduce_scatter", front);
  comm.reduce_scatter(front, out, ReduceOp::kSum);
  return out.movedim(0, dim);
}

at::Tensor my_chunk(Communicator& comm, const at::Tensor& x, int64_t dim) {
  return x.chunk(comm.size(), dim)[comm.rank()].contiguous();
}

// Megatron's "f": identity forward, all-reduce of the gradient.
struct CopyToTensorParallel : torch::autograd::Function<CopyToTensorParallel> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {all_reduce(comm_of(ctx), grads[0]), at::Tensor()};
  }
};

// Megatron's "g": all-reduce forward, identity backward.
struct ReduceFromTensorParallel : torch::autograd::Function<ReduceFromTensorParallel> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& x, int64_t comm) {
    return all_reduce(*reinterpret_cast<Communicator*>(comm), x);
  }
  static variable_list backward(AutogradContext*, variable_list grads) {
    return {grads[0], at::Tensor()};
  }
};

// Sequence parallel into a block: all-gather of dim 1, reduce-scatter back.
struct GatherSequence : torch::autograd::Function<GatherSequence> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return all_gather(*reinterpret_cast<Communicator*>(comm), x, 1);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {reduce_scatter(comm_of(ctx), grads[0], 1), at::Tensor()};
  }
};

// Sequence parallel out of a block: reduce-scatter of dim 1, all-gather back.
struct ScatterSequence : torch::autograd::Function<ScatterSequence> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return reduce_scatter(*reinterpret_cast<Communicator*>(comm), x, 1);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {all_gather(comm_of(ctx), grads[0], 1), at::Tensor()};
  }
};

// The head's logits gathered over the vocabulary; the gradient's own slice
// back.
struct GatherVocabulary : torch::autograd::Function<GatherVocabulary> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return all_gather(*reinterpret_cast<Communicator*>(comm), x, x.dim() - 1);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {my_chunk(comm_of(ctx), grads[0], grads[0].dim() - 1), at::Tensor()};
  }
};

// Megatron's vocabulary-parallel cross-entropy (mean over rows, no ignored
// targets): all-reduces of the row maxima, the target logits and the sums of
// exponentials; the backward is local.
struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits,
                            const at::Tensor& target, int64_t comm_handle) {
    Communicator& comm = *reinterpret_cast<Communicator*>(comm_handle);
    const int64_t count = logits.size(1), first = comm.rank() * count;
    const at::Tensor shifted =
        logits - all_reduce(comm, std::get<0>(logits.max(1)), ReduceOp::kMax).unsqueeze(1);
    const at::Tensor mine = target.ge(first).logical_and(target.lt(first + count));
    const at::Tensor index = (target - first).clamp(0, count - 1);
    const at::Tensor predicted =
        all_reduce(comm, at::where(mine, shifted.gather(1, index.unsqueeze(1)).squeeze(1),
                                   at::zeros({}, logits.options())));
    const at::Tensor sum_exp = all_reduce(comm, shifted.exp().sum(1));
    const at::Tensor softmax = shifted.exp() / sum_exp.unsqueeze(1);
    ctx->save_for_backward({softmax, index, mine});
    return (sum_exp.log() - predicted).mean();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor one_hot = at::zeros_like(saved[0]).scatter_(
        1, saved[1].unsqueeze(1), saved[2].to(saved[0].scalar_type()).unsqueeze(1));
    const double rows = static_cast<double>(saved[0].size(0));
    return {(saved[0] - one_hot) * (grads[0] / rows), at::Tensor(), at::Tensor()};
  }
};

// ---------------------------------------------------------------------------
// A hand-written ZeRO-3 group over the data-parallel ranks: its parameters'
// values live in one flat shard per rank (padded to divide evenly); the step
// gathers them with one all-gather and reduces their gradients with one
// reduce-scatter. Parameters whose gradients are pending sums over tp (the
// norms and the embedding under sequence parallelism) come first in the
// flat buffer, so that each rank's shard of them is one run, all-reduced
// over tp after the reduce-scatter (1/dp of the bytes).

class ZeroGroup {
 public:
  // `params`, the first `pending` of them pending over tp.
  ZeroGroup(Communicator& dp, std::vector<at::Tensor> params, size_t pending)
      : dp_(dp), params_(std::move(params)) {
    std::vector<at::Tensor> flat;
    for (size_t i = 0; i < params_.size(); ++i) {
      flat.push_back(params_[i].detach().reshape(-1));
      if (i < pending) pending_numel_ += params_[i].numel();
    }
    const at::Tensor whole = padded(at::cat(flat));
    const int64_t chunk = whole.numel() / dp_.size();
    shard_ = whole.narrow(0, dp_.rank() * chunk, chunk).clone();
  }

  // Points the parameters at a freshly gathered copy of the whole group.
  void unshard() {
    const at::Tensor whole = all_gather(dp_, shard_, 0);
    int64_t offset = 0;
    for (at::Tensor& p : params_) {
      p.set_data(whole.narrow(0, offset, p.numel()).view(p.sizes()));
      offset += p.numel();
    }
  }

  // This rank's shard of the group's gradients summed over dp; frees them.
  at::Tensor reduce_scatter_gradients() {
    std::vector<at::Tensor> grads;
    for (at::Tensor& p : params_) {
      grads.push_back(p.grad().reshape(-1));
      p.mutable_grad() = at::Tensor();
    }
    return reduce_scatter(dp_, padded(at::cat(grads)), 0);
  }

  // The part of a shard that holds gradients pending over tp: its first
  // elements.
  at::Tensor pending_part(const at::Tensor& shard) const {
    const int64_t before = dp_.rank() * shard_.numel();
    return shard.narrow(0, 0, std::clamp<int64_t>(pending_numel_ - before, 0, shard_.numel()));
  }

  // SGD on the shard with the dp average of `summed`.
  void update(const at::Tensor& summed, double learning_rate) {
    torch::NoGradGuard no_grad;
    shard_.sub_(summed.mul(learning_rate / static_cast<double>(dp_.size())));
  }

 private:
  at::Tensor padded(const at::Tensor& flat) const {
    const int64_t ranks = dp_.size();
    const int64_t size = (flat.numel() + ranks - 1) / ranks * ranks;
    return at::constant_pad_nd(flat, {0, size - flat.numel()});
  }

  Communicator& dp_;
  std::vector<at::Tensor> params_;
  int64_t pending_numel_ = 0;
  at::Tensor shard_;
};

// ---------------------------------------------------------------------------
// The two implementations of one step.

struct StepResult {
  double loss = 0;
  double last_loss = 0;  // of the last step measured (after the earlier steps' updates)
  double seconds = 0;
  Counts calls, bytes;
};

struct Setup {
  LlamaConfig config;
  LlamaPlan plan;
  DeviceMesh mesh;
  at::Tensor tokens, targets;  // the whole batch, on every rank
  double learning_rate = 1e-3;
};

// The rank threads of the local backend share libtorch's default generator:
// whatever draws from it (module constructors) holds this.
std::mutex generator_mutex;

Llama seeded_model(const LlamaConfig& config) {
  std::lock_guard<std::mutex> lock(generator_mutex);
  at::manual_seed(7);
  Llama model(config);
  model->to(at::kFloat);  // the rotary tables are made in float64
  return model;
}

void sgd_step(torch::nn::Module& model, double learning_rate) {
  torch::NoGradGuard no_grad;
  for (at::Tensor& p : model.parameters()) {
    p.sub_(p.grad().mul(learning_rate));
    p.mutable_grad() = at::Tensor();
  }
}

// The seconds of `step()` on the slowest rank.
template <typename Step>
double timed(Communicator& world, Step&& step) {
  world.barrier();
  const auto start = std::chrono::steady_clock::now();
  step();
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  at::Tensor seconds = at::full({1}, elapsed.count(), at::kDouble);
  world.all_reduce(seconds, ReduceOp::kMax);
  return seconds.item<double>();
}

class DTensorStep {
 public:
  explicit DTensorStep(const Setup& s) : s_(s), model_(seeded_model(s.config)) {
    examples::parallelize_llama(model_, s.mesh, s.plan);
    tokens_ = examples::llama_batch(s.tokens, s.mesh);
    targets_ = examples::llama_batch(s.targets, s.mesh);
  }

  StepResult run() {
    StepResult result;
    at::Tensor loss;
    {
      CollectiveCounter counter;
      result.seconds = timed(*s_.mesh.world(), [&] {
        loss = model_->loss(tokens_, targets_);
        loss.backward();
        nn::reduce_gradients(model_->parameters());
        sgd_step(*model_, s_.learning_rate);
      });
      result.calls = {counter.by_collective().begin(), counter.by_collective().end()};
      result.bytes = {counter.bytes_by_collective().begin(), counter.bytes_by_collective().end()};
    }
    result.loss = examples::llama_loss_value(loss, s_.mesh);  // logging, not the step
    return result;
  }

 private:
  const Setup& s_;
  Llama model_;
  at::Tensor tokens_, targets_;
};

class MegatronStep {
 public:
  explicit MegatronStep(const Setup& s)
      : s_(s),
        tp_(*s.mesh.communicator(s.mesh.ndim() - 1)),
        model_(seeded_model(local_config(s.config, tp_.size()))) {
    std::unique_lock<std::mutex> lock(generator_mutex);  // the Linear draws its weights
    model_->output = model_->replace_module(
        "output",
        torch::nn::Linear(
            torch::nn::LinearOptions(s.config.dim, s.config.vocab / tp_.size()).bias(false)));
    lock.unlock();
    copy_shards_of(seeded_model(s.config));
    add_hooks();
    tokens_ = s.tokens;
    targets_ = s.targets;
    if (s.mesh.ndim() == 2) {
      dp_ = s.mesh.communicator(0).get();
      tokens_ = my_chunk(*dp_, tokens_, 0);
      targets_ = my_chunk(*dp_, targets_, 0);
      make_zero_groups();
    }
    if (s.plan == LlamaPlan::kSequenceParallel) tokens_ = my_chunk(tp_, tokens_, 1);
  }

  StepResult run() {
    StepResult result;
    HandCounts counts;
    hand_counts = &counts;
    at::Tensor loss;
    result.seconds = timed(*s_.mesh.world(), [&] {
      for (ZeroGroup& group : zero_groups_) group.unshard();
      loss = loss_of();
      loss.backward();
      if (zero_groups_.empty()) {
        reduce_gradients();
        sgd_step(*model_, s_.learning_rate);
      } else {
        reduce_and_update_zero_groups();
      }
    });
    hand_counts = nullptr;
    result.calls = counts.calls;
    result.bytes = counts.bytes;
    // Logging, not the step: the whole batch's loss, the mean of the dp
    // ranks' means.
    result.loss = dp_ == nullptr ? loss.item<double>()
                                 : all_reduce(*dp_, loss.detach()).item<double>() / dp_->size();
    return result;
  }

 private:
  static LlamaConfig local_config(LlamaConfig config, int64_t tp) {
    config.head_dim = config.dim / config.heads;
    config.heads /= tp;
    config.kv_heads /= tp;
    config.ffn_hidden /= tp;
    return config;
  }

  // Each parameter is this rank's shard of the whole model's.
  void copy_shards_of(const Llama& whole) {
    torch::NoGradGuard no_grad;
    const auto full = whole->named_parameters();
    for (auto& parameter : model_->named_parameters()) {
      const std::string& name = parameter.key();
      at::Tensor value = full[name];
      const auto ends_with = [&](const char* suffix) {
        const std::string s = suffix;
        return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
      };
      for (const char* colwise :
           {"wq.weight", "wk.weight", "wv.weight", "w1.weight", "w3.weight"}) {
        if (ends_with(colwise)) value = my_chunk(tp_, value, 0);
      }
      if (ends_with("wo.weight") || ends_with("w2.weight")) value = my_chunk(tp_, value, 1);
      if (name == "output.weight") value = my_chunk(tp_, value, 0);
      parameter->copy_(value);
    }
  }

  // Whether the plan leaves `name`'s gradient a pending sum over tp (the
  // norms and the embedding see split sequences under SP).
  bool pending_over_tp(const std::string& name) const {
    return s_.plan == LlamaPlan::kSequenceParallel &&
           (name.find("norm") != std::string::npos || name == "tok_embeddings.weight");
  }

  // The groups fully_shard makes in the 2-D plans: one per block, the rest
  // in the root's; in each, the parameters pending over tp first.
  void make_zero_groups() {
    std::map<std::string, std::vector<std::vector<at::Tensor>>> by_group;  // pending, others
    for (const auto& parameter : model_->named_parameters(/*recurse=*/true)) {
      const std::string& name = parameter.key();
      const std::string group =
          name.rfind("layers.", 0) == 0 ? name.substr(0, name.find('.', 7)) : "";
      auto& lists = by_group.try_emplace(group, 2).first->second;
      lists[pending_over_tp(name) ? 0 : 1].push_back(parameter.value());
    }
    for (auto& [group, lists] : by_group) {
      const size_t pending = lists[0].size();
      lists[0].insert(lists[0].end(), lists[1].begin(), lists[1].end());
      zero_groups_.emplace_back(*dp_, lists[0], pending);
    }
  }

  // Per group one reduce-scatter over dp; then the shards of the gradients
  // pending over tp, all groups' in one all-reduce over tp; then SGD.
  void reduce_and_update_zero_groups() {
    std::vector<at::Tensor> shards, pending;
    for (ZeroGroup& group : zero_groups_) {
      shards.push_back(group.reduce_scatter_gradients());
      pending.push_back(group.pending_part(shards.back()));
    }
    if (s_.plan == LlamaPlan::kSequenceParallel) reduce_bucket(tp_, pending, ReduceOp::kSum);
    for (size_t i = 0; i < shards.size(); ++i) {
      zero_groups_[i].update(shards[i], s_.learning_rate);
    }
  }

  template <typename Function>
  static nn::ForwardHook apply_with(Communicator& comm) {
    return [&comm](const at::Tensor& x) { return Function::apply(x, handle(comm)); };
  }

  void add_hooks() {
    const bool sequence = s_.plan == LlamaPlan::kSequenceParallel;
    for (const auto& layer : *model_->layers) {
      auto* block = layer->as<examples::BlockImpl>();
      for (torch::nn::Module* into : {static_cast<torch::nn::Module*>(block->attention.get()),
                                      static_cast<torch::nn::Module*>(block->feed_forward.get())}) {
        nn::register_forward_pre_hook(*into, sequence ? apply_with<GatherSequence>(tp_)
                                                      : apply_with<CopyToTensorParallel>(tp_));
      }
      for (torch::nn::Module* out :
           {static_cast<torch::nn::Module*>(block->attention->wo.get()),
            static_cast<torch::nn::Module*>(block->feed_forward->w2.get())}) {
        nn::register_forward_hook(*out, sequence ? apply_with<ScatterSequence>(tp_)
                                                 : apply_with<ReduceFromTensorParallel>(tp_));
      }
    }
    nn::register_forward_pre_hook(*model_->output, sequence
                                                       ? apply_with<GatherSequence>(tp_)
                                                       : apply_with<CopyToTensorParallel>(tp_));
    if (s_.plan != LlamaPlan::kLossParallel) {
      nn::register_forward_hook(*model_->output, apply_with<GatherVocabulary>(tp_));
    }
  }

  at::Tensor loss_of() {
    if (s_.plan != LlamaPlan::kLossParallel) return model_->loss(tokens_, targets_);
    const at::Tensor logits = model_->forward(tokens_);
    return VocabParallelCrossEntropy::apply(logits.reshape({-1, logits.size(-1)}),
                                            targets_.reshape({-1}), handle(tp_));
  }

  // One bucket: the norms' and the embedding's gradients summed over the
  // sequence split (SP).
  void reduce_gradients() {
    std::vector<at::Tensor> pending;
    for (auto& parameter : model_->named_parameters()) {
      if (pending_over_tp(parameter.key())) pending.push_back(parameter->mutable_grad());
    }
    if (!pending.empty()) reduce_bucket(tp_, pending, ReduceOp::kSum);
  }

  static void reduce_bucket(Communicator& comm, const std::vector<at::Tensor>& grads, ReduceOp op) {
    std::vector<at::Tensor> flat;
    for (const at::Tensor& g : grads) flat.push_back(g.reshape(-1));
    const at::Tensor reduced = all_reduce(comm, at::cat(flat), op);
    int64_t offset = 0;
    torch::NoGradGuard no_grad;
    for (const at::Tensor& g : grads) {
      g.copy_(reduced.slice(0, offset, offset + g.numel()).view_as(g));
      offset += g.numel();
    }
  }

  const Setup& s_;
  Communicator& tp_;
  Communicator* dp_ = nullptr;  // on the 2-D mesh
  Llama model_;
  std::vector<ZeroGroup> zero_groups_;
  at::Tensor tokens_, targets_;
};

// ---------------------------------------------------------------------------
// The run.

struct Options {
  std::string backend = "local";
  int ranks = 4;
  int steps = 10;
  std::string size = "bench";  // or "test": the tests' model
  std::string json;            // where rank 0 writes the rows as JSON; empty: nowhere
};

LlamaConfig config_of(const std::string& size) {
  if (size == "test") return LlamaConfig{};
  DTENSOR_CHECK(size == "bench", "llama_step_bench: --size: expected test or bench, found ", size);
  LlamaConfig config;
  config.vocab = 2048;
  config.dim = 256;
  config.heads = 8;
  config.kv_heads = 8;
  config.ffn_hidden = 704;
  config.max_seq = 128;
  return config;
}

// One printed row: a plan on a mesh under one implementation.
struct Row {
  std::string plan, mesh, implementation;
  StepResult result;
};

// The rows of the table with the run's settings.
void write_rows(const Options& options, int ranks, double one_device_loss,
                const std::vector<Row>& rows) {
  JsonObject context;
  context.string("backend", options.backend)
      .integer("ranks", ranks)
      .string("size", options.size)
      .integer("steps", options.steps)
      .number("one_device_loss", one_device_loss);
  std::vector<JsonObject> objects;
  for (const Row& row : rows) {
    objects.emplace_back()
        .string("plan", row.plan)
        .string("mesh", row.mesh)
        .string("implementation", row.implementation)
        .number("step_ms", row.result.seconds * 1e3)
        .number("loss", row.result.loss)
        .counts("collectives", row.result.calls)
        .counts("bytes", row.result.bytes);
  }
  write_json(options.json, "llama_step_bench", context, objects);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Runs `steps` steps of `impl` after one warm-up step; returns the warm-up
// step's loss and counts, the last step's loss and the median time.
template <typename Impl>
StepResult measure(Impl& impl, int steps) {
  StepResult first = impl.run();
  std::vector<double> seconds;
  for (int i = 0; i < steps; ++i) {
    const StepResult step = impl.run();
    seconds.push_back(step.seconds);
    first.last_loss = step.loss;
  }
  first.seconds = median(seconds);
  return first;
}

// Both implementations train one model: the same loss as one device at
// step 0, and the same change of the loss over the updates (float32 sums in
// different orders: relative tolerances; the change, ~1e-4 of the loss per
// step at this learning rate, is what a wrong update would alter).
void check_same_model(const std::string& plan, double one_device_loss, const StepResult& ours,
                      const StepResult& floor) {
  const auto close = [](double a, double b, double relative) {
    return std::abs(a - b) <= relative * std::abs(b) + 1e-6;
  };
  const double our_change = ours.last_loss - ours.loss;
  const double floor_change = floor.last_loss - floor.loss;
  DTENSOR_CHECK(close(ours.loss, one_device_loss, 1e-5) &&
                    close(floor.loss, one_device_loss, 1e-5) && std::abs(floor_change) > 1e-5 &&
                    close(our_change, floor_change, 0.02),
                "llama_step_bench: ", plan,
                ": expected dtensor and the hand-written plan to train one model (step 0 losses ",
                one_device_loss, " as one device; equal changes of the loss over the steps), ",
                "found step 0 losses ", ours.loss, " and ", floor.loss, ", changes ", our_change,
                " and ", floor_change);
}

void run_rank(const Options& options, int rank) {
  const LlamaConfig config = config_of(options.size);
  const int64_t batch = 4, seq = options.size == "test" ? 8 : 128;
  at::Generator data = at::detail::createCPUGenerator(11);
  const at::Tensor tokens = at::randint(config.vocab, {batch, seq}, data, at::kLong);
  const at::Tensor targets = tokens.roll(-1, 1);
  std::vector<std::pair<LlamaPlan, std::vector<int64_t>>> cases;
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{4}, std::vector<int64_t>{2, 2}}) {
    for (LlamaPlan plan :
         {LlamaPlan::kTensorParallel, LlamaPlan::kSequenceParallel, LlamaPlan::kLossParallel}) {
      cases.emplace_back(plan, shape);
    }
  }
  double one_device_loss = 0;
  {
    Llama one_device = seeded_model(config);
    one_device_loss = one_device->loss(tokens, targets).item<double>();
    if (rank == 0) std::printf("One device, step 0: loss %.6f\n\n", one_device_loss);
  }
  if (rank == 0) {
    std::printf(
        "| plan | mesh | implementation | collectives per step | KiB sent per step | step ms | "
        "loss (step 0) |\n");
    std::printf("|---|---|---|---|---|---|---|\n");
  }
  std::vector<Row> rows;
  int ranks = 0;
  for (const auto& [plan, shape] : cases) {
    const std::vector<std::string> names =
        shape.size() == 2 ? std::vector<std::string>{"dp", "tp"} : std::vector<std::string>{"tp"};
    const Setup setup{config, plan, init_device_mesh(options.backend, shape, names), tokens,
                      targets};
    DTensorStep dtensor_step(setup);
    MegatronStep megatron_step(setup);
    const StepResult ours = measure(dtensor_step, options.steps);
    const StepResult floor = measure(megatron_step, options.steps);
    check_same_model(examples::plan_name(plan) + " on " + setup.mesh.to_string(), one_device_loss,
                     ours, floor);
    if (rank != 0) continue;
    ranks = static_cast<int>(setup.mesh.world()->size());
    for (const auto& [name, r] :
         {std::pair<const char*, const StepResult&>{"dtensor", ours},
          {setup.mesh.ndim() == 2 ? "hand-written Megatron + ZeRO-3" : "hand-written Megatron",
           floor}}) {
      rows.push_back({examples::plan_name(plan), setup.mesh.to_string(), name, r});
      std::printf("| %s | %s | %s | %lld: %s | %.1f: %s | %.2f | %.6f |\n",
                  examples::plan_name(plan).c_str(), setup.mesh.to_string().c_str(), name,
                  static_cast<long long>(total(r.calls)), counts_text(r.calls, false).c_str(),
                  total(r.bytes) / 1024.0, counts_text(r.bytes, true).c_str(), r.seconds * 1e3,
                  r.loss);
    }
    std::fflush(stdout);
  }
  if (rank == 0 && !options.json.empty()) write_rows(options, ranks, one_device_loss, rows);
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&](const char* flag) -> std::optional<std::string> {
      const std::string prefix = std::string(flag) + "=";
      if (arg.rfind(prefix, 0) != 0) return std::nullopt;
      return arg.substr(prefix.size());
    };
    if (auto v = value("--backend")) {
      options.backend = *v;
    } else if (auto v = value("--ranks")) {
      options.ranks = std::stoi(*v);
    } else if (auto v = value("--steps")) {
      options.steps = std::stoi(*v);
    } else if (auto v = value("--size")) {
      options.size = *v;
    } else if (auto v = value("--json")) {
      options.json = *v;
    } else {
      DTENSOR_CHECK(false,
                    "llama_step_bench: expected --backend=local|mpi, --ranks=N, --steps=N, "
                    "--size=test|bench or --json=FILE, found ",
                    arg);
    }
  }
  return options;
}

}  // namespace
}  // namespace dtensor::bench

int main(int argc, char** argv) {
  const dtensor::bench::Options options = dtensor::bench::parse(argc, argv);
  if (options.backend == "local") {
    dtensor::run_ranks(options.ranks, [&](int rank) { dtensor::bench::run_rank(options, rank); });
  } else {
    const dtensor::DeviceMesh world = dtensor::init_device_mesh(options.backend, {4});
    dtensor::bench::run_rank(options, static_cast<int>(world.world()->rank()));
  }
  return 0;
}
