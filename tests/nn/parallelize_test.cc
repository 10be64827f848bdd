// Copyright 2026 The dtensor Authors.
//
// dtensor::nn: torch::nn modules laid out by distribute_module and
// parallelize_module train with torch::optim (SGD with momentum, Adam) like
// one device: per step the loss, every gradient and every updated parameter
// equal the single-device model's, and every gradient has the placements of
// its style.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn.h>
#include <torch/optim.h>

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <dtensor/dtensor.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/nn/parallelize.h>
#include <dtensor/placements/placements.h>
#include "tests/support/expect_error.h"

namespace dtensor::nn {
namespace {

struct Dims {
  int64_t batch = 7;   // uneven over 4 ranks for sequence parallelism
  int64_t seq = 5;     // token model: ids [batch, seq]
  int64_t vocab = 11;  // uneven over 2 and 4 ranks
  int64_t in = 6;
  // Uneven over 4 ranks: 3,3,3,2 (OneWideShards takes 10: 3,3,3,1).
  int64_t hidden = 11;
  int64_t out = 5;
};

// Deterministic values: module initialisation draws from generators that the
// ranks (threads) share, so every model is overwritten with the same data.
void fill_parameters(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  double phase = 0.1;
  for (auto& parameter : module.named_parameters()) {
    at::Tensor& p = parameter.value();
    p.copy_(at::arange(p.numel(), at::kFloat).add(phase).sin().mul(0.5).reshape(p.sizes()));
    phase += 0.7;
  }
}

torch::nn::Sequential make_mlp(const Dims& d) {
  torch::nn::Sequential mlp(torch::nn::Linear(d.in, d.hidden), torch::nn::ReLU(),
                            torch::nn::Linear(d.hidden, d.out));
  fill_parameters(*mlp);
  return mlp;
}

// Embedding -> Linear -> ReLU -> Linear over token ids, calling its
// parallelized modules' forward when it has them.
struct TokenMlpImpl : torch::nn::Module {
  explicit TokenMlpImpl(const Dims& d)
      : embed(register_module("embed", torch::nn::Embedding(d.vocab, d.in))),
        fc1(register_module("fc1", torch::nn::Linear(d.in, d.hidden))),
        fc2(register_module("fc2", torch::nn::Linear(d.hidden, d.out))) {
    fill_parameters(*this);
  }
  at::Tensor forward(const at::Tensor& ids) {
    if (!tp) return fc2(torch::relu(fc1(embed(ids))));
    const at::Tensor h = torch::relu((*tp)["fc1"].forward((*tp)["embed"].forward(ids)));
    return (*tp)["fc2"].forward(h);
  }

