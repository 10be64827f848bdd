// Copyright 2026 The dtensor Authors.
//
// Attention on DTensors split by heads: the batched matmuls of ordinary
// ATen attention code (view to heads, transpose, matmul of 4-D tensors,
// which reshapes to [B*H, S, d] and back) keep the heads split, so neither
// the forward nor the backward communicates; values and gradients equal one
// device's.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include <dtensor/dispatch/dispatch.h>
#include <dtensor/dispatch/fallback_recorder.h>
#include <dtensor/dtensor.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/collective_counter.h>
#include "tests/rules/rules_test_util.h"

namespace dtensor {
namespace {

using rules_testing::dist;

constexpr int64_t kBatch = 2, kHeads = 4, kSeq = 5, kHeadDim = 3;

// Causal attention over [B, H, S, d] queries, keys and values, as a model
// writes it.
at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const at::Tensor& causal) {
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)).div(std::sqrt(double{kHeadDim}));
  scores = scores.masked_fill(causal.logical_not(), -1e9);
  return at::matmul(at::softmax(scores, -1), v);
}

// [B, S, H*d] projections viewed as heads: [B, H, S, d].
at::Tensor heads_of(const at::Tensor& projected) {
  return projected.view({kBatch, kSeq, kHeads, kHeadDim}).transpose(1, 2);
}

TEST(AttentionTest, HeadShardedAttentionNeedsNoCollectives) {
  std::vector<at::Tensor> qkv;
  for (int64_t i = 0; i < 3; ++i) {
    qkv.push_back(at::arange(kBatch * kSeq * kHeads * kHeadDim, at::kDouble)
                      .add(7 * i)
                      .sin()
                      .reshape({kBatch, kSeq, kHeads * kHeadDim}));
  }
  const at::Tensor causal = at::ones({kSeq, kSeq}, at::kBool).tril();
  std::vector<at::Tensor> reference;
  for (const at::Tensor& t : qkv) reference.push_back(t.clone().requires_grad_());
  const at::Tensor expected =
      attention(heads_of(reference[0]), heads_of(reference[1]), heads_of(reference[2]), causal);
  expected.pow(2).sum().backward();
  struct Case {
    std::vector<int64_t> mesh;
    const char* projected;  // [B, S, H*d]
    const char* heads;      // [B, H, S, d]
  };
  for (const Case& c : {Case{{4}, "S(2)", "S(1)"}, Case{{2, 2}, "S(0),S(2)", "S(0),S(1)"}}) {
    SCOPED_TRACE(c.projected);
    run_ranks(4, [&](int) {
      const DeviceMesh mesh = init_device_mesh("local", c.mesh);
      std::vector<DTensor> inputs;
      for (const at::Tensor& t : qkv)
        inputs.push_back(dist(t.clone().requires_grad_(), mesh, c.projected));
      const std::vector<PlacementPtr> whole(c.mesh.size(), Replicate::make());
      const at::Tensor mask = distribute_tensor(causal, mesh, whole).tensor();
      FallbackRecorder fallbacks;
      CollectiveCounter forward;
      const at::Tensor out =
          attention(heads_of(inputs[0]), heads_of(inputs[1]), heads_of(inputs[2]), mask);
      EXPECT_EQ(forward.total(), 0);
      EXPECT_EQ(rules_testing::placements_of(out), c.heads);
      const at::Tensor loss = out.pow(2).sum();
      CollectiveCounter backward;
      loss.backward();
      EXPECT_EQ(backward.total(), 0);
      EXPECT_TRUE(fallbacks.ops().empty());
      EXPECT_TRUE(at::allclose(DTensor(out).full_tensor(), expected, 1e-12, 1e-12));
      for (size_t i = 0; i < 3; ++i) {
        const DTensor grad(inputs[i].tensor().grad());
        EXPECT_EQ(placements_to_string(grad.placements()), c.projected);
        EXPECT_TRUE(at::allclose(grad.full_tensor(), reference[i].grad(), 1e-12, 1e-12)) << i;
      }
    });
  }
}

}  // namespace
}  // namespace dtensor
