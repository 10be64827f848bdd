// Copyright 2026 The dtensor Authors.
//
// The parallel styles that move activations (SequenceParallel,
// PrepareModuleInput, PrepareModuleOutput), the forward hooks
// parallelize_module registers for them, MeshScope::kWholeMesh, and the
// gradient layout a redistribute sends back (RedistributeOptions::
// grad_placements, which the module boundaries use). Values are float64 and
// equal one device's within 1e-12; collectives are counted exactly.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn.h>
#include <torch/optim.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <dtensor/dtensor.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/nn/module_hooks.h>
#include <dtensor/nn/parallelize.h>
#include <dtensor/nn/reduce_gradients.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/collective_counter.h>
#include "tests/support/expect_error.h"

namespace dtensor::nn {
namespace {

using Counts = std::map<std::string, int64_t, std::less<>>;

constexpr double kTolerance = 1e-12;

// Deterministic, distinct values: module initialisation draws from a
// generator the rank threads share, so every model is overwritten alike.
void fill_parameters(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  double phase = 0.3;
  for (auto& parameter : module.named_parameters()) {
    at::Tensor& p = parameter.value();
    p.copy_(at::arange(p.numel(), at::kDouble).add(phase).sin().mul(0.5).add(1).reshape(p.sizes()));
    phase += 0.9;
  }
}

at::Tensor values(const std::vector<int64_t>& shape, double phase) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return at::arange(n, at::kDouble).mul(0.41).add(phase).cos().reshape(shape);
}

std::string placements_of(const at::Tensor& t) {
  if (!t.defined()) return "<undefined>";
  return is_dtensor(t) ? placements_to_string(DTensor(t).placements()) : "<plain tensor>";
}

// The whole value of a DTensor, or a plain tensor as it is.
at::Tensor whole(const at::Tensor& t) { return is_dtensor(t) ? DTensor(t).full_tensor() : t; }

::testing::AssertionResult Close(const at::Tensor& got, const at::Tensor& expected) {
  if (got.sizes() == expected.sizes() && at::allclose(got, expected, 0, kTolerance)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "got\n" << got << "\nexpected\n" << expected;
}

// RMSNorm over the last dim, as examples/llama's.
struct RmsNormImpl : torch::nn::Module, ParameterMembers {
  explicit RmsNormImpl(int64_t dim) { weight = register_parameter("weight", at::ones({dim})); }
  void rebind_parameter(const std::string& name, const at::Tensor& value) override {
    if (name == "weight") weight = value;
  }
  at::Tensor forward(const at::Tensor& x) {
    return x * at::rsqrt(x.pow(2).mean({-1}, /*keepdim=*/true) + 1e-6) * weight;
  }
  at::Tensor weight;
};
TORCH_MODULE(RmsNorm);

torch::nn::LayerNorm make_layer_norm(int64_t dim) {
  torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({dim}));
  norm->to(at::kDouble);
  fill_parameters(*norm);
  return norm;
}

RmsNorm make_rms_norm(int64_t dim) {
  RmsNorm norm(dim);
  norm->to(at::kDouble);
  fill_parameters(*norm);
  return norm;
}

// ---------------------------------------------------------------------------
// SequenceParallel

// LayerNorm over [batch 2, sequence 7, hidden 6], the 7 positions split over
// 4 ranks (2, 2, 2, 1): each rank passes its positions as a plain tensor; the
// output stays a DTensor split the same way. The weight and bias get Partial
// gradients, one all-reduce makes them one device's.
TEST(SequenceParallelTest, LayerNormForwardAndGradientsLikeOneDevice) {
  const at::Tensor x = values({2, 7, 6}, 0.0), coefficients = values({2, 7, 6}, 2.0);
  torch::nn::LayerNorm reference = make_layer_norm(6);
  const at::Tensor reference_x = x.clone().requires_grad_();
  const at::Tensor reference_out = reference->forward(reference_x);
  (reference_out * coefficients).sum().backward();
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    torch::nn::LayerNorm norm = make_layer_norm(6);
    parallelize_module(*norm, mesh, {{"", SequenceParallel()}});
    EXPECT_EQ(placements_of(norm->weight), "R");
    EXPECT_EQ(placements_of(norm->bias), "R");
    EXPECT_TRUE(has_forward_hooks(*norm));
    const at::Tensor my_x =
        distribute_tensor(x, mesh, parse_placements("S(1)")).to_local().requires_grad_();
    const at::Tensor dc = distribute_tensor(coefficients, mesh, parse_placements("S(1)")).tensor();

    CollectiveCounter forward;
    const at::Tensor out = call(norm, my_x);
    // Only from_local's check of the ranks' shapes: the norm itself
    // works on each rank's positions alone.
    EXPECT_EQ(forward.by_collective(), (Counts{{"all_gather", 1}}));
    EXPECT_EQ(placements_of(out), "S(1)");
    EXPECT_TRUE(Close(DTensor(out).full_tensor(), reference_out));

    (out * dc).sum().backward();
    EXPECT_EQ(placements_of(norm->weight.grad()), "P(sum)");
    EXPECT_EQ(placements_of(norm->bias.grad()), "P(sum)");
    CollectiveCounter reduce;
    EXPECT_EQ(reduce_gradients(norm->parameters()), 1);
    EXPECT_EQ(reduce.by_collective(), (Counts{{"all_reduce", 1}}));
    EXPECT_EQ(placements_of(norm->weight.grad()), "R");
    EXPECT_TRUE(Close(whole(norm->weight.grad()), reference->weight.grad()));
    EXPECT_TRUE(Close(whole(norm->bias.grad()), reference->bias.grad()));
    // The plain input gets its positions' gradient.
    EXPECT_FALSE(is_dtensor(my_x.grad()));
    EXPECT_TRUE(
        Close(my_x.grad(),
              distribute_tensor(reference_x.grad(), mesh, parse_placements("S(1)")).to_local()));
  });
}

