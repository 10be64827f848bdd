// Copyright 2026 The dtensor Authors.
//
// tests/nccl/nccl_dtensor_test.cc: DTensors on CUDA over the NCCL backend,
// on every rank under `mpirun -np 2` and `-np 4` (CTest label "gpu").
//
// The random redistribute cases of the local and MPI suites (fewer of them),
// the collective counts the placements issue names, ops through the dispatch
// path, tensor-parallel training and fully_shard, all with local tensors on the GPU and
// every result compared exactly (or, for training, within float tolerance)
// with the single-device one. Without a CUDA device every test skips.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include <dtensor/core/random.h>
#include <dtensor/dtensor.h>
#include "tests/nccl/cuda_device.h"
#ifndef DTENSOR_NO_TP_MLP
#include "tests/support/tp_mlp_expectations.h"
#endif
#include <dtensor/mesh/communicator.h>
#include <dtensor/mesh/device_mesh.h>
#include <dtensor/nn/fully_shard.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/collective_counter.h>
#include "tests/support/call_op.h"
#include "tests/support/fsdp_stack.h"
#include "tests/support/redistribute_cases.h"

#if DTENSOR_TORCH_HAS_CUDA
#include <ATen/cuda/Sleep.h>
#endif

namespace dtensor {
namespace {

class NcclDTensorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!dtensor::testing::has_cuda_device()) {
      GTEST_SKIP() << "no CUDA device: the NCCL backend needs one";
    }
    world_size_ = make_world_communicator("nccl")->size();
  }

  // The meshes every world size runs: 1-D, and 2-D when the size allows.
  std::vector<std::vector<int64_t>> meshes() const {
    std::vector<std::vector<int64_t>> shapes = {{world_size_}, {1, world_size_}};
    if (world_size_ == 4) shapes.push_back({2, 2});
    return shapes;
  }

  int64_t world_size_ = 0;
};

TEST_F(NcclDTensorTest, RandomRedistributeCasesRoundTrip) {
  uint32_t seed = 9100;
  for (const std::vector<int64_t>& shape : meshes()) {
    SCOPED_TRACE(::testing::Message() << "mesh " << ::testing::PrintToString(shape));
    const DeviceMesh mesh = init_device_mesh("nccl", shape);
    ASSERT_TRUE(mesh.device().is_cuda());
    testing::RedistributeCaseTotals totals;
    testing::run_random_redistribute_cases(mesh, 80, seed++, totals);
    for (const std::string& message : totals.messages) ADD_FAILURE() << message;
    EXPECT_EQ(totals.failures, 0);
    if (mesh.world()->rank() == 0) {
      EXPECT_GE(totals.cases, 50);
    }
  }
}

TEST_F(NcclDTensorTest, IssueCollectiveCounts) {
  if (world_size_ != 4) GTEST_SKIP() << "needs 4 ranks for a (2,2) mesh";
  testing::check_issue_collective_counts(init_device_mesh("nccl", {2, 2}, {"dp", "tp"}));
}

// A matmul contracted over a sharded dim leaves Partial(sum); a pointwise op,
// a reduction and a view ride on the shards; all equal one device's result.
TEST_F(NcclDTensorTest, OpsThroughDispatchMatchOneDevice) {
  const DeviceMesh mesh = init_device_mesh("nccl", {world_size_});
  const at::TensorOptions gpu = at::TensorOptions().device(mesh.device());
  const at::Tensor a = at::arange(6 * 10, gpu.dtype(at::kFloat)).reshape({6, 10}).div(7);
  const at::Tensor b = at::arange(10 * 5, gpu.dtype(at::kFloat)).reshape({10, 5}).cos();
  const DTensor da = distribute_tensor(a, mesh, parse_placements("S(1)"));
  const DTensor db = distribute_tensor(b, mesh, parse_placements("S(0)"));

  const DTensor product(at::mm(da, db));
  EXPECT_EQ(placements_to_string(product.placements()), "P(sum)");
  EXPECT_TRUE(product.to_local().is_cuda());
  EXPECT_TRUE(at::allclose(product.full_tensor().cpu(), at::mm(a, b).cpu(), 1e-5, 1e-5));

  const DTensor rows = distribute_tensor(a, mesh, parse_placements("S(0)"));
  const DTensor summed(at::relu(rows.tensor() - 2).sum(1));
  EXPECT_EQ(placements_to_string(summed.placements()), "S(0)");
  EXPECT_TRUE(at::equal(summed.full_tensor().cpu(), at::relu(a - 2).sum(1).cpu()));

  const DTensor viewed(rows.tensor().view({6, 2, 5}));
  EXPECT_EQ(placements_to_string(viewed.placements()), "S(0)");
  EXPECT_TRUE(at::equal(viewed.full_tensor().cpu(), a.view({6, 2, 5}).cpu()));

  const at::Tensor half = a.to(at::kBFloat16);
  const DTensor dhalf = distribute_tensor(half, mesh, parse_placements("S(1)"));
  EXPECT_TRUE(at::equal(DTensor(dhalf.tensor() * 2).full_tensor().cpu(), (half * 2).cpu()));
}

