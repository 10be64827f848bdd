// Copyright 2026 The dtensor Authors.
//
// The fused attention kernels of libtorch 2.x on DTensors split by batch or
// heads: no collective forward or backward, values and gradients equal one
// device's, the kernels' bookkeeping outputs replicated at the shapes the
// kernel gives, empty shards safe.
//
// CPU flash attention runs for real (at::scaled_dot_product_attention picks
// it for float32 on the CPU). The CUDA kernels (memory-efficient, flash,
// cuDNN) cannot run on this machine: the test gives them CPU kernels with
// their schemas' outputs (the math of attention, a log-sum-exp padded as the
// memory-efficient kernel pads it, random-state tensors, undefined
// cumulative lengths), so the rules and the dispatch around them are what is
// tested; scripts/gpu_check.sh runs the real kernels. Skipped on libtorch
// 1.13, which has none of these ops.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/library.h>

#include <cmath>
#include <string>

#include <dtensor/dispatch/fallback_recorder.h>
#include <dtensor/dtensor.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/collective_counter.h>
#include "tests/rules/rules_test_util.h"
#include "tests/support/call_op.h"
#include "tests/support/expect_error.h"

namespace dtensor {
namespace {

using testing::call_op;
using testing::op_exists;
using Arguments = testing::NamedArguments;

// --- CPU stand-ins for the CUDA kernels -----------------------------------

const c10::IValue& argument_named(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                                  const char* name) {
  const size_t first = stack.size() - op.schema().arguments().size();
  return stack[first + static_cast<size_t>(op.schema().argumentIndexWithName(name).value())];
}

at::Tensor optional_tensor(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                           const char* name) {
  if (!op.schema().argumentIndexWithName(name).has_value()) return at::Tensor();
  const c10::IValue& value = argument_named(op, stack, name);
  return value.isTensor() ? value.toTensor() : at::Tensor();
}

// Attention scores [.., seq_q, seq_k] as the kernels compute them.
at::Tensor scores(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const at::Tensor q = argument_named(op, stack, "query").toTensor();
  const at::Tensor k = argument_named(op, stack, "key").toTensor();
  const c10::IValue& scale = argument_named(op, stack, "scale");
  at::Tensor s = at::matmul(q, k.transpose(-2, -1))
                     .mul(scale.isNone() ? 1 / std::sqrt(double(q.size(-1))) : scale.toDouble());
  const at::Tensor bias = optional_tensor(op, stack, "attn_bias");
  if (bias.defined()) {
    // As CUDA's memory-efficient kernel checks (it reads aligned rows).
    TORCH_CHECK(
        op.schema().name().find("efficient") == std::string::npos ||
            (bias.stride(-2) % 16 == 0 && bias.stride(0) % 16 == 0 && bias.stride(1) % 16 == 0),
        "attn_bias is not correctly aligned: strides ", bias.strides(), " sizes ", bias.sizes());
    s = s.add(bias);
  }
  if (argument_named(op, stack, "is_causal").toBool()) {
    const at::Tensor above = at::ones({q.size(-2), k.size(-2)}, at::kBool).triu(1);
    s = s.masked_fill(above, -INFINITY);
  }
  return s;
}

// The bookkeeping return `name` the way some CUDA kernel makes it.
c10::IValue bookkeeping(const std::string& name, const at::Tensor& q, const at::Tensor& k) {
  if (name == "rng_state") return at::zeros({2}, at::kLong);
  if (name == "cum_seq_q" || name == "cum_seq_k") return at::Tensor();
  if (name == "max_q") return q.size(-2);
  if (name == "max_k") return k.size(-2);
  if (name == "debug_attn_mask") return at::empty({0}, q.options());
  return at::zeros({}, at::kLong);  // philox seed and offset, unused
}

int64_t padded_to_32(int64_t n) { return (n + 31) / 32 * 32; }

// The log-sum-exp as the CUDA kernels return it: cuDNN's with a trailing
// dim of one, the others' rows padded to 32.
at::Tensor kernel_log_sumexp(const c10::OperatorHandle& op, const at::Tensor& lse) {
  if (op.schema().name().find("cudnn") != std::string::npos) return lse.unsqueeze(-1);
  const int64_t rows = lse.size(-1);
  return at::constant_pad_nd(lse, {0, padded_to_32(rows) - rows});
}

// The stand-ins' inverse of kernel_log_sumexp: [.., seq_q].
at::Tensor plain_log_sumexp(const at::Tensor& lse, int64_t seq_q) {
  return lse.dim() == 4 ? lse.squeeze(-1) : lse.narrow(-1, 0, seq_q);
}

void fake_forward(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const at::Tensor q = argument_named(op, *stack, "query").toTensor();
  const at::Tensor k = argument_named(op, *stack, "key").toTensor();
  const at::Tensor v = argument_named(op, *stack, "value").toTensor();
  const at::Tensor s = scores(op, *stack);
  const at::Tensor lse = at::logsumexp(s, -1);
  const at::Tensor out = at::matmul(at::exp(s - lse.unsqueeze(-1)), v);
  torch::jit::drop(*stack, op.schema().arguments().size());
  for (const c10::Argument& ret : op.schema().returns()) {
    if (ret.name() == "output") {
      stack->push_back(out);
    } else if (ret.name() == "logsumexp" || ret.name() == "log_sumexp") {
      stack->push_back(kernel_log_sumexp(op, lse));
    } else {
      stack->push_back(bookkeeping(ret.name(), q, k));
    }
  }
}

void fake_backward(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const bool trailing_underscore = op.schema().argumentIndexWithName("grad_out_").has_value();
  const at::Tensor grad =
      argument_named(op, *stack, trailing_underscore ? "grad_out_" : "grad_out").toTensor();
  const at::Tensor q = argument_named(op, *stack, "query").toTensor();
  const at::Tensor k = argument_named(op, *stack, "key").toTensor();
  const at::Tensor v = argument_named(op, *stack, "value").toTensor();
  const at::Tensor out = argument_named(op, *stack, "out").toTensor();
  const at::Tensor lse =
      plain_log_sumexp(argument_named(op, *stack, "logsumexp").toTensor(), q.size(-2));
  const c10::IValue& scale_argument = argument_named(op, *stack, "scale");
  const double scale =
      scale_argument.isNone() ? 1 / std::sqrt(double(q.size(-1))) : scale_argument.toDouble();
  const at::Tensor p = at::exp(scores(op, *stack) - lse.unsqueeze(-1));
  const at::Tensor grad_p = at::matmul(grad, v.transpose(-2, -1));
  const at::Tensor grad_s = p * (grad_p - (grad * out).sum(-1, true));
  const std::vector<c10::IValue> grads = {at::matmul(grad_s, k).mul(scale),
                                          at::matmul(grad_s.transpose(-2, -1), q).mul(scale),
                                          at::matmul(p.transpose(-2, -1), grad)};
  torch::jit::drop(*stack, op.schema().arguments().size());
  for (size_t j = 0; j < op.schema().returns().size(); ++j) {
    stack->push_back(j < grads.size() ? grads[j] : c10::IValue(at::Tensor()));
  }
}

TORCH_LIBRARY_IMPL(aten, CPU, m) {
  for (const char* name :
       {"_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_cudnn_attention"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&fake_forward>());
  }
  for (const char* name : {"_scaled_dot_product_efficient_attention_backward",
                           "_scaled_dot_product_flash_attention_backward",
                           "_scaled_dot_product_cudnn_attention_backward"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&fake_backward>());
  }
}

// --- the tests ----------------------------------------------------------------

constexpr int64_t kBatch = 2, kSeq = 5, kHeadDim = 3;

at::Tensor qkv_input(int64_t heads, int64_t which, at::ScalarType dtype) {
  return at::arange(kBatch * heads * kSeq * kHeadDim, at::kDouble)
      .add(11 * which)
      .mul(0.37)
      .sin()
      .reshape({kBatch, heads, kSeq, kHeadDim})
      .to(dtype);
}

struct Layout {
  std::vector<int64_t> mesh;
  const char* placements;  // of query, key, value and the split outputs
};

// Runs `attend` (query, key, value -> output, the op's returns) on one
// device and on DTensors laid out as `layout`; checks the output and the
// gradients equal one device's, no collective runs, no op falls back.
void expect_like_one_device(
    int64_t heads, at::ScalarType dtype, const Layout& layout,
    const std::function<torch::jit::Stack(const at::Tensor&, const at::Tensor&, const at::Tensor&)>&
        attend) {
  std::vector<at::Tensor> reference;
  for (int64_t i = 0; i < 3; ++i) reference.push_back(qkv_input(heads, i, dtype).requires_grad_());
  const torch::jit::Stack one_device = attend(reference[0], reference[1], reference[2]);
  const at::Tensor expected = one_device[0].toTensor();
  const std::vector<at::Tensor> returns_on_one_device = {expected, one_device[1].toTensor()};
  expected.pow(2).sum().backward();
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", layout.mesh);
    std::vector<at::Tensor> inputs;
    for (int64_t i = 0; i < 3; ++i) {
      inputs.push_back(rules_testing::dist(qkv_input(heads, i, dtype), mesh, layout.placements)
                           .tensor()
                           .requires_grad_());
    }
    FallbackRecorder fallbacks;
    CollectiveCounter collectives;
    const torch::jit::Stack returns = attend(inputs[0], inputs[1], inputs[2]);
    const at::Tensor out = returns[0].toTensor();
    out.pow(2).sum().backward();
    EXPECT_EQ(collectives.total(), 0);
    EXPECT_TRUE(fallbacks.ops().empty());
    EXPECT_TRUE(rules_testing::Matches(out, expected, layout.placements));
    EXPECT_TRUE(
        rules_testing::Matches(returns[1].toTensor(), returns_on_one_device[1], layout.placements))
        << "log-sum-exp";
    const std::string replicated = layout.mesh.size() == 1 ? "R" : "R,R";
    for (size_t j = 2; j < returns.size(); ++j) {  // bookkeeping: replicated
      if (!returns[j].isTensor() || !returns[j].toTensor().defined()) continue;
      EXPECT_EQ(rules_testing::placements_of(returns[j].toTensor()), replicated) << "return " << j;
    }
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_TRUE(rules_testing::Matches(inputs[i].grad(), reference[i].grad(), layout.placements))
          << "gradient " << i;
    }
  });
}

