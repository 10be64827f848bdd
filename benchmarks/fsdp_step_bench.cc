// Copyright 2026 The dtensor Authors.
//
// benchmarks/fsdp_step_bench.cc: one data-parallel training step of a stack
// of residual MLP blocks, as dtensor's fully_shard runs it (each block one
// group, the root's input and output layers one more) beside a hand-written
// ZeRO-3 step of the same model: plain tensors, each rank storing a flat,
// padded shard per group; before a group computes, one all-gather of its
// flat shard into a flat buffer whose views are the parameters; after its
// forward the buffer is freed (when resharding) and gathered again for its
// backward; once its backward is done, one reduce-scatter (averaged) of its
// flat gradient; then SGD on the flat shards. The blocks are autograd
// functions that keep their forward's graph and run it in backward. The
// hand-written step is the floor: per step, both report the collectives and
// the bytes of each rank's input buffers by kind, and the step time
// (forward, backward, reductions, SGD update; the median over steps of the
// max over ranks), with and without reshard_after_forward. Step 0's losses,
// and every parameter after the last step, must agree (else exit 1). Rank 0
// prints a markdown table and, with --json=FILE, writes the same rows as
// JSON (benchmarks/make_results.py reads it).
//
//   build/benchmarks/fsdp_step_bench                        # 4 threads, local backend
//   mpirun -np 4 build/benchmarks/fsdp_step_bench --backend=mpi --steps=10
//   # on one GPU, the overhead above the collectives (one-rank groups keep them):
//   mpirun -np 1 -x DTENSOR_SINGLE_RANK_COLLECTIVES=1 build/benchmarks/fsdp_step_bench
//       --backend=nccl --ranks=1
//   build/benchmarks/fsdp_step_bench --size=test --steps=1  # a tiny model
//   build/benchmarks/fsdp_step_bench --rows=4               # 4 rows per rank (default 64)
//   build/benchmarks/fsdp_step_bench --json=fsdp.json       # the rows as JSON too
//
// With --prefetch it measures instead what prefetching hides (only on CUDA,
// where an all-gather runs on its own stream beside the compute kernels;
// CPU backends finish each collective inside the call): fully_shard's
// resharding step with prefetching on and off (FSDPModule::set_prefetch),
// alternating, beside the step's all-gathers issued alone in the same
// order; hidden = step time off - on, as a share of the gathers' time.
//   mpirun -np 2 build/benchmarks/fsdp_step_bench --backend=nccl --ranks=2 --prefetch
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/autograd.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <dtensor/base/check.h>
#include <dtensor/dtensor.h>
#include <dtensor/mesh/communicator.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/nn/fully_shard.h>
#include <dtensor/nn/module_hooks.h>
#include <dtensor/redistribute/collective_counter.h>
#include "benchmarks/bench_support.h"

namespace dtensor::bench {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// ---------------------------------------------------------------------------
// The model: input layer, residual MLP blocks, output layer; children are
// called through dtensor::nn::call, where fully_shard's hooks run.

struct Config {
  int64_t in = 0, hidden = 0, ffn = 0, out = 0, blocks = 0, rows_per_rank = 0;
};

class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const Config& c) {
    up = register_module("up", torch::nn::Linear(c.hidden, c.ffn));
    down = register_module("down", torch::nn::Linear(c.ffn, c.hidden));
  }
  at::Tensor forward(const at::Tensor& x) { return x + nn::call(down, at::tanh(nn::call(up, x))); }
  torch::nn::Linear up{nullptr}, down{nullptr};
};
TORCH_MODULE(Block);

class StackImpl : public torch::nn::Module {
 public:
  explicit StackImpl(const Config& c) {
    input = register_module("input", torch::nn::Linear(c.in, c.hidden));
    for (int64_t b = 0; b < c.blocks; ++b) {
      layers.push_back(register_module("layers_" + std::to_string(b), Block(c)));
    }
    output = register_module("output", torch::nn::Linear(c.hidden, c.out));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor h = nn::call(input, x);
    for (Block& block : layers) h = nn::call(block, h);
    return nn::call(output, h);
  }
  torch::nn::Linear input{nullptr}, output{nullptr};
  std::vector<Block> layers;
};
TORCH_MODULE(Stack);