// use_local_output: the output comes back as the rank's positions, plain,
// with no collective beyond from_local's shape check.
TEST(SequenceParallelTest, UseLocalOutputReturnsTheRanksPositions) {
  const at::Tensor x = values({2, 7, 6}, 0.5);
  const at::Tensor expected = make_rms_norm(6)->forward(x);
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    RmsNorm norm = make_rms_norm(6);
    parallelize_module(*norm, mesh, {{"", SequenceParallel(1, /*use_local_output=*/true)}});
    const at::Tensor my_x = distribute_tensor(x, mesh, parse_placements("S(1)")).to_local();
    CollectiveCounter counter;
    const at::Tensor out = call(norm, my_x);
    EXPECT_EQ(counter.by_collective(), (Counts{{"all_gather", 1}}));
    EXPECT_FALSE(is_dtensor(out));
    EXPECT_TRUE(Close(out, distribute_tensor(expected, mesh, parse_placements("S(1)")).to_local()));
  });
}

// A custom RMSNorm under SequenceParallel trains like one device with SGD:
// each step its weight's gradient is Partial, reduced by reduce_gradients in
// one all-reduce, and the update matches.
TEST(SequenceParallelTest, RmsNormTrainsLikeOneDevice) {
  const at::Tensor x = values({3, 7, 4}, 1.0), target = values({3, 7, 4}, 3.0);
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    RmsNorm reference = make_rms_norm(4), norm = make_rms_norm(4);
    parallelize_module(*norm, mesh, {{"", SequenceParallel()}});
    torch::optim::SGD reference_sgd(reference->parameters(), 0.1);
    torch::optim::SGD sgd(norm->parameters(), 0.1);
    const at::Tensor my_x = distribute_tensor(x, mesh, parse_placements("S(1)")).to_local();
    const at::Tensor dt = distribute_tensor(target, mesh, parse_placements("S(1)")).tensor();
    double first_loss = 0, last_loss = 0;
    for (int step = 0; step < 3; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      // Gradients to none: reduce_gradients reduces the whole new sum.
      reference->weight.mutable_grad() = at::Tensor();
      norm->weight.mutable_grad() = at::Tensor();
      const at::Tensor reference_loss = (reference->forward(x) - target).pow(2).sum();
      reference_loss.backward();
      const at::Tensor loss = (call(norm, my_x) - dt).pow(2).sum();
      loss.backward();
      last_loss = DTensor(loss).full_tensor().item<double>();
      if (step == 0) first_loss = last_loss;
      // A sum of squares in the tens of thousands: relative.
      EXPECT_NEAR(last_loss, reference_loss.item<double>(),
                  kTolerance * std::abs(reference_loss.item<double>()));
      EXPECT_EQ(placements_of(norm->weight.grad()), "P(sum)");
      CollectiveCounter reduce;
      EXPECT_EQ(reduce_gradients(norm->parameters()), 1);
      EXPECT_EQ(reduce.total(), 1);
      EXPECT_TRUE(Close(whole(norm->weight.grad()), reference->weight.grad()));
      reference_sgd.step();
      CollectiveCounter update;
      sgd.step();
      EXPECT_EQ(update.total(), 0);
      EXPECT_TRUE(Close(whole(norm->weight), reference->weight));
    }
    EXPECT_NE(first_loss, last_loss);  // it trained
  });
}

