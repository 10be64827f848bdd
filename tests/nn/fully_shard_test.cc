// Copyright 2026 The dtensor Authors.
//
// dtensor::nn::fully_shard: a stack of residual MLP blocks trained with
// FSDP on 4 ranks of the local backend equals the same model trained on one
// device on the whole batch (float64: every loss, gradient and parameter to
// 1e-9), with one all-gather per group and forward, one more per resharded
// group in backward, one reduce-scatter per group; parameters held per rank
// are 1/N of the model plus what one group gathers.
#include <dtensor/nn/fully_shard.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <dtensor/dtensor.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/nn/module_hooks.h>
#include <dtensor/nn/parallelize.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/collective_counter.h>
#include "tests/support/expect_error.h"
#include "tests/support/fsdp_stack.h"

namespace dtensor::nn {
namespace {

using Counts = std::map<std::string, int64_t, std::less<>>;

using testing::kStackHidden;
using testing::kStackIn;
using testing::kStackOut;
using testing::Stack;
using testing::StackBlock;

Stack make_stack(int64_t blocks, at::ScalarType dtype = at::kDouble) {
  return testing::make_stack(blocks, dtype);
}

at::Tensor batch(int64_t rows) { return testing::stack_batch(rows); }
at::Tensor target(int64_t rows) { return testing::stack_target(rows); }

struct Reference {
  std::vector<double> losses;
  std::vector<std::map<std::string, at::Tensor>> grads;   // per step
  std::vector<std::map<std::string, at::Tensor>> params;  // after each step
};

std::map<std::string, at::Tensor> snapshot(Stack& model, bool grads) {
  std::map<std::string, at::Tensor> out;
  for (const auto& p : model->named_parameters()) {
    const at::Tensor& t = grads ? p->grad() : *p;
    out[p.key()] = is_dtensor(t) ? DTensor(t).full_tensor() : t.detach().clone();
  }
  return out;
}

template <typename Optimizer, typename OptimizerOptions>
Reference train_one_device(int64_t steps, int64_t rows, const OptimizerOptions& options) {
  Stack model = make_stack(2);
  Optimizer optimizer(model->parameters(), options);
  Reference ref;
  for (int64_t step = 0; step < steps; ++step) {
    for (auto& p : model->parameters()) p.mutable_grad() = at::Tensor();
    at::Tensor loss = (model->forward(batch(rows)) - target(rows)).pow(2).mean();
    loss.backward();
    ref.losses.push_back(loss.item<double>());
    ref.grads.push_back(snapshot(model, true));
    optimizer.step();
    ref.params.push_back(snapshot(model, false));
  }
  return ref;
}

void expect_close(const std::map<std::string, at::Tensor>& got,
                  const std::map<std::string, at::Tensor>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, tensor] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_TRUE(at::allclose(got.at(name), tensor, 0, 1e-9))
        << what << " " << name << ": max diff "
        << (got.at(name) - tensor).abs().max().item<double>();
  }
}

// Trains `make_stack(2)` with FSDP on 4 ranks (each rank 2 of the 8 rows)
// and compares every step with one device.
template <typename Optimizer, typename OptimizerOptions>
void train_and_compare(const OptimizerOptions& options, FullyShardOptions fsdp) {
  constexpr int64_t kRows = 8, kSteps = 3;
  const Reference ref = train_one_device<Optimizer>(kSteps, kRows, options);
  run_ranks(4, [&](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4}, {"dp"});
    Stack model = make_stack(2);
    for (StackBlock& block : model->layers) fully_shard(*block, mesh, fsdp);
    fully_shard(*model, mesh, fsdp);
    Optimizer optimizer(model->parameters(), options);
    const at::Tensor x = batch(kRows).chunk(4)[rank];
    const at::Tensor y = target(kRows).chunk(4)[rank];
    for (int64_t step = 0; step < kSteps; ++step) {
      for (auto& p : model->parameters()) p.mutable_grad() = at::Tensor();
      at::Tensor loss = (model->forward(x) - y).pow(2).mean();
      loss.backward();
      // The whole batch's loss: the mean of the ranks' means.
      const double total = DTensor(from_local(loss.detach().reshape({1}), mesh, {Shard::make(0)}))
                               .full_tensor()
                               .mean()
                               .item<double>();
      EXPECT_NEAR(total, ref.losses[step], 1e-12) << "step " << step;
      expect_close(snapshot(model, true), ref.grads[step], "grad step " + std::to_string(step));
      optimizer.step();
      expect_close(snapshot(model, false), ref.params[step], "param step " + std::to_string(step));
    }
  });
}

