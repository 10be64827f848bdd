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
// Step 0's losses are compared: both compute one model. Rank 0 prints a
// markdown table and, with --json=FILE, writes the same rows as JSON
// (benchmarks/make_results.py reads it). Data parallelism (fully_shard,
// alone or over TP) is measured by fsdp_step_bench.
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
// The two implementations of one step.

struct StepResult {
  double loss = 0;
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
        tp_(*s.mesh.communicator(0)),
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
    if (s.plan == LlamaPlan::kSequenceParallel) tokens_ = my_chunk(tp_, tokens_, 1);
  }

  StepResult run() {
    StepResult result;
    HandCounts counts;
    hand_counts = &counts;
    at::Tensor loss;
    result.seconds = timed(*s_.mesh.world(), [&] {
      loss = loss_of();
      loss.backward();
      reduce_gradients();
      sgd_step(*model_, s_.learning_rate);
    });
    hand_counts = nullptr;
    result.calls = counts.calls;
    result.bytes = counts.bytes;
    result.loss = loss.item<double>();  // logging, not the step
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
    if (s_.plan == LlamaPlan::kSequenceParallel) {
      std::vector<at::Tensor> replicated;
      for (auto& parameter : model_->named_parameters()) {
        const std::string& name = parameter.key();
        if (name.find("norm") != std::string::npos || name == "tok_embeddings.weight") {
          replicated.push_back(parameter->mutable_grad());
        }
      }
      reduce_bucket(tp_, replicated, ReduceOp::kSum);
    }
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
  Llama model_;
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
// step's loss and counts with the median time.
template <typename Impl>
StepResult measure(Impl& impl, int steps) {
  StepResult first = impl.run();
  std::vector<double> seconds;
  for (int i = 0; i < steps; ++i) seconds.push_back(impl.run().seconds);
  first.seconds = median(seconds);
  return first;
}

void run_rank(const Options& options, int rank) {
  const LlamaConfig config = config_of(options.size);
  const int64_t batch = 4, seq = options.size == "test" ? 8 : 128;
  at::Generator data = at::detail::createCPUGenerator(11);
  const at::Tensor tokens = at::randint(config.vocab, {batch, seq}, data, at::kLong);
  const at::Tensor targets = tokens.roll(-1, 1);
  const std::vector<std::pair<LlamaPlan, std::vector<int64_t>>> cases = {
      {LlamaPlan::kTensorParallel, {4}},
      {LlamaPlan::kSequenceParallel, {4}},
      {LlamaPlan::kLossParallel, {4}}};
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
    const Setup setup{config, plan, init_device_mesh(options.backend, shape, {"tp"}), tokens,
                      targets};
    DTensorStep dtensor_step(setup);
    MegatronStep megatron_step(setup);
    const StepResult ours = measure(dtensor_step, options.steps);
    const StepResult floor = measure(megatron_step, options.steps);
    if (rank != 0) continue;
    ranks = static_cast<int>(setup.mesh.world()->size());
    for (const auto& [name, r] : {std::pair<const char*, const StepResult&>{"dtensor", ours},
                                  {"hand-written Megatron", floor}}) {
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