// The rank threads of the local backend share libtorch's default generator:
// the model is drawn under this lock.
std::mutex generator_mutex;

Stack seeded_model(const Config& config, const at::Device& device) {
  std::lock_guard<std::mutex> lock(generator_mutex);
  at::manual_seed(7);
  Stack model(config);
  model->to(device);
  return model;
}

at::Tensor mse(const at::Tensor& output, const at::Tensor& target) {
  return (output - target).pow(2).mean();
}

// ---------------------------------------------------------------------------
// The hand-written ZeRO-3 step's collectives, counted as CollectiveCounter
// counts dtensor's: one per call, with the bytes of the rank's input buffer.

struct HandCounts {
  Counts calls, bytes;

  void note(const char* kind, const at::Tensor& input) {
    ++calls[kind];
    bytes[kind] += static_cast<int64_t>(input.nbytes());
  }
};

// Frees or refills `tensor`'s storage in place: autograd saved the
// parameters (views of it) for backward, so the same storage must come back.
void resize_storage(const at::Tensor& tensor, size_t nbytes) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(storage->allocator()->allocate(nbytes));
  storage->set_nbytes(nbytes);
}

// `tensor`'s memory under a version counter of its own: gathering into it
// is no in-place change to the graphs that saved the parameters.
at::Tensor writable_alias(const at::Tensor& tensor) {
  return at::empty({0}, tensor.options())
      .set_(tensor.storage(), tensor.storage_offset(), tensor.sizes(), tensor.strides());
}

// One group: this rank's flat shard of the group's parameters, laid end to
// end and padded to a multiple of the ranks, and the full flat buffer that
// one all-gather fills, whose views the modules' members point at.
class FlatGroup {
 public:
  FlatGroup(Communicator& comm, bool reshard_after_forward)
      : comm_(comm), reshard_after_forward_(reshard_after_forward) {}

  // Adds `linear`'s weight and bias; their values are copied by `build`.
  void add(const std::string& name, torch::nn::LinearImpl& linear) {
    members_.push_back({name + ".weight", &linear.weight, at::Tensor()});
    members_.push_back({name + ".bias", &linear.bias, at::Tensor()});
  }

  // Lays the members out flat, keeps this rank's shard, and points the
  // members at views of the (freed) full buffer.
  void build() {
    at::NoGradGuard no_grad;
    int64_t numel = 0;
    for (const Member& m : members_) numel += m.tensor->numel();
    segment_ = (numel + comm_.size() - 1) / comm_.size();
    full_ = at::zeros({segment_ * comm_.size()}, options());
    int64_t offset = 0;
    for (Member& m : members_) {
      const at::Tensor view = full_.narrow(0, offset, m.tensor->numel()).view(m.tensor->sizes());
      view.copy_(m.tensor->detach());
      m.leaf = view.detach().requires_grad_(true);
      *m.tensor = m.leaf;
      offset += m.tensor->numel();
    }
    shard_ = full_.narrow(0, comm_.rank() * segment_, segment_).clone();
    resize_storage(full_, 0);
  }

  bool reshard_after_forward() const { return reshard_after_forward_; }
  // Where this group's collectives are counted; nullptr: nowhere. Held per
  // group, not per thread: on CUDA, backward runs on libtorch's device
  // threads.
  void count_into(HandCounts* counts) { counts_ = counts; }

  void gather() {
    if (gathered_) return;
    resize_storage(full_, full_.nbytes());
    at::Tensor into = writable_alias(full_);
    if (counts_ != nullptr) counts_->note("all_gather", shard_);
    comm_.all_gather(shard_, into);
    gathered_ = true;
  }

  void release() {
    resize_storage(full_, 0);
    gathered_ = false;
  }

  std::vector<at::Tensor> parameters() const {
    std::vector<at::Tensor> leaves;
    for (const Member& m : members_) leaves.push_back(m.leaf);
    return leaves;
  }