TEST(FullyShardTest, ParametersAreShardedDim0AsTorchChunk) {
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4}, {"dp"});
    Stack model = make_stack(1);
    const Stack reference = make_stack(1);
    for (StackBlock& block : model->layers) fully_shard(*block, mesh);
    const FSDPModule root = fully_shard(*model, mesh);
    EXPECT_EQ(root.sharded_parameters().size(), 4u);  // input and output weight and bias
    const auto want = reference->named_parameters();
    for (const auto& p : model->named_parameters()) {
      ASSERT_TRUE(is_dtensor(*p)) << p.key();
      const DTensor parameter(*p);
      EXPECT_EQ(placements_to_string(parameter.placements()), "S(0)") << p.key();
      EXPECT_TRUE(at::equal(parameter.full_tensor(), want[p.key()])) << p.key();
      const at::Tensor local = parameter.to_local();
      EXPECT_TRUE(at::equal(local, want[p.key()].chunk(4).size() > static_cast<size_t>(rank)
                                       ? want[p.key()].chunk(4)[rank]
                                       : want[p.key()].narrow(0, 0, 0)))
          << p.key();
    }
    // output.weight has 3 rows: ranks 0..2 hold one, rank 3 none.
    EXPECT_EQ(DTensor(model->output->weight).placements().size(), 1u);
    EXPECT_EQ(DTensor(model->named_parameters()["output.weight"]).to_local().size(0),
              rank < 3 ? 1 : 0);
  });
}

TEST(FullyShardTest, SgdEqualsOneDevice) {
  train_and_compare<torch::optim::SGD>(torch::optim::SGDOptions(0.1), {});
}

TEST(FullyShardTest, AdamWEqualsOneDevice) {
  train_and_compare<torch::optim::AdamW>(torch::optim::AdamWOptions(0.01), {});
}

TEST(FullyShardTest, WithoutReshardAfterForwardEqualsOneDevice) {
  train_and_compare<torch::optim::SGD>(torch::optim::SGDOptions(0.1),
                                       {.reshard_after_forward = false});
}

TEST(FullyShardTest, OneAllGatherPerGroupAndOneReduceScatter) {
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4}, {"dp"});
    Stack model = make_stack(2);
    for (StackBlock& block : model->layers) fully_shard(*block, mesh);
    const FSDPModule root = fully_shard(*model, mesh);
    const at::Tensor x = batch(8).chunk(4)[rank];
    for (int step = 0; step < 2; ++step) {
      for (auto& p : model->parameters()) p.mutable_grad() = at::Tensor();
      CollectiveCounter forward;
      at::Tensor loss = model->forward(x).pow(2).mean();
      // 3 groups (2 blocks, the root's input and output layers).
      EXPECT_EQ(forward.by_collective(), (Counts{{"all_gather_v", 3}}));
      CollectiveCounter backward;
      loss.backward();
      // The blocks were freed after forward and gather again; the root was
      // not (its forward is called directly) and is freed after backward.
      EXPECT_EQ(backward.by_collective(), (Counts{{"all_gather_v", 2}, {"reduce_scatter_v", 3}}));
      EXPECT_EQ(root.unsharded_bytes(), 0);
    }
  });
}