// ---------------------------------------------------------------------------
// PrepareModuleInput / PrepareModuleOutput: module boundaries

// Two column-parallel projections reading one replicated input (attention's
// q and k), summed. The block's forward moves nothing.
struct TwoHeadsImpl : torch::nn::Module {
  TwoHeadsImpl()
      : q(register_module("q", torch::nn::Linear(6, 10))),
        k(register_module("k", torch::nn::Linear(6, 10))) {
    to(at::kDouble);
    fill_parameters(*this);
  }
  at::Tensor forward(const at::Tensor& x) { return call(q, x) + call(k, x); }
  torch::nn::Linear q, k;
};
TORCH_MODULE(TwoHeads);

// What a backward through TwoHeads counts and leaves, with or without a
// PrepareModuleInput(desired Replicate) boundary on the block.
struct BoundaryRun {
  Counts forward, backward;
  std::string input_grad_layout;
};

// Output features 10 over 4 ranks: 3, 3, 3, 1.
BoundaryRun run_two_heads(const DeviceMesh& mesh, bool boundary, const at::Tensor& x,
                          const at::Tensor& coefficients, const TwoHeads& reference,
                          const at::Tensor& expected_input_grad) {
  TwoHeads block;
  StyleOptions keep_dtensor;
  keep_dtensor.use_local_output = false;
  ParallelizePlan plan = {{"q", ColwiseParallel(keep_dtensor)},
                          {"k", ColwiseParallel(keep_dtensor)}};
  if (boundary) {
    StyleOptions replicate;
    replicate.desired_input_layouts = Replicate::make();
    plan.emplace_back("", PrepareModuleInput(replicate));
  }
  parallelize_module(*block, mesh, plan);
  const at::Tensor dx =
      distribute_tensor(x.clone().requires_grad_(), mesh, parse_placements("R")).tensor();
  const at::Tensor dc = distribute_tensor(coefficients, mesh, parse_placements("S(1)")).tensor();
  BoundaryRun run;
  at::Tensor loss;
  {
    CollectiveCounter counter;
    const at::Tensor out = call(block, dx);
    EXPECT_EQ(placements_of(out), "S(1)");
    loss = (out * dc).sum();
    run.forward = counter.by_collective();
  }
  {
    CollectiveCounter counter;
    loss.backward();
    run.backward = counter.by_collective();
  }
  run.input_grad_layout = placements_of(dx.grad());
  // Whatever the boundary did, the values are one device's.
  EXPECT_TRUE(Close(whole(dx.grad()), expected_input_grad)) << "input gradient";
  EXPECT_EQ(placements_of(block->q->weight.grad()), "S(0)");
  EXPECT_TRUE(Close(whole(block->q->weight.grad()), reference->q->weight.grad()));
  EXPECT_TRUE(Close(whole(block->k->bias.grad()), reference->k->bias.grad()));
  return run;
}

// The block's replicated input gets the sum of q's and k's Partial input
// gradients reduced once, at the boundary, though the forward moved nothing
// (Megatron's f). Without the boundary nothing is reduced: the input's
// gradient stays Partial.
TEST(PrepareModuleInputTest, ReplicatedInputGetsOneAllReduceAtTheBoundary) {
  const at::Tensor x = values({5, 6}, 0.0), coefficients = values({5, 10}, 1.0);
  TwoHeads reference;
  const at::Tensor reference_x = x.clone().requires_grad_();
  (reference->forward(reference_x) * coefficients).sum().backward();
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const BoundaryRun with =
        run_two_heads(mesh, true, x, coefficients, reference, reference_x.grad());
    EXPECT_EQ(with.forward, Counts{});
    EXPECT_EQ(with.backward, (Counts{{"all_reduce", 1}}));
    EXPECT_EQ(with.input_grad_layout, "R");
    const BoundaryRun without =
        run_two_heads(mesh, false, x, coefficients, reference, reference_x.grad());
    EXPECT_EQ(without.forward, Counts{});
    EXPECT_EQ(without.backward, Counts{});
    EXPECT_EQ(without.input_grad_layout, "P(sum)");
  });
}

// Records what its forward() received; returns it times 10.
struct ProbeImpl : torch::nn::Module {
  at::Tensor forward(const at::Tensor& x) {
    received = x;
    return x * 10;
  }
  at::Tensor received;
};
TORCH_MODULE(Probe);