  // Packs `grads` (one per parameter) flat and reduce-scatters their
  // average into this rank's gradient shard.
  void reduce(const std::vector<at::Tensor>& grads) {
    at::Tensor flat = at::empty({segment_ * comm_.size()}, options());
    int64_t offset = 0;
    for (const at::Tensor& g : grads) {
      flat.narrow(0, offset, g.numel()).copy_(g.reshape({-1}));
      offset += g.numel();
    }
    flat.narrow(0, offset, flat.numel() - offset).zero_();
    grad_shard_ = at::empty({segment_}, options());
    if (counts_ != nullptr) counts_->note("reduce_scatter", flat);
    comm_.reduce_scatter(flat, grad_shard_, ReduceOp::kAvg);
  }

  void sgd_step(double learning_rate) {
    shard_.sub_(grad_shard_.mul(learning_rate));
    grad_shard_ = at::Tensor();
  }

  // Every parameter's value by name (one uncounted all-gather).
  std::map<std::string, at::Tensor> full_values() {
    gather();
    std::map<std::string, at::Tensor> values;
    for (const Member& m : members_) values[m.name] = m.leaf.detach().clone();
    release();
    return values;
  }

 private:
  at::TensorOptions options() const { return at::TensorOptions(at::kFloat).device(comm_.device()); }

  struct Member {
    std::string name;
    at::Tensor* tensor;  // the module's member forward reads
    at::Tensor leaf;     // a view of full_
  };
  Communicator& comm_;
  bool reshard_after_forward_;
  std::vector<Member> members_;
  int64_t segment_ = 0;
  at::Tensor shard_, grad_shard_, full_;
  bool gathered_ = false;
  HandCounts* counts_ = nullptr;
};

// A block of the hand-written step: forward gathers its group, computes
// with autograd on (the graph is kept) and frees the group; backward
// gathers again, runs the kept graph and reduce-scatters the parameters'
// gradients.
struct ShardedBlock : torch::autograd::Function<ShardedBlock> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t block_handle,
                            int64_t group_handle) {
    auto& block = *reinterpret_cast<BlockImpl*>(block_handle);
    auto& group = *reinterpret_cast<FlatGroup*>(group_handle);
    group.gather();
    at::AutoGradMode grad_mode(true);
    const at::Tensor input = x.detach().requires_grad_(true);
    const at::Tensor output = block.forward(input);
    ctx->saved_data["input"] = input;
    ctx->saved_data["output"] = output;
    ctx->saved_data["group"] = group_handle;
    if (group.reshard_after_forward()) group.release();
    return output.detach();
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto& group = *reinterpret_cast<FlatGroup*>(ctx->saved_data["group"].toInt());
    group.gather();
    variable_list inputs = {ctx->saved_data["input"].toTensor()};
    for (const at::Tensor& p : group.parameters()) inputs.push_back(p);
    variable_list input_grads =
        torch::autograd::grad({ctx->saved_data["output"].toTensor()}, inputs, {grads[0]});
    group.reduce({input_grads.begin() + 1, input_grads.end()});
    group.release();
    return {input_grads[0], at::Tensor(), at::Tensor()};
  }
};

// ---------------------------------------------------------------------------
// The two implementations of one step.

// A step's time and its phases' (forward; backward with the gradient
// reductions; SGD update), each the slowest rank's.
struct Seconds {
  double step = 0, forward = 0, backward = 0, update = 0;
};

struct StepResult {
  double loss = 0;
  Seconds seconds;
  Counts calls, bytes;
};

struct Setup {
  Config config;
  DeviceMesh mesh;
  at::Tensor x, y;  // this rank's rows of the batch
  bool reshard_after_forward = true;
  double learning_rate = 1e-2;
};