// From the second step on (the first teaches the groups' order), the next
// group's all-gather is issued before the current group computes; not
// when prefetching is turned off.
TEST(FullyShardTest, TheNextGroupIsPrefetchedOnceTheOrderIsKnown) {
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4}, {"dp"});
    Stack model = make_stack(2);
    for (StackBlock& block : model->layers) fully_shard(*block, mesh);
    const FSDPModule root = fully_shard(*model, mesh);
    const CollectiveCounter* step_counter = nullptr;
    int64_t gathers_before_first_block_computes = -1;
    register_forward_pre_hook(*model->layers[0]->down, [&](const at::Tensor& x) {
      gathers_before_first_block_computes = step_counter->count("all_gather_v");
      return x;
    });
    const at::Tensor x = batch(8).chunk(4)[rank];
    for (int step = 0; step < 4; ++step) {
      root.set_prefetch(step != 2);
      CollectiveCounter counter;
      step_counter = &counter;
      model->forward(x).pow(2).mean().backward();
      // The root's and the first block's; then the second block's too,
      // unless prefetching is off.
      EXPECT_EQ(gathers_before_first_block_computes, step == 0 || step == 2 ? 2 : 3)
          << "step " << step;
      EXPECT_EQ(counter.by_collective(), (Counts{{"all_gather_v", 5}, {"reduce_scatter_v", 3}}));
    }
  });
}

TEST(FullyShardTest, PeakGatheredBytesAreOneGroupAtATimePlusTheRoot) {
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4}, {"dp"});
    Stack model = make_stack(3);
    const int64_t block_bytes = static_cast<int64_t>(
        (4 * kStackHidden * kStackHidden + 2 * kStackHidden + kStackHidden) * sizeof(double));
    const int64_t root_bytes = static_cast<int64_t>(
        (kStackIn * kStackHidden + kStackHidden + kStackHidden * kStackOut + kStackOut) *
        sizeof(double));
    for (StackBlock& block : model->layers) fully_shard(*block, mesh);
    const FSDPModule root = fully_shard(*model, mesh);
    EXPECT_EQ(root.unsharded_bytes(), 0);
    model->forward(batch(8).chunk(4)[rank]).pow(2).mean().backward();
    EXPECT_EQ(root.peak_unsharded_bytes(), root_bytes + block_bytes);
    EXPECT_EQ(root.unsharded_bytes(), 0);
  });
}

TEST(FullyShardTest, UnshardReshardAndKeepingGatheredAfterBackward) {
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4}, {"dp"});
    Stack model = make_stack(1);
    for (StackBlock& block : model->layers) fully_shard(*block, mesh);
    const FSDPModule root = fully_shard(*model, mesh);
    const FSDPModule block = fsdp_module(*model->layers[0]);
    const int64_t root_bytes = static_cast<int64_t>(
        (kStackIn * kStackHidden + kStackHidden + kStackHidden * kStackOut + kStackOut) *
        sizeof(double));
    {
      CollectiveCounter counter;
      root.unshard();
      root.unshard();  // already gathered
      EXPECT_EQ(counter.total(), 1);
      EXPECT_EQ(root.unsharded_bytes(), root_bytes);
      // Gathered, the members are the whole parameters.
      EXPECT_FALSE(is_dtensor(model->output->weight));
      EXPECT_EQ(model->output->weight.sizes(), (std::vector<int64_t>{kStackOut, kStackHidden}));
      root.reshard();
      EXPECT_EQ(root.unsharded_bytes(), 0);
      EXPECT_TRUE(is_dtensor(model->output->weight));
    }
    root.set_reshard_after_backward(false);
    const at::Tensor x = batch(8).chunk(4)[rank];
    model->forward(x).pow(2).mean().backward();
    // Nothing freed after backward: the block (resharded after forward,
    // gathered again for backward) and the root stay gathered...
    EXPECT_GT(root.unsharded_bytes(), root_bytes);
    // ...so the next forward gathers nothing.
    CollectiveCounter counter;
    model->forward(x);
    EXPECT_EQ(counter.count("all_gather_v"), 0);
    block.reshard();
    root.reshard();
    EXPECT_EQ(root.unsharded_bytes(), 0);
  });
}