// Heads split four ways (3 heads leave one rank none), batch and heads on a
// 2 x 2 mesh.
const std::vector<std::pair<int64_t, Layout>> kLayouts = {
    {4, {{4}, "S(1)"}}, {3, {{4}, "S(1)"}}, {4, {{2, 2}, "S(0),S(1)"}}, {2, {{4}, "S(0)"}}};

// `t` replicated on `like`'s mesh.
at::Tensor replicated_like(const at::Tensor& t, const at::Tensor& like) {
  const DeviceMesh mesh = DTensor(like).mesh();
  return distribute_tensor(t, mesh, std::vector<PlacementPtr>(mesh.ndim(), Replicate::make()))
      .tensor();
}

// Through at::scaled_dot_product_attention (which picks CPU flash attention
// for float32), and the kernel itself with an additive causal mask that
// broadcasts over batch and heads ([seq, seq]: replicated) and one that
// does not ([batch, heads, seq, seq]: split with the pairs).
TEST(FusedAttentionTest, CpuFlashAttentionSplitsByBatchAndHeads) {
  const char* kernel = "aten::_scaled_dot_product_flash_attention_for_cpu";
  if (!op_exists(kernel)) GTEST_SKIP() << "this libtorch has no CPU flash attention";
  const at::Tensor causal = at::full({kSeq, kSeq}, -1e9, at::kFloat).triu(1);
  for (const auto& [heads, layout] : kLayouts) {
    SCOPED_TRACE(std::to_string(heads) + " heads, " + layout.placements);
    expect_like_one_device(heads, at::kFloat, layout,
                           [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
                             return *call_op(
                                 "aten::scaled_dot_product_attention",
                                 {{"query", q}, {"key", k}, {"value", v}, {"is_causal", true}});
                           });
    // Varying within each pair, so a pair given another pair's mask differs.
    const at::Tensor per_pair = causal + at::arange(kBatch * heads * kSeq * kSeq, at::kFloat)
                                             .reshape({kBatch, heads, kSeq, kSeq})
                                             .sin();
    for (const at::Tensor& mask : {causal, per_pair}) {
      SCOPED_TRACE(mask.dim() == 2 ? "[seq, seq] mask" : "[batch, heads, seq, seq] mask");
      expect_like_one_device(
          heads, at::kFloat, layout,
          [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
            return *call_op(kernel,
                            {{"query", q},
                             {"key", k},
                             {"value", v},
                             {"attn_mask", is_dtensor(q) ? replicated_like(mask, q) : mask}});
          });
    }
  }
}