// Times `step(lap)`, which calls `lap()` after its forward and after its
// backward: each phase's seconds and the step's on the slowest rank. Each
// lap first waits for the device (CUDA under NCCL).
template <typename Step>
Seconds timed(const std::shared_ptr<Communicator>& comm, Step&& step) {
  const RankContext ctx = make_context(comm, /*every_rank_decides=*/false, "fsdp_step_bench");
  Communicator& world = *comm;
  world.barrier();
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  std::vector<Clock::time_point> laps;
  const auto lap = [&] {
    synchronize_device(ctx);
    laps.push_back(Clock::now());
  };
  step(lap);
  lap();
  DTENSOR_CHECK(laps.size() == 3, "fsdp_step_bench: expected 2 laps in a step, found ",
                laps.size() - 1);
  const auto between = [](Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double>(to - from).count();
  };
  at::Tensor seconds = at::tensor({between(start, laps[2]), between(start, laps[0]),
                                   between(laps[0], laps[1]), between(laps[1], laps[2])},
                                  at::kDouble)
                           .to(world.device());
  world.all_reduce(seconds, ReduceOp::kMax);
  seconds = seconds.cpu();
  const auto* s = seconds.data_ptr<double>();
  return {s[0], s[1], s[2], s[3]};
}

// The whole batch's loss: the mean of the ranks' means (logging, not the step).
double batch_loss(Communicator& world, const at::Tensor& loss) {
  at::Tensor value = loss.detach().clone().view({1});
  world.all_reduce(value, ReduceOp::kAvg);
  return value.item<double>();
}

class FullyShardStep {
 public:
  explicit FullyShardStep(const Setup& s) : s_(s), model_(seeded_model(s.config, s.mesh.device())) {
    const nn::FullyShardOptions options{.reshard_after_forward = s.reshard_after_forward};
    for (Block& block : model_->layers) nn::fully_shard(*block, s.mesh, options);
    root_ = nn::fully_shard(*model_, s.mesh, options);
  }

  void set_prefetch(bool prefetch) { root_->set_prefetch(prefetch); }

  // The step's 9 all-gathers alone, in its order: the root's and every
  // block's (the forward's), then every block's again, last first (the
  // backward's), each group freed once gathered.
  Seconds gathers_alone() {
    const auto gather = [](const nn::FSDPModule& group) {
      group.unshard();
      group.reshard();
    };
    return timed(s_.mesh.world(), [&](auto lap) {
      gather(*root_);
      for (const Block& block : model_->layers) gather(nn::fsdp_module(*block));
      lap();
      for (auto block = model_->layers.rbegin(); block != model_->layers.rend(); ++block) {
        gather(nn::fsdp_module(**block));
      }
      lap();
    });
  }

  StepResult run() {
    StepResult result;
    at::Tensor loss;
    {
      CollectiveCounter counter;
      result.seconds = timed(s_.mesh.world(), [&](auto lap) {
        loss = mse(model_->forward(s_.x), s_.y);
        lap();
        loss.backward();
        lap();
        sgd_step();
      });
      result.calls = {counter.by_collective().begin(), counter.by_collective().end()};
      result.bytes = {counter.bytes_by_collective().begin(), counter.bytes_by_collective().end()};
    }
    result.loss = batch_loss(*s_.mesh.world(), loss);
    return result;
  }

  std::map<std::string, at::Tensor> full_values() const {
    std::map<std::string, at::Tensor> values;
    for (const auto& p : model_->named_parameters()) values[p.key()] = DTensor(*p).full_tensor();
    return values;
  }

 private:
  void sgd_step() {
    torch::NoGradGuard no_grad;
    for (at::Tensor& p : model_->parameters()) {
      p.sub_(p.grad().mul(s_.learning_rate));
      p.mutable_grad() = at::Tensor();
    }
  }

  const Setup s_;
  Stack model_;
  std::optional<nn::FSDPModule> root_;
};

class Zero3Step {
 public:
  explicit Zero3Step(const Setup& s)
      : s_(s), comm_(*s.mesh.communicator(0)), model_(seeded_model(s.config, s.mesh.device())) {
    groups_.reserve(model_->layers.size() + 1);
    for (size_t b = 0; b < model_->layers.size(); ++b) {
      FlatGroup& group = groups_.emplace_back(comm_, s.reshard_after_forward);
      const std::string name = "layers_" + std::to_string(b);
      group.add(name + ".up", *model_->layers[b]->up);
      group.add(name + ".down", *model_->layers[b]->down);
    }
    FlatGroup& root = groups_.emplace_back(comm_, s.reshard_after_forward);
    root.add("input", *model_->input);
    root.add("output", *model_->output);
    for (FlatGroup& group : groups_) group.build();
  }