// On CUDA, dropout takes the fused native_dropout; its DTensor rule draws the
// mask like the CPU kernel, so the result equals native_dropout on one CPU
// device after the same seed, exactly.
TEST_F(NcclDTensorTest, DropoutMatchesOneDevice) {
  const DeviceMesh mesh = init_device_mesh("nccl", {world_size_});
  const at::Tensor x = at::arange(7 * 5, at::kFloat).reshape({7, 5}).add(1);
  at::manual_seed(31);
  const at::Tensor expected = std::get<0>(at::native_dropout(x, 0.3, /*train=*/true));
  for (const char* layout : {"S(0)", "S(1)", "R"}) {
    SCOPED_TRACE(layout);
    dtensor::manual_seed(31);
    const DTensor y(
        at::dropout(distribute_tensor(x.to(mesh.device()), mesh, parse_placements(layout)).tensor(),
                    0.3, /*train=*/true));
    EXPECT_EQ(placements_to_string(y.placements()), layout);
    EXPECT_TRUE(at::equal(y.full_tensor().cpu(), expected));
  }
}

#if DTENSOR_TORCH_HAS_CUDA
// An async redistribute returns while its collectives are still ahead of the
// device (queued behind a long kernel on the caller's stream), and the first
// use of the result or of the source waits for them: in-place writes enqueued
// right after the call never race with the collectives.
TEST_F(NcclDTensorTest, AsyncRedistributeReturnsEarlyAndWaitsOnFirstUse) {
  constexpr int64_t kHalfSecondOfCycles = 1'000'000'000;
  const DeviceMesh mesh = init_device_mesh("nccl", {world_size_});
  const at::Tensor global =
      at::arange(8 * world_size_ * 6, at::kFloat).reshape({8 * world_size_, 6}).to(mesh.device());
  for (const char* target : {"R", "S(1)"}) {
    SCOPED_TRACE(target);
    const DTensor source = distribute_tensor(global, mesh, parse_placements("S(0)"));
    const at::Tensor expected =
        distribute_tensor(global, mesh, parse_placements(target)).to_local().cpu();
    at::cuda::sleep(kHalfSecondOfCycles);
    const DTensor result = source.redistribute(parse_placements(target), {/*async_op=*/true});
    EXPECT_FALSE(result.is_ready());
    EXPECT_FALSE(source.is_ready());
    result.to_local().add_(1);
    source.to_local().mul_(0);
    EXPECT_TRUE(at::equal(result.to_local().cpu(), expected + 1));
    EXPECT_TRUE(result.is_ready());
    EXPECT_EQ(source.to_local().abs().sum().item<float>(), 0.0f);
  }
}
#endif