  torch::nn::Embedding embed;
  torch::nn::Linear fc1, fc2;
  std::optional<ParallelModules> tp;
};
TORCH_MODULE(TokenMlp);

at::Tensor inputs(const Dims& d) {
  return at::arange(d.batch * d.in, at::kFloat).cos().reshape({d.batch, d.in});
}
at::Tensor targets(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return at::arange(n, at::kFloat).mul(0.3).sin().reshape(shape);
}
at::Tensor token_ids(const Dims& d) {
  return at::arange(d.batch * d.seq, at::kLong)
      .mul(7)
      .remainder(d.vocab)
      .slice(0, 0, 3 * d.seq)
      .reshape({3, d.seq});
}

std::string placements_of(const at::Tensor& t) {
  return is_dtensor(t) ? placements_to_string(DTensor(t).placements()) : "<plain tensor>";
}

// A loss value: a DTensor's full value, or a plain scalar summed over the
// ranks of `mesh` when `summed` (each rank's term of a sequence-parallel
// loss), else as it is.
double loss_value(const at::Tensor& loss, const DeviceMesh& mesh, bool summed) {
  if (is_dtensor(loss)) return DTensor(loss).full_tensor().item<double>();
  at::Tensor value = loss.detach().clone().reshape({1});
  if (summed) mesh.communicator(0)->all_reduce(value, ReduceOp::kSum);
  return value.item<double>();
}

::testing::AssertionResult Close(const at::Tensor& got, const at::Tensor& expected) {
  if (got.sizes() == expected.sizes() && at::allclose(got, expected, 1e-5, 1e-6)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "got\n" << got << "\nexpected\n" << expected;
}

enum class Optimizer { kSgdMomentum, kAdam };

std::unique_ptr<torch::optim::Optimizer> make_optimizer(Optimizer kind,
                                                        std::vector<at::Tensor> parameters) {
  if (kind == Optimizer::kSgdMomentum) {
    return std::make_unique<torch::optim::SGD>(parameters,
                                               torch::optim::SGDOptions(0.05).momentum(0.9));
  }
  return std::make_unique<torch::optim::Adam>(parameters, torch::optim::AdamOptions(0.01));
}

// The placements a parameter and its gradient must have.
struct Layout {
  Layout(const char* both) : parameter(both), grad(both) {}  // NOLINT: implicit on purpose
  Layout(const char* parameter, const char* grad) : parameter(parameter), grad(grad) {}
  std::string parameter;
  std::string grad;
};
using Layouts = std::map<std::string, Layout>;

struct Training {
  Training(torch::nn::Module& reference, torch::nn::Module& parallel, DeviceMesh mesh)
      : reference(&reference), parallel(&parallel), mesh(std::move(mesh)) {}

  torch::nn::Module* reference;
  torch::nn::Module* parallel;  // its parameters are DTensors on `mesh`
  DeviceMesh mesh;
  std::function<at::Tensor()> reference_loss;
  std::function<at::Tensor()> parallel_loss;
  bool loss_summed_over_ranks = false;
  Layouts layouts;
};

// Trains both models side by side and checks every step. Only EXPECTs: every
// rank makes the same collectives whatever fails.
void expect_trains_like_one_device(const Training& t, Optimizer kind, int steps = 4) {
  auto reference_optimizer = make_optimizer(kind, t.reference->parameters());
  auto parallel_optimizer = make_optimizer(kind, t.parallel->parameters());
  const auto reference_parameters = t.reference->named_parameters();
  const auto parallel_parameters = t.parallel->named_parameters();
  EXPECT_EQ(parallel_parameters.keys(), reference_parameters.keys());
  double first_loss = 0, last_loss = 0;
  for (int step = 0; step < steps; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    reference_optimizer->zero_grad();
    parallel_optimizer->zero_grad();
    const at::Tensor reference_loss = t.reference_loss();
    reference_loss.backward();
    const at::Tensor parallel_loss = t.parallel_loss();
    parallel_loss.backward();
    const double expected = reference_loss.item<double>();
    last_loss = loss_value(parallel_loss, t.mesh, t.loss_summed_over_ranks);
    if (step == 0) first_loss = last_loss;
    EXPECT_NEAR(last_loss, expected, 1e-5 * std::abs(expected));
    for (const auto& [name, layout] : t.layouts) {
      const at::Tensor& p = parallel_parameters[name];
      EXPECT_EQ(placements_of(p), layout.parameter) << name;
      EXPECT_EQ(placements_of(p.grad()), layout.grad) << name << ".grad";
      EXPECT_TRUE(Close(DTensor(p.grad()).full_tensor(), reference_parameters[name].grad()))
          << name << ".grad";
    }
    reference_optimizer->step();
    parallel_optimizer->step();
    for (const auto& [name, layout] : t.layouts) {
      EXPECT_TRUE(
          Close(DTensor(parallel_parameters[name]).full_tensor(), reference_parameters[name]))
          << name << " after the step";
    }
  }
  EXPECT_NE(first_loss, last_loss);  // it trained
}

const Layouts kMlpLayouts = {
    {"0.weight", "S(0)"}, {"0.bias", "S(0)"}, {"2.weight", "S(1)"}, {"2.bias", "R"}};

// Sequential Linear -> ReLU -> Linear: colwise keeps its DTensor output so
// it flows through ReLU into the rowwise Linear; the rowwise output is
// all-reduced and returned as a plain tensor on every rank.
void train_mlp(
    const DeviceMesh& tp_mesh, Optimizer kind,
    const std::function<ParallelModules(torch::nn::Module&, const ParallelizePlan&)>& parallelize,
    const Dims& d = Dims{}) {
  torch::nn::Sequential reference = make_mlp(d), parallel = make_mlp(d);
  StyleOptions keep_dtensor;
  keep_dtensor.use_local_output = false;
  const ParallelModules tp =
      parallelize(*parallel, {{"0", ColwiseParallel(keep_dtensor)}, {"2", RowwiseParallel()}});
  const at::Tensor x = inputs(d), y = targets({d.batch, d.out});
  Training t(*reference, *parallel, tp_mesh);
  t.reference_loss = [&] { return (reference->forward(x) - y).pow(2).mean(); };
  t.parallel_loss = [&] {
    const at::Tensor out = tp["2"].prepare_output(parallel->forward(tp["0"].prepare_input(x)));
    EXPECT_FALSE(is_dtensor(out));
    return (out - y).pow(2).mean();
  };
  t.layouts = kMlpLayouts;
  expect_trains_like_one_device(t, kind);
}

ParallelModules parallelize_1d(torch::nn::Module& m, const DeviceMesh& mesh,
                               const ParallelizePlan& plan) {
  return parallelize_module(m, mesh, plan);
}

TEST(ParallelizeTest, MlpColwiseRowwiseTrainsLikeOneDevice) {
  for (int ranks : {2, 4}) {
    for (Optimizer kind : {Optimizer::kSgdMomentum, Optimizer::kAdam}) {
      SCOPED_TRACE(std::to_string(ranks) + " ranks, optimizer " +
                   std::to_string(static_cast<int>(kind)));
      run_ranks(ranks, [&](int) {
        const DeviceMesh mesh = init_device_mesh("local", {ranks});
        train_mlp(mesh, kind, [&](torch::nn::Module& m, const ParallelizePlan& plan) {
          return parallelize_1d(m, mesh, plan);
        });
      });
    }
  }
}

// Hidden 10 over 4 ranks leaves rank 3 a 1-wide shard, whose local strides
// say nothing about the order of that dim. The wrappers' global strides must
// still agree on every rank: otherwise AccumulateGrad's layout check clones
// (copy_, an all-gather) on some ranks only, and the ranks' next collectives
// disagree (dtensor/core/tensor_impl.h global_strides_like).
TEST(ParallelizeTest, OneWideShards) {
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    Dims one_wide;
    one_wide.hidden = 10;
    train_mlp(
        mesh, Optimizer::kSgdMomentum,
        [&](torch::nn::Module& m, const ParallelizePlan& plan) {
          return parallelize_1d(m, mesh, plan);
        },
        one_wide);
  });
}

// Each dp group parallelizes its own copy over "tp" and sees the same data,
// so every group trains like one device.
TEST(ParallelizeTest, MlpOverTheTpDimOfA2dMesh) {
  for (Optimizer kind : {Optimizer::kSgdMomentum, Optimizer::kAdam}) {
    run_ranks(4, [&](int) {
      const DeviceMesh mesh = init_device_mesh("local", {2, 2}, {"dp", "tp"});
      train_mlp(mesh["tp"], kind, [&](torch::nn::Module& m, const ParallelizePlan& plan) {
        return kind == Optimizer::kAdam ? parallelize_module(m, mesh, plan, "tp")
                                        : parallelize_module(m, mesh, plan, int64_t{1});
      });
    });
  }
}

// Sequence parallel: each rank holds its rows of the batch (uneven: 7 rows
// over 4 ranks); colwise gathers them, rowwise reduce-scatters its output
// back to rows, returned as this rank's rows; each rank's loss is its rows'
// term of the mean.
TEST(ParallelizeTest, SequenceParallelMlpTrainsLikeOneDevice) {
  for (int ranks : {2, 4}) {
    for (Optimizer kind : {Optimizer::kSgdMomentum, Optimizer::kAdam}) {
      run_ranks(ranks, [&](int) {
        const DeviceMesh mesh = init_device_mesh("local", {ranks});
        const Dims d;
        torch::nn::Sequential reference = make_mlp(d), parallel = make_mlp(d);
        StyleOptions gather_rows;
        gather_rows.input_layouts = Shard::make(0);
        gather_rows.use_local_output = false;
        StyleOptions scatter_rows;
        scatter_rows.output_layouts = Shard::make(0);
        const ParallelModules tp = parallelize_module(
            *parallel, mesh,
            {{"0", ColwiseParallel(gather_rows)}, {"2", RowwiseParallel(scatter_rows)}});
        const at::Tensor x = inputs(d), y = targets({d.batch, d.out});
        const at::Tensor my_x = distribute_tensor(x, mesh, parse_placements("S(0)")).to_local();
        const at::Tensor my_y = distribute_tensor(y, mesh, parse_placements("S(0)")).to_local();
        Training t(*reference, *parallel, mesh);
        t.reference_loss = [&] { return (reference->forward(x) - y).pow(2).mean(); };
        t.parallel_loss = [&] {
          const at::Tensor my_out =
              tp["2"].prepare_output(parallel->forward(tp["0"].prepare_input(my_x)));
          EXPECT_EQ(my_out.sizes(), my_y.sizes());
          return (my_out - my_y).pow(2).sum() / static_cast<double>(y.numel());
        };
        t.loss_summed_over_ranks = true;
        t.layouts = kMlpLayouts;
        expect_trains_like_one_device(t, kind);
      });
    }
  }
}

// The token model with a plan and `expected` gradient layouts, trained
// with both optimizers; `dtensor_loss` keeps the output a DTensor laid out
// as `output_layout` and takes the loss on DTensors.
void train_token_mlp(int ranks, const ParallelizePlan& plan, const Layouts& expected,
                     const char* output_layout = nullptr) {
  for (Optimizer kind : {Optimizer::kSgdMomentum, Optimizer::kAdam}) {
    run_ranks(ranks, [&](int) {
      const DeviceMesh mesh = init_device_mesh("local", {ranks});
      const Dims d;
      TokenMlp reference(d), parallel(d);
      parallel->tp = parallelize_module(*parallel, mesh, plan);
      const at::Tensor ids = token_ids(d), y = targets({ids.size(0), d.seq, d.out});
      Training t(*reference, *parallel, mesh);
      t.reference_loss = [&] { return (reference->forward(ids) - y).pow(2).mean(); };
      const at::Tensor dy =
          output_layout ? distribute_tensor(y, mesh, parse_placements(output_layout)).tensor() : y;
      t.parallel_loss = [&] {
        const at::Tensor out = parallel->forward(ids);
        EXPECT_EQ(placements_of(out), output_layout ? output_layout : "<plain tensor>");
        return (out - dy).pow(2).mean();
      };
      t.layouts = expected;
      expect_trains_like_one_device(t, kind);
    });
  }
}

const Layouts kTokenMlpLinearLayouts = {
    {"fc1.weight", "S(0)"}, {"fc1.bias", "S(0)"}, {"fc2.weight", "S(1)"}, {"fc2.bias", "R"}};

Layouts with_embedding(Layout layout) {
  Layouts layouts = kTokenMlpLinearLayouts;
  layouts.emplace("embed.weight", std::move(layout));
  return layouts;
}

// A vocabulary-sharded embedding's gradient is computed row block by row
// block (dtensor/autograd/embedding_backward.cc): S(0), like the weight.
const Layout kRowwiseEmbedding("S(0)");

// Vocabulary-sharded embedding (a masked Partial all-reduced to Replicate),
// then colwise and rowwise Linears, every output a plain tensor.
TEST(ParallelizeTest, RowwiseEmbeddingTokenMlpTrainsLikeOneDevice) {
  for (int ranks : {2, 4}) {
    train_token_mlp(
        ranks,
        {{"embed", RowwiseParallel()}, {"fc1", ColwiseParallel()}, {"fc2", RowwiseParallel()}},
        with_embedding(kRowwiseEmbedding));
  }
}

// Embedding sharded on its embedding dim; its S(-1) DTensor output is
// gathered by fc1's prepare_input.
TEST(ParallelizeTest, ColwiseEmbeddingTokenMlpTrainsLikeOneDevice) {
  StyleOptions keep_dtensor;
  keep_dtensor.use_local_output = false;
  for (int ranks : {2, 4}) {
    train_token_mlp(ranks,
                    {{"embed", ColwiseParallel(keep_dtensor)},
                     {"fc1", ColwiseParallel()},
                     {"fc2", RowwiseParallel()}},
                    with_embedding("S(1)"));
  }
}

// Sequence parallel on the sequence dim: the embedding's output is
// reduce-scattered to S(1), fc1 gathers it, fc2 reduce-scatters to S(1).
TEST(ParallelizeTest, SequenceParallelTokenMlpTrainsLikeOneDevice) {
  StyleOptions to_sequence;
  to_sequence.output_layouts = Shard::make(1);
  to_sequence.use_local_output = false;
  StyleOptions from_sequence;
  from_sequence.input_layouts = Shard::make(1);
  from_sequence.use_local_output = false;
  for (int ranks : {2, 4}) {
    train_token_mlp(ranks,
                    {{"embed", RowwiseParallel(to_sequence)},
                     {"fc1", ColwiseParallel(from_sequence)},
                     {"fc2", RowwiseParallel(to_sequence)}},
                    with_embedding(kRowwiseEmbedding), "S(1)");
  }
}

// A custom module keeping member copies of its parameters, updated through
// ParameterMembers.
struct ScaledLinearImpl : torch::nn::Module, ParameterMembers {
  explicit ScaledLinearImpl(const Dims& d)
      : fc(register_module("fc", torch::nn::Linear(d.in, d.hidden))) {
    scale = register_parameter("scale", torch::ones({d.in}));
    fill_parameters(*this);
  }
  void rebind_parameter(const std::string& name, const at::Tensor& value) override {
    if (name == "scale") scale = value;
  }
  at::Tensor forward(const at::Tensor& x) { return fc(x * scale); }