  StepResult run() {
    StepResult result;
    HandCounts counts;
    for (FlatGroup& group : groups_) group.count_into(&counts);
    at::Tensor loss;
    result.seconds = timed(s_.mesh.communicator(0), [&](auto lap) {
      loss = mse(forward(s_.x), s_.y);
      lap();
      loss.backward();
      reduce_root();
      lap();
      for (FlatGroup& group : groups_) group.sgd_step(s_.learning_rate);
    });
    for (FlatGroup& group : groups_) group.count_into(nullptr);
    result.calls = counts.calls;
    result.bytes = counts.bytes;
    result.loss = batch_loss(comm_, loss);
    return result;
  }

  std::map<std::string, at::Tensor> full_values() {
    std::map<std::string, at::Tensor> values;
    for (FlatGroup& group : groups_) values.merge(group.full_values());
    return values;
  }

 private:
  // The root's group is gathered for the whole step (PyTorch's root is
  // never resharded after forward); the blocks gather their own.
  at::Tensor forward(const at::Tensor& x) {
    groups_.back().gather();
    at::Tensor h = model_->input->forward(x);
    for (size_t b = 0; b < model_->layers.size(); ++b) {
      h = ShardedBlock::apply(h, reinterpret_cast<int64_t>(model_->layers[b].get()),
                              reinterpret_cast<int64_t>(&groups_[b]));
    }
    return model_->output->forward(h);
  }

  void reduce_root() {
    FlatGroup& root = groups_.back();
    std::vector<at::Tensor> grads;
    for (at::Tensor& p : root.parameters()) {
      grads.push_back(p.grad());
      p.mutable_grad() = at::Tensor();
    }
    root.reduce(grads);
    root.release();
  }

  const Setup s_;
  Communicator& comm_;
  Stack model_;
  std::vector<FlatGroup> groups_;  // the blocks', then the root's
};

// ---------------------------------------------------------------------------
// The run.

struct Options {
  std::string backend = "local";
  int ranks = 4;
  int steps = 10;
  std::string size = "bench";  // or "test": a tiny model with uneven shards
  int64_t rows = 0;            // rows of the batch per rank; 0: the size's
  std::string json;            // where rank 0 writes the rows as JSON; empty: nowhere
  bool prefetch = false;       // measure prefetching instead
};

Config config_of(const std::string& size) {
  if (size == "test")
    return Config{.in = 6, .hidden = 10, .ffn = 20, .out = 3, .blocks = 2, .rows_per_rank = 2};
  DTENSOR_CHECK(size == "bench", "fsdp_step_bench: --size: expected test or bench, found ", size);
  return Config{.in = 512, .hidden = 512, .ffn = 2048, .out = 16, .blocks = 4, .rows_per_rank = 64};
}

double median(std::vector<Seconds> all, double Seconds::*phase) {
  std::sort(all.begin(), all.end(),
            [&](const Seconds& a, const Seconds& b) { return a.*phase < b.*phase; });
  return all[all.size() / 2].*phase;
}

// Runs `steps` steps of `impl` after one warm-up step; returns the warm-up
// step's loss and counts with the median time.
template <typename Impl>
StepResult measure(Impl& impl, int steps) {
  StepResult first = impl.run();
  std::vector<Seconds> seconds;
  for (int i = 0; i < steps; ++i) seconds.push_back(impl.run().seconds);
  for (double Seconds::*phase :
       {&Seconds::step, &Seconds::forward, &Seconds::backward, &Seconds::update}) {
    first.seconds.*phase = median(seconds, phase);
  }
  return first;
}

// The largest difference between the two steps' parameters; throws if one
// is not within float tolerance.
double max_difference(const std::map<std::string, at::Tensor>& ours,
                      const std::map<std::string, at::Tensor>& floor) {
  DTENSOR_CHECK(ours.size() == floor.size(), "fsdp_step_bench: ", ours.size(), " parameters vs ",
                floor.size());
  double most = 0;
  for (const auto& [name, value] : ours) {
    const at::Tensor& other = floor.at(name);
    most = std::max(most, (value - other).abs().max().item<double>());
    DTENSOR_CHECK(at::allclose(value, other, 1e-4, 1e-6), "fsdp_step_bench: parameter ", name,
                  " differs after the steps by ", (value - other).abs().max().item<double>());
  }
  return most;
}