// A plain input is read as input_layouts (each rank's rows, 7 over 4 ranks:
// 2, 2, 2, 1) and brought to the desired layout: gathered here. The forward
// gets the DTensor, or its local shard with use_local_output.
TEST(PrepareModuleInputTest, PlainInputIsReadAsInputLayouts) {
  const at::Tensor x = values({7, 3}, 0.0);
  for (const bool local : {false, true}) {
    SCOPED_TRACE(local ? "use_local_output" : "DTensor input");
    run_ranks(4, [&](int) {
      const DeviceMesh mesh = init_device_mesh("local", {4});
      Probe probe;
      StyleOptions options;
      options.input_layouts = Shard::make(0);
      options.desired_input_layouts = Replicate::make();
      if (local) options.use_local_output = true;
      parallelize_module(*probe, mesh, {{"", PrepareModuleInput(options)}});
      const at::Tensor my_rows = distribute_tensor(x, mesh, parse_placements("S(0)")).to_local();
      CollectiveCounter counter;
      const at::Tensor out = call(probe, my_rows);
      // from_local's shape check, then the gather of the rows.
      EXPECT_EQ(counter.by_collective(), (Counts{{"all_gather", 1}, {"all_gather_v", 1}}));
      EXPECT_EQ(placements_of(probe->received), local ? "<plain tensor>" : "R");
      EXPECT_TRUE(at::equal(whole(probe->received), x));
      EXPECT_TRUE(at::equal(whole(out), x * 10));
    });
  }
}

// Under kWholeMesh the style changes only the tp placement of a DTensor
// input: rows split over dp (7: 4 and 3) stay split, the tp split of the
// columns is gathered within each tp group.
TEST(PrepareModuleInputTest, WholeMeshKeepsTheOtherDimsPlacements) {
  const at::Tensor x = values({7, 6}, 0.0);
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2}, {"dp", "tp"});
    Probe probe;
    StyleOptions replicate;
    replicate.desired_input_layouts = Replicate::make();
    parallelize_module(*probe, mesh, {{"", PrepareModuleInput(replicate)}}, "tp",
                       MeshScope::kWholeMesh);
    const at::Tensor dx = distribute_tensor(x, mesh, parse_placements("S(0),S(1)")).tensor();
    CollectiveCounter counter;
    const at::Tensor out = call(probe, dx);
    EXPECT_EQ(counter.by_collective(), (Counts{{"all_gather_v", 1}}));
    EXPECT_EQ(placements_of(probe->received), "S(0),R");
    EXPECT_EQ(placements_of(out), "S(0),R");
    EXPECT_TRUE(at::equal(whole(out), x * 10));
  });
}

// The boundary under kWholeMesh with the batch split over dp: the input's
// gradient, Partial over tp, is all-reduced over tp only and keeps its dp
// split; the weights' gradients are Partial over dp.
TEST(PrepareModuleInputTest, WholeMeshBoundaryReducesOverTheStylesDimOnly) {
  const at::Tensor x = values({7, 6}, 0.0), coefficients = values({7, 10}, 1.0);
  TwoHeads reference;
  const at::Tensor reference_x = x.clone().requires_grad_();
  (reference->forward(reference_x) * coefficients).sum().backward();
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2}, {"dp", "tp"});
    TwoHeads block;
    StyleOptions keep_dtensor;
    keep_dtensor.use_local_output = false;
    StyleOptions replicate;
    replicate.desired_input_layouts = Replicate::make();
    parallelize_module(*block, mesh,
                       {{"", PrepareModuleInput(replicate)},
                        {"q", ColwiseParallel(keep_dtensor)},
                        {"k", ColwiseParallel(keep_dtensor)}},
                       "tp", MeshScope::kWholeMesh);
    const at::Tensor dx =
        distribute_tensor(x.clone().requires_grad_(), mesh, parse_placements("S(0),R")).tensor();
    const at::Tensor dc =
        distribute_tensor(coefficients, mesh, parse_placements("S(0),S(1)")).tensor();
    CollectiveCounter forward;
    const at::Tensor out = call(block, dx);
    EXPECT_EQ(forward.total(), 0);
    EXPECT_EQ(placements_of(out), "S(0),S(1)");
    const at::Tensor loss = (out * dc).sum();
    CollectiveCounter backward;
    loss.backward();
    EXPECT_EQ(backward.by_collective(), (Counts{{"all_reduce", 1}}));
    EXPECT_EQ(placements_of(dx.grad()), "S(0),R");
    EXPECT_TRUE(Close(whole(dx.grad()), reference_x.grad()));
    EXPECT_EQ(placements_of(block->q->weight.grad()), "P(sum),S(0)");
    EXPECT_TRUE(Close(whole(block->q->weight.grad()), reference->q->weight.grad()));
  });
}