  torch::nn::Linear fc;
  at::Tensor scale;
};
TORCH_MODULE(ScaledLinear);

// distribute_module with a partition function that shards the Linear's
// weight; what it leaves plain (the bias, the custom module's scale) is
// replicated, and training matches one device.
TEST(ParallelizeTest, DistributeModuleShardsChosenParametersAndReplicatesTheRest) {
  for (Optimizer kind : {Optimizer::kSgdMomentum, Optimizer::kAdam}) {
    run_ranks(4, [&](int) {
      const DeviceMesh mesh = init_device_mesh("local", {4});
      const Dims d;
      ScaledLinear reference(d), parallel(d);
      std::vector<std::string> visited;
      distribute_module(*parallel, mesh,
                        [&](const std::string& path, torch::nn::Module& m, const DeviceMesh& on) {
                          visited.push_back(path);
                          if (path == "fc") distribute_parameter(m, "weight", on, {Shard::make(0)});
                        });
      EXPECT_EQ(visited, (std::vector<std::string>{"", "fc"}));
      for (const auto& p : parallel->named_parameters()) EXPECT_TRUE(p->requires_grad()) << p.key();
      const at::Tensor x = inputs(d), y = targets({d.batch, d.hidden});
      const at::Tensor dx = distribute_tensor(x, mesh, parse_placements("R")).tensor();
      const at::Tensor dy = distribute_tensor(y, mesh, parse_placements("S(1)")).tensor();
      Training t(*reference, *parallel, mesh);
      t.reference_loss = [&] { return (reference->forward(x) - y).pow(2).mean(); };
      t.parallel_loss = [&] { return (parallel->forward(dx) - dy).pow(2).mean(); };
      // The scale's gradient comes out of a contraction over fc's sharded
      // output features: a pending sum. The replicated bias is sliced to
      // meet fc's S(-1) output, so its gradient is that slice's: S(0). The
      // optimizers reduce or slice them where they meet the parameters.
      t.layouts = {{"scale", {"R", "P(sum)"}}, {"fc.weight", "S(0)"}, {"fc.bias", {"R", "S(0)"}}};
      expect_trains_like_one_device(t, kind);
    });
  }
}

TEST(ParallelizeTest, ParametersAreReplacedInPlaceWithRequiresGrad) {
  run_ranks(2, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2});
    torch::nn::Linear linear(4, 6);
    parallelize_module(*linear, mesh, {{"", ColwiseParallel()}});
    // The registered entry, the member forward() reads and parameters() agree.
    EXPECT_TRUE(linear->weight.is_same(linear->named_parameters()["weight"]));
    EXPECT_TRUE(linear->bias.is_same(linear->parameters()[1]));
    EXPECT_EQ(placements_of(linear->weight), "S(0)");
    EXPECT_EQ(DTensor(linear->weight).to_local().sizes(), (at::IntArrayRef{3, 4}));
    EXPECT_TRUE(linear->weight.requires_grad());
    EXPECT_TRUE(linear->weight.is_leaf());
  });
}