// An additive causal bias as at::scaled_dot_product_attention hands it to
// the kernels: expanded to [batch, heads, seq, seq], rows padded to 16
// elements and sliced back.
at::Tensor sdpa_causal_bias(int64_t heads) {
  const at::Tensor causal = at::full({kSeq, kSeq}, -1e9, at::kDouble).triu(1);
  return at::constant_pad_nd(causal.expand({kBatch, heads, kSeq, kSeq}), {0, 16 - kSeq})
      .narrow(-1, 0, kSeq);
}

// The CUDA kernels' forward names and the arguments each needs.
struct CudaKernel {
  const char* name;
  bool takes_bias;
};

TEST(FusedAttentionTest, CudaKernelsSplitByBatchAndHeads) {
  int tested = 0;
  for (const CudaKernel kernel : {CudaKernel{"aten::_scaled_dot_product_efficient_attention", true},
                                  CudaKernel{"aten::_scaled_dot_product_flash_attention", false},
                                  CudaKernel{"aten::_scaled_dot_product_cudnn_attention", true}}) {
    if (!op_exists(kernel.name)) continue;
    ++tested;
    for (const auto& [heads, layout] : kLayouts) {
      SCOPED_TRACE(std::string(kernel.name) + ", " + std::to_string(heads) + " heads, " +
                   layout.placements);
      const at::Tensor bias = sdpa_causal_bias(heads);
      expect_like_one_device(heads, at::kDouble, layout,
                             [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
                               Arguments arguments = {{"query", q}, {"key", k}, {"value", v}};
                               if (kernel.takes_bias) {
                                 arguments["attn_bias"] =
                                     is_dtensor(q) ? replicated_like(bias, q) : bias;
                                 arguments["compute_log_sumexp"] = true;
                               } else {
                                 arguments["is_causal"] = true;
                               }
                               return *call_op(kernel.name, arguments);
                             });
    }
  }
  if (tested == 0) GTEST_SKIP() << "this libtorch has no fused CUDA attention kernels";
}

// With dropout each rank's kernel would draw its own mask: refused.
TEST(FusedAttentionTest, DropoutIsRefused) {
  const char* name = "aten::_scaled_dot_product_efficient_attention";
  if (!op_exists(name)) GTEST_SKIP() << "this libtorch has no " << name;
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    Arguments arguments = {
        {"attn_bias", c10::IValue()}, {"compute_log_sumexp", true}, {"dropout_p", 0.5}};
    const char* names[] = {"query", "key", "value"};
    for (int64_t i = 0; i < 3; ++i) {
      arguments[names[i]] =
          rules_testing::dist(qkv_input(4, i, at::kDouble), mesh, "S(1)").tensor();
    }
    DTENSOR_EXPECT_ERROR(call_op(name, arguments), "dropout_p = 0.5 on DTensors; expected 0");
  });
}

}  // namespace
}  // namespace dtensor