// The table of fully_shard'ed modules holds them weakly: a model made where
// a dead one was is a new model.
TEST(FullyShardTest, AModuleAtADeadOnesAddressIsNew) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4}, {"dp"});
    for (int round = 0; round < 3; ++round) {
      Stack model = make_stack(1);
      fully_shard(*model->layers[0], mesh);
      fully_shard(*model, mesh);
    }
  });
}

class OnMetaImpl : public torch::nn::Module {
 public:
  OnMetaImpl() {
    register_parameter("weight", at::empty({4}, at::TensorOptions().device(at::kMeta)));
  }
};
TORCH_MODULE(OnMeta);

TEST(FullyShardTest, AParameterOffTheMeshsDeviceIsRefused) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4}, {"dp"});
    OnMeta module;
    DTENSOR_EXPECT_ERROR(fully_shard(*module, mesh),
                         "expected it on the mesh's device cpu, found it on meta");
  });
}

TEST(FullyShardTest, GradientAccumulationWithoutSyncEqualsOneBigBatch) {
  const Reference ref = train_one_device<torch::optim::SGD>(1, 16, torch::optim::SGDOptions(0.1));
  run_ranks(4, [&](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4}, {"dp"});
    Stack model = make_stack(2);
    for (StackBlock& block : model->layers) fully_shard(*block, mesh);
    const FSDPModule root = fully_shard(*model, mesh);
    torch::optim::SGD optimizer(model->parameters(), 0.1);
    // Rank r's 4 rows of the 16, as two micro-batches of 2.
    const at::Tensor x = batch(16).chunk(4)[rank];
    const at::Tensor y = target(16).chunk(4)[rank];
    CollectiveCounter counter;
    for (int micro = 0; micro < 2; ++micro) {
      root.set_requires_gradient_sync(micro == 1);
      at::Tensor loss = (model->forward(x.chunk(2)[micro]) - y.chunk(2)[micro]).pow(2).mean();
      (loss / 2).backward();
    }
    EXPECT_EQ(counter.count("reduce_scatter_v"), 3);  // the last micro-batch only
    expect_close(snapshot(model, true), ref.grads[0], "accumulated grad");
    optimizer.step();
    expect_close(snapshot(model, false), ref.params[0], "param");
  });
}

TEST(FullyShardTest, MixedPrecisionComputesInParamDtypeAndKeepsShardsInTheirs) {
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4}, {"dp"});
    Stack model = make_stack(2, at::kFloat);
    const MixedPrecisionPolicy mp{.param_dtype = at::kBFloat16, .reduce_dtype = at::kFloat};
    for (StackBlock& block : model->layers) fully_shard(*block, mesh, {.mp_policy = mp});
    fully_shard(*model, mesh, {.mp_policy = mp});
    // One device under the same casts: bfloat16 parameters and inputs.
    Stack reference = make_stack(2, at::kFloat);
    reference->to(at::kBFloat16);
    const at::Tensor x = batch(8).to(at::kBFloat16);
    const at::Tensor want = reference->forward(x);
    (want.to(at::kFloat) - target(8).to(at::kFloat)).pow(2).mean().backward();
    at::Tensor out = model->forward(x.chunk(4)[rank]);
    EXPECT_EQ(out.scalar_type(), at::kBFloat16);
    EXPECT_TRUE(at::allclose(out.to(at::kFloat), want.chunk(4)[rank].to(at::kFloat), 1e-2, 1e-2));
    (out.to(at::kFloat) - target(8).to(at::kFloat).chunk(4)[rank]).pow(2).mean().backward();
    const auto ref_params = reference->named_parameters();
    for (const auto& p : model->named_parameters()) {
      EXPECT_EQ(DTensor(*p).dtype(), at::kFloat) << p.key();
      const at::Tensor grad = DTensor(p->grad()).full_tensor();
      EXPECT_EQ(grad.scalar_type(), at::kFloat);
      const at::Tensor ref_grad = ref_params[p.key()].grad().to(at::kFloat);
      EXPECT_TRUE(at::allclose(grad, ref_grad, 2e-2, 2e-2))
          << p.key() << " " << (grad - ref_grad).abs().max().item<double>();
    }
  });
}