// Ranks that initialize differently still get one model: the mesh's first
// rank's values are laid out.
TEST(ParallelizeTest, FirstRanksValuesAreDistributed) {
  run_ranks(2, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {2});
    torch::nn::Linear linear(4, 6);
    {
      torch::NoGradGuard no_grad;
      linear->weight.copy_(at::arange(24, at::kFloat).reshape({6, 4}) + 100 * rank);
      linear->bias.fill_(rank);
    }
    parallelize_module(*linear, mesh, {{"", ColwiseParallel()}});
    EXPECT_TRUE(at::equal(DTensor(linear->weight).full_tensor(),
                          at::arange(24, at::kFloat).reshape({6, 4})));
    EXPECT_TRUE(at::equal(DTensor(linear->bias).full_tensor(), at::zeros({6})));
  });
}

// sum's backward expands the (replicated) gradient, so a sharded tensor
// summed gets a replicated gradient; a distributed parameter's hook slices it
// to the parameter's layout as it arrives (no communication needed).
TEST(ParallelizeTest, ReplicatedGradientOfAShardedParameterIsSliced) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor init = at::arange(8, at::kFloat);
    const DTensor plain =
        distribute_tensor(init.clone().requires_grad_(), mesh, parse_placements("S(0)"));
    (plain.tensor().sum() * 3).backward();
    EXPECT_EQ(placements_of(plain.tensor().grad()), "R");

    torch::nn::Module module;
    module.register_parameter("w", init.clone());
    distribute_module(module, mesh,
                      [](const std::string&, torch::nn::Module& m, const DeviceMesh& on) {
                        distribute_parameter(m, "w", on, {Shard::make(0)});
                      });
    const at::Tensor w = module.named_parameters()["w"];
    (w.sum() * 3).backward();
    EXPECT_EQ(placements_of(w.grad()), "S(0)");
    EXPECT_TRUE(at::equal(DTensor(w.grad()).full_tensor(), at::full({8}, 3.0f)));
  });
}