// A block (norm -> column-parallel head) whose norm's output is declared
// Replicate by PrepareModuleOutput: the head's Partial input gradient is
// all-reduced there, so the norm's backward runs on the whole gradient and
// its replicated weight's gradient is whole (Replicate) too. Without the
// boundary both stay Partial.
struct NormHeadImpl : torch::nn::Module {
  NormHeadImpl()
      : norm(register_module("norm", RmsNorm(6))),
        head(register_module("head", torch::nn::Linear(6, 10))) {
    to(at::kDouble);
    fill_parameters(*this);
  }
  at::Tensor forward(const at::Tensor& x) { return call(head, call(norm, x)); }
  RmsNorm norm;
  torch::nn::Linear head;
};
TORCH_MODULE(NormHead);

TEST(PrepareModuleOutputTest, ReplicatedOutputSendsItsGradientBackWhole) {
  const at::Tensor x = values({5, 6}, 0.0), coefficients = values({5, 10}, 1.0);
  NormHead reference;
  const at::Tensor reference_x = x.clone().requires_grad_();
  (reference->forward(reference_x) * coefficients).sum().backward();
  for (const bool boundary : {true, false}) {
    SCOPED_TRACE(boundary ? "boundary" : "no boundary");
    run_ranks(4, [&](int) {
      const DeviceMesh mesh = init_device_mesh("local", {4});
      NormHead model;
      StyleOptions keep_dtensor;
      keep_dtensor.use_local_output = false;
      ParallelizePlan plan = {{"head", ColwiseParallel(keep_dtensor)}};
      if (boundary) {
        StyleOptions replicate;
        replicate.desired_output_layouts = Replicate::make();
        replicate.use_local_output = false;
        plan.emplace_back("norm", PrepareModuleOutput(replicate));
      }
      parallelize_module(*model, mesh, plan);
      distribute_module(*model, mesh);  // the norm's weight replicated
      EXPECT_EQ(has_forward_hooks(*model->norm), boundary);
      const at::Tensor dx =
          distribute_tensor(x.clone().requires_grad_(), mesh, parse_placements("R")).tensor();
      const at::Tensor dc =
          distribute_tensor(coefficients, mesh, parse_placements("S(1)")).tensor();
      CollectiveCounter forward;
      const at::Tensor loss = (call(model, dx) * dc).sum();
      EXPECT_EQ(forward.total(), 0);
      CollectiveCounter backward;
      loss.backward();
      EXPECT_EQ(backward.by_collective(), boundary ? (Counts{{"all_reduce", 1}}) : Counts{});
      const char* reduced = boundary ? "R" : "P(sum)";
      EXPECT_EQ(placements_of(model->norm->weight.grad()), reduced);
      EXPECT_EQ(placements_of(dx.grad()), reduced);
      EXPECT_TRUE(Close(whole(model->norm->weight.grad()), reference->norm->weight.grad()));
      EXPECT_TRUE(Close(whole(dx.grad()), reference_x.grad()));
      EXPECT_TRUE(Close(whole(model->head->weight.grad()), reference->head->weight.grad()));
    });
  }
}

// A plain output is read as output_layouts (each rank's rows) and brought
// to the desired layout; returned as a plain tensor by default.
TEST(PrepareModuleOutputTest, PlainOutputIsReadAsOutputLayouts) {
  const at::Tensor x = values({7, 3}, 0.0);
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    Probe probe;
    StyleOptions options;
    options.output_layouts = Shard::make(0);
    options.desired_output_layouts = Replicate::make();
    parallelize_module(*probe, mesh, {{"", PrepareModuleOutput(options)}});
    const at::Tensor my_rows = distribute_tensor(x, mesh, parse_placements("S(0)")).to_local();
    CollectiveCounter counter;
    const at::Tensor out = call(probe, my_rows);
    EXPECT_EQ(counter.by_collective(), (Counts{{"all_gather", 1}, {"all_gather_v", 1}}));
    EXPECT_FALSE(is_dtensor(probe->received));  // the input was left alone
    EXPECT_FALSE(is_dtensor(out));
    EXPECT_TRUE(at::equal(out, x * 10));

    // Without output_layouts a plain output has no layout to be read as.
    Probe unread;
    StyleOptions no_layout;
    no_layout.desired_output_layouts = Replicate::make();
    parallelize_module(*unread, mesh, {{"", PrepareModuleOutput(no_layout)}});
    DTENSOR_EXPECT_ERROR(call(unread, my_rows),
                         "prepare_output of '': expected the DTensor that the module's forward() "
                         "returned, found a plain tensor (was the input passed through "
                         "prepare_input?)");
  });
}

// ---------------------------------------------------------------------------
// parallelize_module: hooks and mesh scopes