// Two SGD steps (lr 0.1) of `model` on data rank `data_rank`'s quarter of
// the batch, every gradient and parameter compared with `ref`'s.
// Returns each step's collectives (forward, backward and update).
std::vector<Counts> expect_sgd_steps_like(const Reference& ref, Stack& model, int64_t data_rank) {
  constexpr int64_t kRows = 8;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  const at::Tensor x = batch(kRows).chunk(4)[data_rank];
  const at::Tensor y = target(kRows).chunk(4)[data_rank];
  std::vector<Counts> collectives;
  for (int64_t step = 0; step < 2; ++step) {
    for (auto& p : model->parameters()) p.mutable_grad() = at::Tensor();
    Counts& counts = collectives.emplace_back();
    {
      CollectiveCounter counter;
      (model->forward(x) - y).pow(2).mean().backward();
      counts.insert(counter.by_collective().begin(), counter.by_collective().end());
    }
    expect_close(snapshot(model, true), ref.grads[step], "grad step " + std::to_string(step));
    {
      CollectiveCounter counter;
      optimizer.step();
      for (const auto& [kind, count] : counter.by_collective()) counts[kind] += count;
    }
    expect_close(snapshot(model, false), ref.params[step], "param step " + std::to_string(step));
  }
  return collectives;
}

TEST(FullyShardTest, HsdpOnA2DMeshEqualsOneDevice) {
  constexpr int64_t kRows = 8;
  const Reference ref =
      train_one_device<torch::optim::SGD>(2, kRows, torch::optim::SGDOptions(0.1));
  run_ranks(4, [&](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2}, {"replicate", "shard"});
    Stack model = make_stack(2);
    for (StackBlock& block : model->layers) fully_shard(*block, mesh);
    fully_shard(*model, mesh);
    EXPECT_EQ(placements_to_string(DTensor(model->output->weight).placements()), "R,S(0)");
    // Per step: each group's all-gather over "shard" before its forward and
    // again before a block's backward (3 + 2), and per group one all-reduce
    // over both dims that leaves each rank its shard of the averaged
    // gradient (the planner's cheapest form of reduce-scatter + all-reduce).
    for (const Counts& step : expect_sgd_steps_like(ref, model, rank)) {
      EXPECT_EQ(step, (Counts{{"all_gather_v", 5}, {"all_reduce", 3}}));
    }
  });
}

// HSDP over tensor parallelism on 8 ranks, a (replicate 2, shard 2, tp 2)
// mesh (tp last, or between replicate and shard): each block's MLP split colwise / rowwise over
// "tp", then every group sharded over ("replicate", "shard"). Parameters are laid out tp piece
// first, then its shard piece; every gradient and parameter equals one
// device's trained on the whole batch (each data rank feeds its quarter).
TEST(FullyShardTest, HsdpOverTensorParallelEqualsOneDevice) {
  constexpr int64_t kRows = 8;
  const Reference ref =
      train_one_device<torch::optim::SGD>(2, kRows, torch::optim::SGDOptions(0.1));
  // Mesh dim names in the root's order, and the layouts of up.weight (tp
  // Shard(0)), down.weight (tp Shard(1)) and down.bias (tp Replicate).
  struct Case {
    std::vector<std::string> names;
    const char* up;
    const char* down;
    const char* bias;
  };
  for (const Case& c :
       {Case{{"replicate", "shard", "tp"}, "R,SS(0,2),S(0)", "R,S(0),S(1)", "R,S(0),R"},
        Case{{"replicate", "tp", "shard"}, "R,S(0),S(0)", "R,S(1),S(0)", "R,R,S(0)"}}) {
    SCOPED_TRACE(c.up);
    run_ranks(8, [&](int) {
      const DeviceMesh mesh = init_device_mesh("local", {2, 2, 2}, c.names);
      const DeviceMesh dp = mesh[{"replicate", "shard"}];
      Stack model = make_stack(2);
      for (StackBlock& block : model->layers) {
        parallelize_module(*block, mesh["tp"],
                           {{"up", ColwiseParallel()}, {"down", RowwiseParallel()}});
        fully_shard(*block, dp);
      }
      fully_shard(*model, dp);
      const StackBlock& block = model->layers[0];
      EXPECT_EQ(placements_to_string(DTensor(block->up->weight).placements()), c.up);
      EXPECT_EQ(placements_to_string(DTensor(block->down->weight).placements()), c.down);
      EXPECT_EQ(placements_to_string(DTensor(block->down->bias).placements()), c.bias);
      EXPECT_EQ(placements_to_string(DTensor(model->output->weight).placements()), "R,S(0)");
      // Per step, HSDP's (above) plus tensor parallelism's: per block one
      // all-reduce of the rowwise output and one of the colwise input's
      // gradient, and the small all-gather with which from_local checks
      // each plain input the styles take (x, and up's local output: uneven
      // shards need every rank's size).
      for (const Counts& step :
           expect_sgd_steps_like(ref, model, dp.coordinate()[0] * 2 + dp.coordinate()[1])) {
        EXPECT_EQ(step, (Counts{{"all_gather", 4}, {"all_gather_v", 5}, {"all_reduce", 7}}));
      }
    });
  }
}

