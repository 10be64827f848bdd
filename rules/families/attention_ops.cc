// Copyright 2026 The dtensor Authors.
//
// rules/families/attention_ops.cc: the fused scaled-dot-product attention
// kernels that libtorch 2.x's at::scaled_dot_product_attention picks on CPU
// (flash attention), and their backward.
//
// Attention mixes positions within one (batch, head) pair only: query, key,
// value [batch, heads, seq, head_dim], the output and the row log-sum-exp
// [batch, heads, seq] split alike along batch or heads compute each rank's
// pairs alone, with no communication (Megatron's head-parallel attention).
// A mask broadcast over that dim (a [seq, seq] causal mask) is replicated; a
// 4-D one with that dim is split with the others. Only without dropout:
// each rank would draw its own mask. libtorch 1.13's
// at::_scaled_dot_product_attention decomposes into ops with their own rules
// instead. The CUDA kernels (flash, efficient, cuDNN) return random-state
// tensors too and have no rows yet: on CUDA meshes they run replicated.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>

#include <dtensor/placements/replicate.h>
#include <dtensor/placements/shard.h>
#include <dtensor/rules/local_kernel.h>
#include <dtensor/rules/propagation.h>
#include <dtensor/rules/registration.h>

namespace dtensor {
namespace {

// One row per split dim (batch, heads): every input split on it but a mask
// that broadcasts over it, every output split on it.
std::vector<ShardingRow> attention_rows(const OpCall& call, size_t outputs) {
  std::vector<ShardingRow> rows;
  if (call.argument("dropout_p").toDouble() != 0) return rows;
  for (const int64_t dim : {0, 1}) {
    // Grouped key/value heads (fewer than the query's) would pair query
    // heads with another rank's key/value heads: only equal counts split.
    bool equal = true;
    for (size_t i = 1; i < call.num_inputs(); ++i) {
      const std::vector<int64_t>& shape = call.input(i).spec->shape();
      const bool mask = call.schema().arguments()[call.input(i).argument].name() == "attn_mask";
      if (!mask && shape.size() == 4 && shape[dim] != call.input(0).spec->shape()[dim]) {
        equal = false;
      }
    }
    if (!equal) continue;
    ShardingRow row;
    for (size_t i = 0; i < call.num_inputs(); ++i) {
      const bool mask = call.schema().arguments()[call.input(i).argument].name() == "attn_mask";
      const std::vector<int64_t>& shape = call.input(i).spec->shape();
      // The mask broadcasts from the right: its dim for `dim`, if it has one.
      const int64_t own = dim - (4 - static_cast<int64_t>(shape.size()));
      const bool broadcast = mask && (own < 0 || shape[own] == 1);
      row.inputs.push_back(broadcast ? Replicate::make() : Shard::make(mask ? own : dim));
    }
    row.outputs.assign(outputs, Shard::make(dim));
    rows.push_back(std::move(row));
  }
  return rows;
}

// (query, key, value, ...) -> (output [.., seq_q, head_dim_v], logsumexp
// [batch, heads, seq_q]).
std::vector<std::vector<int64_t>> forward_shapes(const OpCall& call) {
  std::vector<int64_t> output = call.input(0).spec->shape();
  output.back() = call.input(2).spec->shape().back();
  std::vector<int64_t> logsumexp(output.begin(), output.end() - 1);
  return {output, logsumexp};
}

// (grad_out, query, key, value, ...) -> the gradients of query, key, value.
std::vector<std::vector<int64_t>> backward_shapes(const OpCall& call) {
  return {call.input(1).spec->shape(), call.input(2).spec->shape(), call.input(3).spec->shape()};
}

// A rank whose shard holds no (batch, head) pair gets empty outputs without
// calling the kernel: libtorch 2.14's CPU flash attention divides by zero on
// empty inputs.
void empty_safe_kernel(const c10::OperatorHandle& op, torch::jit::Stack& stack, const LocalContext&,
                       bool backward) {
  const size_t arguments = op.schema().arguments().size();
  const size_t query = stack.size() - arguments + (backward ? 1 : 0);
  const at::Tensor q = stack[query].toTensor(), k = stack[query + 1].toTensor(),
                   v = stack[query + 2].toTensor();
  if (q.numel() != 0 && k.numel() != 0 && v.numel() != 0) {
    op.callBoxed(stack);
    return;
  }
  torch::jit::drop(stack, arguments);
  if (backward) {
    for (const at::Tensor& t : {q, k, v}) stack.push_back(at::zeros_like(t));
    return;
  }
  std::vector<int64_t> shape = q.sizes().vec();
  shape.back() = v.size(-1);
  stack.push_back(at::zeros(shape, q.options()));
  shape.pop_back();
  stack.push_back(at::zeros(shape, q.options().dtype(at::toOpMathType(q.scalar_type()))));
}

}  // namespace

DTENSOR_REGISTER(attention_ops) {
  Strategy forward;
  forward.rows = [](const OpCall& call, int64_t) { return attention_rows(call, 2); };
  forward.output_shapes = forward_shapes;
  add_to_existing(strategies(), {"aten::_scaled_dot_product_flash_attention_for_cpu"}, forward);
  Strategy backward;
  backward.rows = [](const OpCall& call, int64_t) { return attention_rows(call, 3); };
  backward.output_shapes = backward_shapes;
  add_to_existing(strategies(), {"aten::_scaled_dot_product_flash_attention_for_cpu_backward"},
                  backward);
  add_to_existing(local_kernels(), {"aten::_scaled_dot_product_flash_attention_for_cpu"},
                  LocalKernel([](const c10::OperatorHandle& op, torch::jit::Stack& stack,
                                 const LocalContext& context) {
                    empty_safe_kernel(op, stack, context, /*backward=*/false);
                  }));
  add_to_existing(local_kernels(), {"aten::_scaled_dot_product_flash_attention_for_cpu_backward"},
                  LocalKernel([](const c10::OperatorHandle& op, torch::jit::Stack& stack,
                                 const LocalContext& context) {
                    empty_safe_kernel(op, stack, context, /*backward=*/true);
                  }));
}

}  // namespace dtensor