// Errors, each thrown alike on every rank before any collective.

TEST(ParallelizeErrorTest, UnknownPathListsTheModulePaths) {
  run_ranks(2, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2});
    torch::nn::Sequential mlp = make_mlp(Dims{});
    DTENSOR_EXPECT_ERROR(parallelize_module(*mlp, mesh, {{"3", ColwiseParallel()}}),
                         "expected a submodule at '3' of torch::nn::Sequential, found only "
                         "['0', '1', '2']");
  });
}

TEST(ParallelizeErrorTest, StyleOnAnUnsupportedModuleTypeNamesTheSupportedTypes) {
  run_ranks(2, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2});
    torch::nn::Sequential mlp = make_mlp(Dims{});
    DTENSOR_EXPECT_ERROR(parallelize_module(*mlp, mesh, {{"1", RowwiseParallel()}}),
                         "RowwiseParallel at '1': expected a torch::nn::Linear or "
                         "torch::nn::Embedding (the module types it supports), found "
                         "torch::nn::ReLU");
  });
}

TEST(ParallelizeErrorTest, MeshOfWrongDimensionality) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2}, {"dp", "tp"});
    torch::nn::Sequential mlp = make_mlp(Dims{});
    DTENSOR_EXPECT_ERROR(parallelize_module(*mlp, mesh, {{"0", ColwiseParallel()}}),
                         "parallelize_module: expected a 1-D mesh, or the name or index of the "
                         "mesh dim to parallelize over; found DeviceMesh((dp=2, tp=2)");
    DTENSOR_EXPECT_ERROR(parallelize_module(*mlp, mesh, {{"0", ColwiseParallel()}}, int64_t{2}),
                         "mesh_dim: expected a dim of DeviceMesh((dp=2, tp=2)");
    DTENSOR_EXPECT_ERROR(ColwiseParallel().apply("0", mlp->ptr(0), mesh),
                         "ColwiseParallel at '0': expected a 1-D mesh, found DeviceMesh((dp=2");
  });
}