TEST(FullyShardTest, BadInputIsRefusedOnEveryRank) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4}, {"dp"});
    {
      Stack model = make_stack(1);
      fully_shard(*model->layers[0], mesh);
      DTENSOR_EXPECT_ERROR(fully_shard(*model->layers[0], mesh), "not fully_shard'ed yet");
    }
    {
      const DeviceMesh cube = init_device_mesh("local", {1, 2, 2}, {"a", "b", "c"});
      Stack model = make_stack(1);
      DTENSOR_EXPECT_ERROR(fully_shard(*model, cube), "expected a 1-D mesh (FSDP) or a 2-D one");
    }
    {
      Stack model = make_stack(1);
      model->output->to(at::kFloat);  // the rest stays float64
      DTENSOR_EXPECT_ERROR(fully_shard(*model, mesh),
                           "expected the parameters of a group in one dtype");
    }
    {
      Stack model = make_stack(1);
      torch::optim::SGD early(model->parameters(), 0.1);
      DTENSOR_EXPECT_ERROR(fully_shard(*model, mesh), "still referenced");
    }
  });
}

class BlocksImpl : public torch::nn::Module {
 public:
  BlocksImpl() {
    first = register_module("first", StackBlock());
    second = register_module("second", StackBlock());
  }
  at::Tensor forward(const at::Tensor& x) { return call(second, call(first, x)); }
  StackBlock first{nullptr}, second{nullptr};
};
TORCH_MODULE(Blocks);

Blocks make_blocks() {
  std::lock_guard<std::mutex> lock(testing::model_initialization_mutex());
  at::manual_seed(3);
  Blocks blocks;
  blocks->to(at::kDouble);
  return blocks;
}

TEST(FullyShardTest, ARootWithoutParametersOfItsOwnIsFine) {
  Blocks reference = make_blocks();
  const at::Tensor x =
      at::linspace(-1, 1, 4 * kStackHidden, at::kDouble).reshape({4, kStackHidden});
  reference->forward(x).pow(2).mean().backward();
  run_ranks(4, [&](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4}, {"dp"});
    Blocks model = make_blocks();
    fully_shard(*model->first, mesh);
    fully_shard(*model->second, mesh);
    const FSDPModule root = fully_shard(*model, mesh);
    EXPECT_TRUE(root.sharded_parameters().empty());
    model->forward(x.chunk(4)[rank]).pow(2).mean().backward();
    const auto want = reference->named_parameters();
    for (const auto& p : model->named_parameters()) {
      EXPECT_TRUE(at::allclose(DTensor(p->grad()).full_tensor(), want[p.key()].grad(), 0, 1e-12))
          << p.key();
    }
  });
}

}  // namespace
}  // namespace dtensor::nn