// Linear -> ReLU -> Linear calling its children through call, so the plan's
// hooks move the activations.
struct MlpImpl : torch::nn::Module {
  MlpImpl()
      : fc1(register_module("fc1", torch::nn::Linear(6, 10))),
        fc2(register_module("fc2", torch::nn::Linear(10, 5))) {
    to(at::kDouble);
    fill_parameters(*this);
  }
  at::Tensor forward(const at::Tensor& x) { return call(fc2, torch::relu(call(fc1, x))); }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Mlp);

ParallelizePlan mlp_plan() {
  StyleOptions keep_dtensor;
  keep_dtensor.use_local_output = false;
  return {{"fc1", ColwiseParallel(keep_dtensor)}, {"fc2", RowwiseParallel(keep_dtensor)}};
}

// Hooks go on the planned modules only; a plain forward() of the root runs
// them through call. On one device the same model (no hooks) is forward().
TEST(ParallelizeHooksTest, PlannedModulesGetHooksAndCallRunsThem) {
  const at::Tensor x = values({7, 6}, 0.0);
  Mlp reference;
  EXPECT_FALSE(has_forward_hooks(*reference->fc1));
  const at::Tensor expected = reference->forward(x);
  EXPECT_TRUE(at::equal(call(reference, x), expected));
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    Mlp mlp;
    const ParallelModules tp = parallelize_module(*mlp, mesh, mlp_plan());
    EXPECT_TRUE(has_forward_hooks(*mlp->fc1));
    EXPECT_TRUE(has_forward_hooks(*mlp->fc2));
    EXPECT_FALSE(has_forward_hooks(*mlp));
    const at::Tensor dx = distribute_tensor(x, mesh, parse_placements("R")).tensor();
    CollectiveCounter counter;
    const at::Tensor out = mlp->forward(dx);
    // Only the row-parallel sum.
    EXPECT_EQ(counter.by_collective(), (Counts{{"all_reduce", 1}}));
    EXPECT_EQ(placements_of(out), "R");
    EXPECT_TRUE(Close(DTensor(out).full_tensor(), expected));
    // The handles still do the same by hand.
    EXPECT_TRUE(Close(whole(tp["fc2"].forward(torch::relu(tp["fc1"].forward(dx)))), expected));
  });
}

// kPerGroup: each dp group's copy is laid out over its own 1-D tp sub-mesh.
// kWholeMesh: parameters are DTensors of the whole (dp, tp) mesh, replicated
// over dp.
TEST(ParallelizeHooksTest, MeshScopesLayParametersOutOnTheirMeshes) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2}, {"dp", "tp"});
    Mlp per_group, whole_mesh, by_index;
    parallelize_module(*per_group, mesh, mlp_plan(), "tp", MeshScope::kPerGroup);
    parallelize_module(*whole_mesh, mesh, mlp_plan(), "tp", MeshScope::kWholeMesh);
    parallelize_module(*by_index, mesh, mlp_plan(), int64_t{-1}, MeshScope::kWholeMesh);
    EXPECT_EQ(DTensor(per_group->fc1->weight).mesh(), mesh["tp"]);
    EXPECT_EQ(placements_of(per_group->fc1->weight), "S(0)");
    EXPECT_EQ(placements_of(per_group->fc2->weight), "S(1)");
    for (const Mlp* m : {&whole_mesh, &by_index}) {
      EXPECT_EQ(DTensor((*m)->fc1->weight).mesh(), mesh);
      EXPECT_EQ(placements_of((*m)->fc1->weight), "R,S(0)");
      EXPECT_EQ(placements_of((*m)->fc1->bias), "R,S(0)");
      EXPECT_EQ(placements_of((*m)->fc2->weight), "R,S(1)");
      EXPECT_EQ(placements_of((*m)->fc2->bias), "R,R");
      EXPECT_TRUE(has_forward_hooks(*(*m)->fc1));
    }
  });
}