TEST(ParallelizeErrorTest, PlanAndHandleMisuse) {
  run_ranks(2, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2});
    torch::nn::Sequential mlp = make_mlp(Dims{});
    DTENSOR_EXPECT_ERROR(
        parallelize_module(*mlp, mesh, {{"0", ColwiseParallel()}, {"0", RowwiseParallel()}}),
        "expected each path once in the plan, found '0' twice");
    const ParallelModules tp =
        parallelize_module(*mlp, mesh, {{"0", ColwiseParallel()}, {"2", RowwiseParallel()}});
    DTENSOR_EXPECT_ERROR(tp["fc1"],
                         "expected a parallelized module at 'fc1', found only ['0', '2']");
    DTENSOR_EXPECT_ERROR(tp["2"].prepare_output(at::ones({7, 5})),
                         "prepare_output of '2': expected the DTensor that the module's forward() "
                         "returned, found a plain tensor");
    DTENSOR_EXPECT_ERROR(parallelize_module(*mlp, mesh, {{"0", ColwiseParallel()}}),
                         "parameter 'weight': expected a plain tensor, found a DTensor");
  });
}

TEST(ParallelizeErrorTest, UnknownParameterName) {
  torch::nn::Linear linear(4, 6);
  DTENSOR_EXPECT_ERROR(replace_parameter(*linear, "wieght", at::ones({6, 4})),
                       "module torch::nn::Linear: expected a parameter called 'wieght', found "
                       "only [weight, bias]");
}