void print_row(const char* name, bool reshard, const StepResult& r) {
  std::printf("| %s | %s | %lld: %s | %.1f: %s | %.2f | %.2f / %.2f / %.2f | %.6f |\n", name,
              reshard ? "true" : "false", static_cast<long long>(total(r.calls)),
              counts_text(r.calls, false).c_str(), total(r.bytes) / 1024.0,
              counts_text(r.bytes, true).c_str(), r.seconds.step * 1e3, r.seconds.forward * 1e3,
              r.seconds.backward * 1e3, r.seconds.update * 1e3, r.loss);
}

JsonObject json_row(const char* name, bool reshard, const StepResult& r) {
  JsonObject row;
  row.string("implementation", name)
      .boolean("reshard_after_forward", reshard)
      .number("step_ms", r.seconds.step * 1e3)
      .number("forward_ms", r.seconds.forward * 1e3)
      .number("backward_ms", r.seconds.backward * 1e3)
      .number("update_ms", r.seconds.update * 1e3)
      .number("loss", r.loss)
      .counts("collectives", r.calls)
      .counts("bytes", r.bytes);
  return row;
}

JsonObject context_json(const Options& options, const Config& config) {
  JsonObject context;
  context.string("backend", options.backend)
      .integer("ranks", options.ranks)
      .integer("rows_per_rank", config.rows_per_rank)
      .string("size", options.size)
      .integer("steps", options.steps);
  return context;
}

// fully_shard's resharding step with prefetching on and off, timed in
// turns so that drift hits both alike, beside its all-gathers alone.
void measure_prefetch(const Options& options, const Config& config, const Setup& setup, int rank) {
  FullyShardStep step(setup);
  std::map<bool, std::vector<Seconds>> by_prefetch;
  std::vector<Seconds> gathers;
  for (int i = -1; i < options.steps; ++i) {  // i = -1: warm-up, and learns the order
    // Which goes first alternates: neither always runs on a warmer cache.
    for (const bool prefetch : {i % 2 == 0, i % 2 != 0}) {
      step.set_prefetch(prefetch);
      const Seconds seconds = step.run().seconds;
      if (i >= 0) by_prefetch[prefetch].push_back(seconds);
    }
    const Seconds alone = step.gathers_alone();
    if (i >= 0) gathers.push_back(alone);
  }
  if (rank != 0) return;
  const auto medians = [](const std::vector<Seconds>& all) {
    return Seconds{median(all, &Seconds::step), median(all, &Seconds::forward),
                   median(all, &Seconds::backward), median(all, &Seconds::update)};
  };
  const Seconds on = medians(by_prefetch[true]), off = medians(by_prefetch[false]);
  const Seconds alone = medians(gathers);
  std::printf("| fully_shard, reshard_after_forward | step ms | forward ms | backward ms |\n");
  std::printf("|---|---|---|---|\n");
  std::vector<JsonObject> table_rows;
  for (const auto& [name, s] : {std::pair<const char*, const Seconds&>{"prefetch on", on},
                                {"prefetch off", off},
                                {"its all-gathers alone", alone}}) {
    std::printf("| %s | %.3f | %.3f | %.3f |\n", name, s.step * 1e3, s.forward * 1e3,
                s.backward * 1e3);
    JsonObject row;
    row.string("case", name)
        .number("step_ms", s.step * 1e3)
        .number("forward_ms", s.forward * 1e3)
        .number("backward_ms", s.backward * 1e3);
    table_rows.push_back(std::move(row));
  }
  const double hidden = off.step - on.step;
  // Of the 9 all-gathers, 6 can be prefetched: the root's and the first
  // group's in each direction have nothing before them.
  std::printf("\nHidden by prefetching: %.3f ms per step, %.0f%% of the all-gathers' %.3f ms\n",
              hidden * 1e3, 100 * hidden / alone.step, alone.step * 1e3);
  if (!options.json.empty()) {
    write_json(options.json, "fsdp_step_bench --prefetch", context_json(options, config),
               table_rows);
  }
}