// kWholeMesh on (dp, tp) = (2, 2) with the batch split over dp (7 rows:
// 4 and 3): replicated parameters get Partial gradients over dp, which one
// all-reduce makes one device's, and SGD then trains like one device.
TEST(ParallelizeHooksTest, WholeMeshTrainsADataParallelBatchLikeOneDevice) {
  const at::Tensor x = values({7, 6}, 0.0), y = values({7, 5}, 1.5);
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2}, {"dp", "tp"});
    Mlp reference, mlp;
    parallelize_module(*mlp, mesh, mlp_plan(), "tp", MeshScope::kWholeMesh);
    torch::optim::SGD reference_sgd(reference->parameters(), 0.05);
    torch::optim::SGD sgd(mlp->parameters(), 0.05);
    const at::Tensor dx = distribute_tensor(x, mesh, parse_placements("S(0),R")).tensor();
    const at::Tensor dy = distribute_tensor(y, mesh, parse_placements("S(0),R")).tensor();
    const std::map<std::string, std::string> gradient_layouts = {{"fc1.weight", "P(sum),S(0)"},
                                                                 {"fc1.bias", "P(sum),S(0)"},
                                                                 {"fc2.weight", "P(sum),S(1)"},
                                                                 {"fc2.bias", "P(sum),R"}};
    const auto reference_parameters = reference->named_parameters();
    const auto parameters = mlp->named_parameters();
    double first_loss = 0, last_loss = 0;
    for (int step = 0; step < 3; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      for (auto& p : reference->parameters()) p.mutable_grad() = at::Tensor();
      for (auto& p : mlp->parameters()) p.mutable_grad() = at::Tensor();
      const at::Tensor reference_loss = (reference->forward(x) - y).pow(2).mean();
      reference_loss.backward();
      const at::Tensor out = mlp->forward(dx);
      EXPECT_EQ(placements_of(out), "S(0),R");
      const at::Tensor loss = (out - dy).pow(2).mean();
      loss.backward();
      last_loss = DTensor(loss).full_tensor().item<double>();
      if (step == 0) first_loss = last_loss;
      EXPECT_NEAR(last_loss, reference_loss.item<double>(), kTolerance);
      for (const auto& [name, layout] : gradient_layouts) {
        EXPECT_EQ(placements_of(parameters[name].grad()), layout) << name;
      }
      CollectiveCounter reduce;
      EXPECT_EQ(reduce_gradients(mlp->parameters()), 1);
      EXPECT_EQ(reduce.by_collective(), (Counts{{"all_reduce", 1}}));
      for (const auto& [name, layout] : gradient_layouts) {
        EXPECT_EQ(placements_of(parameters[name].grad()), placements_of(parameters[name])) << name;
        EXPECT_TRUE(Close(whole(parameters[name].grad()), reference_parameters[name].grad()))
            << name;
      }
      reference_sgd.step();
      CollectiveCounter update;
      sgd.step();
      EXPECT_EQ(update.total(), 0);
      for (const auto& [name, layout] : gradient_layouts) {
        EXPECT_TRUE(Close(whole(parameters[name]), reference_parameters[name])) << name;
      }
    }
    EXPECT_NE(first_loss, last_loss);
  });
}

// ---------------------------------------------------------------------------
// RedistributeOptions::grad_placements

// A redistribute that moves nothing records no backward by default: a
// column-parallel product's Partial input gradient reaches the replicated
// input as it is. With grad_placements Replicate it is all-reduced there.
TEST(GradPlacementsTest, NoOpRedistributeSendsTheGradientToTheNamedLayout) {
  const at::Tensor x = values({3, 4}, 0.0), w = values({6, 4}, 1.0);
  const at::Tensor expected = at::ones({3, 6}, at::kDouble).mm(w);  // d sum(x w^T) / dx
  for (const bool named : {false, true}) {
    SCOPED_TRACE(named ? "grad_placements R" : "default");
    run_ranks(4, [&](int) {
      const DeviceMesh mesh = init_device_mesh("local", {4});
      const DTensor dx = distribute_tensor(x.clone().requires_grad_(), mesh, parse_placements("R"));
      const at::Tensor dw = distribute_tensor(w, mesh, parse_placements("S(0)")).tensor();
      RedistributeOptions options;
      if (named) options.grad_placements = parse_placements("R");
      const DTensor moved = dx.redistribute(parse_placements("R"), options);
      const at::Tensor loss = at::linear(moved.tensor(), dw).sum();
      CollectiveCounter backward;
      loss.backward();
      EXPECT_EQ(backward.by_collective(), named ? (Counts{{"all_reduce", 1}}) : Counts{});
      EXPECT_EQ(placements_of(dx.tensor().grad()), named ? "R" : "P(sum)");
      EXPECT_TRUE(Close(whole(dx.tensor().grad()), expected));
    });
  }
}

TEST(GradPlacementsTest, RefusedWithAsyncOpOrTheWrongCount) {
  run_ranks(2, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2});
    const DTensor dx = distribute_tensor(values({4, 2}, 0.0), mesh, parse_placements("S(0)"));
    RedistributeOptions both;
    both.async_op = true;
    both.grad_placements = parse_placements("S(0)");
    DTENSOR_EXPECT_ERROR(dx.redistribute(parse_placements("R"), both),
                         "redistribute: expected async_op or grad_placements, found both");
    RedistributeOptions two;
    two.grad_placements = parse_placements("R,R");
    DTENSOR_EXPECT_ERROR(dx.redistribute(parse_placements("R"), two),
                         "redistribute: grad_placements: expected one per mesh dim (1), found 2");
  });
}