// fully_shard on CUDA: the gathered parameters' storage is freed and
// refilled on the device, all-gathers are prefetched asynchronously from the
// second step; three SGD steps equal one device's (float32).
TEST_F(NcclDTensorTest, FullyShardTrainsLikeOneDevice) {
  const DeviceMesh mesh = init_device_mesh("nccl", {world_size_}, {"dp"});
  const int64_t rows = 2 * world_size_;
  const at::Tensor x = testing::stack_batch(rows).to(mesh.device(), at::kFloat);
  const at::Tensor y = testing::stack_target(rows).to(mesh.device(), at::kFloat);
  testing::Stack reference = testing::make_stack(2, at::kFloat, mesh.device());
  testing::Stack model = testing::make_stack(2, at::kFloat, mesh.device());
  for (testing::StackBlock& block : model->layers) nn::fully_shard(*block, mesh);
  const nn::FSDPModule root = nn::fully_shard(*model, mesh);
  const int64_t rank = mesh.get_local_rank(0);
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE(step);
    for (auto* net : {&reference, &model}) {
      for (at::Tensor& p : (*net)->parameters()) p.mutable_grad() = at::Tensor();
    }
    (reference->forward(x) - y).pow(2).mean().backward();
    CollectiveCounter counter;
    (model->forward(x.chunk(world_size_)[rank]) - y.chunk(world_size_)[rank])
        .pow(2)
        .mean()
        .backward();
    EXPECT_EQ(counter.count("all_gather_v"), 5);
    EXPECT_EQ(counter.count("reduce_scatter_v"), 3);
    EXPECT_EQ(root.unsharded_bytes(), 0);
    at::NoGradGuard no_grad;
    const auto want = reference->named_parameters();
    for (const auto& p : model->named_parameters()) {
      const at::Tensor grad = DTensor(p->grad()).full_tensor();
      EXPECT_TRUE(at::allclose(grad, want[p.key()].grad(), 1e-4, 1e-5)) << p.key();
      p->sub_(p->grad().mul(0.1));
      want[p.key()].sub_(want[p.key()].grad().mul(0.1));
    }
  }
}