void run_rank(const Options& options, int rank) {
  Config config = config_of(options.size);
  if (options.rows > 0) config.rows_per_rank = options.rows;
  const DeviceMesh mesh = init_device_mesh(options.backend, {options.ranks}, {"dp"});
  at::Generator data = at::detail::createCPUGenerator(11);
  const int64_t rows = config.rows_per_rank * options.ranks;
  const at::Tensor x =
      at::randn({rows, config.in}, data).chunk(options.ranks)[rank].to(mesh.device());
  const at::Tensor y =
      at::randn({rows, config.out}, data).chunk(options.ranks)[rank].to(mesh.device());
  if (options.prefetch) {
    measure_prefetch(options, config, Setup{config, mesh, x, y, /*reshard_after_forward=*/true},
                     rank);
    return;
  }
  if (rank == 0) {
    std::printf(
        "| implementation | reshard_after_forward | collectives per step | "
        "KiB sent per step | step ms | forward / backward / update ms | loss (step 0) |\n");
    std::printf("|---|---|---|---|---|---|---|\n");
  }
  // Every fully_shard'ed model lives to the end: fully_shard's registry
  // still knows a dead model's modules (their hooks keep its groups alive)
  // and refuses a new module at a reused address.
  std::list<FullyShardStep> fully_shard_steps;
  std::vector<double> differences;
  std::vector<JsonObject> table_rows;
  for (const bool reshard : {true, false}) {
    const Setup setup{config, mesh, x, y, reshard};
    FullyShardStep& fully_shard_step = fully_shard_steps.emplace_back(setup);
    Zero3Step zero3_step(setup);
    const StepResult ours = measure(fully_shard_step, options.steps);
    const StepResult floor = measure(zero3_step, options.steps);
    DTENSOR_CHECK(std::abs(ours.loss - floor.loss) <= 1e-5 * (1 + std::abs(floor.loss)),
                  "fsdp_step_bench: step 0 losses differ: fully_shard ", ours.loss,
                  ", hand-written ", floor.loss);
    differences.push_back(max_difference(fully_shard_step.full_values(), zero3_step.full_values()));
    if (rank != 0) continue;
    for (const auto& [name, r] : {std::pair<const char*, const StepResult&>{"fully_shard", ours},
                                  {"hand-written ZeRO-3", floor}}) {
      print_row(name, reshard, r);
      table_rows.push_back(json_row(name, reshard, r));
    }
    std::fflush(stdout);
  }
  if (rank == 0) {
    std::printf("\nParameters after %d steps, largest difference: %.2e (resharding), %.2e (not)\n",
                options.steps + 1, differences[0], differences[1]);
    if (!options.json.empty()) {
      write_json(options.json, "fsdp_step_bench", context_json(options, config), table_rows);
    }
  }
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
    } else if (auto v = value("--rows")) {
      options.rows = std::stoll(*v);
    } else if (auto v = value("--json")) {
      options.json = *v;
    } else if (arg == "--prefetch") {
      options.prefetch = true;
    } else {
      DTENSOR_CHECK(false,
                    "fsdp_step_bench: expected --backend=local|mpi|nccl, --ranks=N, --steps=N, "
                    "--size=test|bench, --rows=N, --json=FILE or --prefetch, found ",
                    arg);
    }
  }
  DTENSOR_CHECK(options.steps >= 1, "fsdp_step_bench: --steps: expected at least 1, found ",
                options.steps);
  return options;
}

}  // namespace
}  // namespace dtensor::bench

int main(int argc, char** argv) {
  dtensor::bench::Options options;
  try {
    options = dtensor::bench::parse(argc, argv);
  } catch (const dtensor::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  if (options.backend == "local") {
    dtensor::run_ranks(options.ranks, [&](int rank) { dtensor::bench::run_rank(options, rank); });
  } else {
    const dtensor::DeviceMesh world = dtensor::init_device_mesh(options.backend, {options.ranks});
    dtensor::bench::run_rank(options, static_cast<int>(world.world()->rank()));
  }
  return 0;
}