// ---------------------------------------------------------------------------
// Errors

TEST(ParallelStylesErrorTest, PrepareStylesNeedTheirDesiredLayouts) {
  run_ranks(2, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2});
    NormHead model;
    DTENSOR_EXPECT_ERROR(
        parallelize_module(*model, mesh, {{"norm", PrepareModuleInput(StyleOptions{})}}),
        "PrepareModuleInput at 'norm': expected desired_input_layouts, found none");
    DTENSOR_EXPECT_ERROR(
        parallelize_module(*model, mesh, {{"norm", PrepareModuleOutput(StyleOptions{})}}),
        "PrepareModuleOutput at 'norm': expected desired_output_layouts, found none");
    // The same from the registry, by name.
    DTENSOR_EXPECT_ERROR(
        parallelize_module(*model, mesh, {{"norm", parallel_style("PrepareModuleInput")}}),
        "PrepareModuleInput at 'norm': expected desired_input_layouts, found none");
    DTENSOR_EXPECT_ERROR(parallel_style("SequenceParalel"),
                         "parallel_style: expected a registered style (");
    DTENSOR_EXPECT_ERROR(parallel_style("SequenceParalel"), "found \"SequenceParalel\"");
    EXPECT_EQ(parallel_style("SequenceParallel")->name(), "SequenceParallel");
  });
}

// A plain input to a style with no input_layouts, and a module whose
// forward the style does not know.
TEST(ParallelStylesErrorTest, PlainInputWithoutALayoutAndUnknownForward) {
  run_ranks(2, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2});
    Probe probe;
    StyleOptions replicate;
    replicate.desired_input_layouts = Replicate::make();
    const ParallelModules plan =
        parallelize_module(*probe, mesh, {{"", PrepareModuleInput(replicate)}});
    DTENSOR_EXPECT_ERROR(call(probe, values({7, 3}, 0.0)),
                         "prepare_input of '': expected a DTensor (the style has no layout for a "
                         "plain tensor), found a plain tensor of shape [7, 3]");
    DTENSOR_EXPECT_ERROR(plan[""].forward(values({7, 3}, 0.0)),
                         "forward of '': expected a module with a known forward, found "
                         "dtensor::nn::(anonymous namespace)::Probe; call it through "
                         "dtensor::nn::call (the plan's hooks run there) instead");
  });
}

// Under kWholeMesh a plain tensor's layout over dp is unknown: refused; so
// is a DTensor of another mesh.
TEST(ParallelStylesErrorTest, WholeMeshRefusesPlainInputs) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2}, {"dp", "tp"});
    Mlp mlp;
    parallelize_module(*mlp, mesh, mlp_plan(), "tp", MeshScope::kWholeMesh);
    DTENSOR_EXPECT_ERROR(
        mlp->forward(values({7, 6}, 0.0)),
        "prepare_input of 'fc1': expected a DTensor on DeviceMesh((dp=2, tp=2), ranks=[0, 1, 2, "
        "3]) (a plain tensor's layout over the mesh's other dims is unknown), found a plain "
        "tensor of shape [7, 6]");
    const at::Tensor on_tp =
        distribute_tensor(values({7, 6}, 0.0), mesh["tp"], parse_placements("R")).tensor();
    DTENSOR_EXPECT_ERROR(mlp->forward(on_tp),
                         "prepare_input of 'fc1': expected a DTensor on DeviceMesh((dp=2, tp=2), "
                         "ranks=[0, 1, 2, 3]), found one on DeviceMesh((tp=2)");
  });
}

// ---------------------------------------------------------------------------
// Lifetime

// A parallelized model is freed when its last owner lets go: the hooks
// parallelize_module registers must not keep their own module alive.
TEST(ParallelizeHooksTest, ParallelizedModelIsFreedWithItsOwner) {
  run_ranks(2, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2});
    std::weak_ptr<torch::nn::Module> fc1;
    std::weak_ptr<torch::nn::Module> root;
    {
      Mlp mlp;
      parallelize_module(*mlp, mesh, mlp_plan());
      fc1 = mlp->fc1.ptr();
      root = mlp.ptr();
    }
    EXPECT_TRUE(root.expired());
    EXPECT_TRUE(fc1.expired()) << "use count " << fc1.use_count();
  });
}

}  // namespace
}  // namespace dtensor::nn