// The fused attention kernels on CUDA (the one at::scaled_dot_product_attention
// picks, and memory-efficient, flash and cuDNN attention called directly) on
// heads split over the ranks: no collective forward or backward; each rank's
// output and gradients are exactly what the kernel gives on that rank's heads
// alone, and the whole equals one device's within the dtype's rounding (a
// kernel's work split, and so its rounding, can depend on the number of
// heads); their bookkeeping replicated. A kernel this build or GPU lacks for
// a dtype is skipped, named in the log; each kernel's return shapes, and its
// largest difference from one device, are printed for the record.
TEST_F(NcclDTensorTest, FusedAttentionSplitsHeads) {
  const DeviceMesh mesh = init_device_mesh("nccl", {world_size_});
  const at::TensorOptions gpu = at::TensorOptions().device(mesh.device());
  const c10::IValue none;
  const std::vector<std::pair<const char*, testing::NamedArguments>> kernels = {
      {"aten::scaled_dot_product_attention", {{"is_causal", true}}},
      {"aten::_scaled_dot_product_efficient_attention",
       {{"attn_bias", none}, {"compute_log_sumexp", true}, {"is_causal", true}}},
      {"aten::_scaled_dot_product_flash_attention", {{"is_causal", true}}},
      {"aten::_scaled_dot_product_cudnn_attention",
       {{"attn_bias", none}, {"compute_log_sumexp", true}, {"is_causal", true}}}};
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    const double tolerance = dtype == at::kFloat ? 1e-5 : 2e-2;
    at::manual_seed(5);  // the same inputs on every rank
    std::vector<at::Tensor> qkv;
    for (int64_t i = 0; i < 3; ++i) {
      qkv.push_back(at::randn({2, 2 * world_size_, 64, 64}, gpu.dtype(at::kFloat)).to(dtype));
    }
    for (const auto& [name, extra] : kernels) {
      SCOPED_TRACE(::testing::Message() << name << " " << dtype);
      const auto attend = [&, name = name, extra = extra](const std::vector<at::Tensor>& in) {
        testing::NamedArguments arguments = extra;
        arguments["query"] = in[0], arguments["key"] = in[1], arguments["value"] = in[2];
        return testing::call_op(name, arguments);
      };
      // cuDNN's attention has half and bfloat16 kernels only; called directly
      // in float32, PyTorch 2.11 runs it anyway and returns NaN (H100).
      if (dtype == at::kFloat &&
          std::string_view(name) == "aten::_scaled_dot_product_cudnn_attention") {
        if (mesh.world()->rank() == 0) {
          std::printf("FusedAttentionSplitsHeads: %s has no Float kernel: skipped\n", name);
        }
        continue;
      }
      std::vector<at::Tensor> reference;
      for (const at::Tensor& t : qkv) reference.push_back(t.clone().requires_grad_());
      std::optional<torch::jit::Stack> expected;
      try {
        expected = attend(reference);
      } catch (const c10::Error& e) {
        if (mesh.world()->rank() == 0) {
          std::printf("FusedAttentionSplitsHeads: %s has no %s kernel here: %s\n", name,
                      c10::toString(dtype), e.what_without_backtrace());
        }
        continue;
      }
      if (!expected.has_value()) continue;
      if (mesh.world()->rank() == 0) {
        std::printf("FusedAttentionSplitsHeads: %s %s returns", name, c10::toString(dtype));
        for (const c10::IValue& r : *expected) {
          std::printf(" %s", r.isTensor() && r.toTensor().defined()
                                 ? (::testing::PrintToString(r.toTensor().sizes().vec()) + "/" +
                                    c10::toString(r.toTensor().scalar_type()) + "/" +
                                    r.toTensor().device().str())
                                       .c_str()
                                 : r.tagKind().c_str());
        }
        std::printf("\n");
      }
      expected->front().toTensor().to(at::kFloat).pow(2).sum().backward();
      std::vector<at::Tensor> inputs;
      for (const at::Tensor& t : qkv) {
        inputs.push_back(
            distribute_tensor(t, mesh, parse_placements("S(1)")).tensor().requires_grad_());
      }
      // Exact on this shape: at 64 positions the backward kernels take one
      // key block, so no atomic adds order the sums differently per call.
      const int64_t rank = mesh.get_local_rank(0);
      std::vector<at::Tensor> own_heads;
      for (const at::Tensor& t : qkv) {
        own_heads.push_back(t.chunk(world_size_, 1)[rank].contiguous().requires_grad_());
      }
      const at::Tensor own_out = attend(own_heads)->front().toTensor();
      own_out.to(at::kFloat).pow(2).sum().backward();
      CollectiveCounter collectives;
      const torch::jit::Stack returns = *attend(inputs);
      const DTensor out(returns.front().toTensor());
      EXPECT_EQ(placements_to_string(out.placements()), "S(1)");
      out.tensor().to(at::kFloat).pow(2).sum().backward();
      EXPECT_EQ(collectives.total(), 0);
      for (size_t j = 2; j < returns.size(); ++j) {
        if (!returns[j].isTensor() || !returns[j].toTensor().defined()) continue;
        EXPECT_EQ(placements_to_string(DTensor(returns[j].toTensor()).placements()), "R") << j;
      }
      EXPECT_TRUE(at::equal(out.to_local(), own_out));
      const auto largest_difference = [](const at::Tensor& a, const at::Tensor& b) {
        return (a.to(at::kFloat) - b.to(at::kFloat)).abs().max().item<double>();
      };
      const at::Tensor full_out = out.full_tensor();
      std::string differences =
          ::testing::PrintToString(largest_difference(full_out, expected->front().toTensor()));
      EXPECT_TRUE(at::allclose(full_out.to(at::kFloat), expected->front().toTensor().to(at::kFloat),
                               tolerance, tolerance));
      for (size_t i = 0; i < 3; ++i) {
        const DTensor grad(inputs[i].grad());
        EXPECT_TRUE(at::equal(grad.to_local(), own_heads[i].grad())) << "gradient " << i;
        const at::Tensor full_grad = grad.full_tensor();
        differences +=
            " " + ::testing::PrintToString(largest_difference(full_grad, reference[i].grad()));
        EXPECT_TRUE(at::allclose(full_grad.to(at::kFloat), reference[i].grad().to(at::kFloat),
                                 tolerance, tolerance))
            << "gradient " << i;
      }
      if (rank == 0) {
        std::printf(
            "FusedAttentionSplitsHeads: %s %s: largest difference from one device "
            "(output, gradients): %s\n",
            name, c10::toString(dtype), differences.c_str());
      }
    }
  }
}

#ifndef DTENSOR_NO_TP_MLP  // built without examples
TEST_F(NcclDTensorTest, TensorParallelMlpTrainsLikeOneDevice) {
  const DeviceMesh mesh = init_device_mesh("nccl", {world_size_});
  for (bool sequence_parallel : {false, true}) {
    SCOPED_TRACE(sequence_parallel ? "sequence parallel" : "tensor parallel");
    examples::TpMlpOptions options;
    options.sequence_parallel = sequence_parallel;
    options.batch = 7;  // uneven rows in the sequence-parallel variant
    testing::expect_trains_like_one_device(examples::train_tp_mlp(mesh, options), 4);
  }
}
#endif

}  // namespace
}  // namespace dtensor