// A member copy the module does not let distribute_module update would keep
// forward() on the old tensor: refused, as is an optimizer built before.
struct MemberCopyImpl : torch::nn::Module {
  MemberCopyImpl() { w = register_parameter("w", torch::ones({4})); }
  at::Tensor w;
};
TORCH_MODULE(MemberCopy);

TEST(ParallelizeErrorTest, OldParameterStillReferenced) {
  run_ranks(2, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2});
    MemberCopy copying;
    DTENSOR_EXPECT_ERROR(distribute_module(*copying, mesh),
                         "distribute_module: parameter 'w' was replaced by a DTensor, but its old "
                         "tensor is still referenced 1 time(s) elsewhere: expected none");
    torch::nn::Sequential mlp = make_mlp(Dims{});
    torch::optim::SGD too_early(mlp->parameters(), 0.1);
    DTENSOR_EXPECT_ERROR(parallelize_module(*mlp, mesh, {{"0", ColwiseParallel()}}),
                         "parameter 'weight' was replaced by a DTensor, but its old tensor is "
                         "still referenced 1 time(s)");
  });
}

// A module whose forward() adds a buffer it reads through a member.
struct OffsetImpl : torch::nn::Module, ParameterMembers {
  explicit OffsetImpl(bool follows) : follows_(follows) {
    offset = register_buffer("offset", at::arange(6, at::kFloat));
  }
  void rebind_parameter(const std::string&, const at::Tensor&) override {}
  void rebind_buffer(const std::string& name, const at::Tensor& value) override {
    if (follows_ && name == "offset") offset = value;
  }
  at::Tensor forward(const at::Tensor& x) { return x + offset; }
  at::Tensor offset;
  bool follows_;
};
TORCH_MODULE(Offset);

// Buffers become replicated DTensors holding the first rank's values, so
// forward() mixes no plain tensor into DTensor ops (no implicit
// replication); a member copy that does not follow is an error.
TEST(ParallelizeTest, ReplicateBuffersMakesThemReplicatedDTensors) {
  run_ranks(2, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {2});
    Offset module(/*follows=*/true);
    // Ranks that disagree on a buffer get the first rank's.
    if (rank == 1) module->offset.add_(100);
    replicate_buffers(*module, mesh);
    const DTensor offset(module->named_buffers()["offset"]);
    EXPECT_EQ(placements_to_string(offset.placements()), "R");
    EXPECT_TRUE(module->offset.is_same(offset.tensor()));
    const at::Tensor x = at::ones({3, 6});
    const DTensor y(module->forward(distribute_tensor(x, mesh, parse_placements("S(0)"))));
    EXPECT_EQ(placements_to_string(y.placements()), "S(0)");
    EXPECT_TRUE(at::equal(y.full_tensor(), x + at::arange(6, at::kFloat)));
    Offset stale(/*follows=*/false);
    DTENSOR_EXPECT_ERROR(replicate_buffers(*stale, mesh),
                         "replicate_buffers: buffer 'offset' was replaced by a DTensor, but its "
                         "old tensor is still referenced 1 time(s) elsewhere: expected none");
  });
}

}  // namespace
}  // namespace dtensor::nn
