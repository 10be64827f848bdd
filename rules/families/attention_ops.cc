// Copyright 2026 The dtensor Authors.
//
// rules/families/attention_ops.cc: the fused scaled-dot-product attention
// kernels that libtorch 2.x's at::scaled_dot_product_attention picks (flash
// attention on CPU; flash, memory-efficient and cuDNN attention on CUDA),
// and their backwards.
//
// Attention mixes positions within one (batch, head) pair only: query, key,
// value [batch, heads, seq, head_dim], the output and the row log-sum-exp
// [batch, heads, seq] split alike along batch or heads compute each rank's
// pairs alone, with no communication (Megatron's head-parallel attention).
// A mask or bias broadcast over that dim (a [seq, seq] causal mask) is
// replicated; one with that dim is split with the others.
//
// The kernels also return bookkeeping (random-number state, cumulative
// sequence lengths, a debug mask) and a log-sum-exp whose shapes differ
// between kernels and libtorch versions (padded by the memory-efficient
// kernel, with a trailing dim by cuDNN's): those dims and outputs are sized
// by the kernel (kSizedByKernel) and never split, the bookkeeping
// replicated. Splitting holds only without a debug mask and without a bias
// gradient; otherwise the kernels run on replicated inputs. Dropout is
// refused: each rank's kernel would draw its own mask, so even a replicated
// result would differ between ranks. libtorch 1.13's
// at::_scaled_dot_product_attention decomposes into ops with their own rules
// instead.
#include <ATen/ATen.h>

#include <array>
#include <string>

#include <dtensor/base/check.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/placements/shard.h>
#include <dtensor/rules/local_kernel.h>
#include <dtensor/rules/propagation.h>
#include <dtensor/rules/registration.h>

namespace dtensor {
namespace {

struct FusedAttention {
  const char* name;
  size_t split_outputs;  // the leading returns split with the (batch, head) pairs
  bool backward;         // returns the gradients of query, key, value
  // Reads the bias in rows aligned to kBiasAlignment elements (see
  // aligned_bias).
  bool aligns_bias;
};

constexpr std::array<FusedAttention, 8> kFusedAttention = {{
    {"aten::_scaled_dot_product_flash_attention_for_cpu", 2, false, false},
    {"aten::_scaled_dot_product_flash_attention_for_cpu_backward", 3, true, false},
    {"aten::_scaled_dot_product_flash_attention", 2, false, false},
    {"aten::_scaled_dot_product_flash_attention_backward", 3, true, false},
    {"aten::_scaled_dot_product_efficient_attention", 2, false, true},
    {"aten::_scaled_dot_product_efficient_attention_backward", 3, true, true},
    {"aten::_scaled_dot_product_cudnn_attention", 2, false, false},
    {"aten::_scaled_dot_product_cudnn_attention_backward", 3, true, false},
}};

constexpr int64_t kBiasAlignment = 16;

// What an argument of these kernels is, by its schema name.
enum class AttentionRole { kPaired, kMask, kBookkeeping };

AttentionRole role_of(const std::string& argument) {
  for (const char* paired :
       {"query", "key", "value", "out", "grad_out", "grad_out_", "logsumexp"}) {
    if (argument == paired) return AttentionRole::kPaired;
  }
  if (argument == "attn_mask" || argument == "attn_bias") return AttentionRole::kMask;
  return AttentionRole::kBookkeeping;
}

AttentionRole role_of_input(const OpCall& call, size_t i) {
  return role_of(call.schema().arguments()[call.input(i).argument].name());
}

// The mask's dim for the pair dim `dim`: masks broadcast from the right.
int64_t mask_dim(int64_t dim, int64_t mask_rank) { return dim - (4 - mask_rank); }

bool flag_set(const OpCall& call, const char* name, size_t element = 0) {
  const auto index = call.schema().argumentIndexWithName(name);
  if (!index.has_value()) return false;
  const c10::IValue& value = call.argument(static_cast<size_t>(*index));
  if (value.isBool()) return value.toBool();
  const c10::List<bool> flags = value.toBoolList();
  return element < flags.size() && flags.get(element);
}

// Whether each rank may compute its pairs alone (see the file comment).
bool splittable(const OpCall& call) {
  return !flag_set(call, "return_debug_mask") && !flag_set(call, "grad_input_mask", 3);
}

void check_no_dropout(const OpCall& call) {
  const double dropout = call.argument("dropout_p").toDouble();
  DTENSOR_CHECK(dropout == 0, call.op_name(), ": dropout_p = ", dropout,
                " on DTensors; expected 0: each rank's fused kernel would draw its own dropout ",
                "mask, so even a replicated result would differ between ranks. Use the math ",
                "attention (at::_scaled_dot_product_attention_math, whose dropout draws one ",
                "mask for the whole DTensor) or dropout_p = 0");
}

// Whether every paired input has the query's length along `dim`: grouped
// key/value heads (fewer than the query's) would pair query heads with
// another rank's key/value heads.
bool pairs_align(const OpCall& call, int64_t dim) {
  const std::vector<int64_t>* first = nullptr;
  for (size_t i = 0; i < call.num_inputs(); ++i) {
    if (role_of_input(call, i) != AttentionRole::kPaired) continue;
    const std::vector<int64_t>& shape = call.input(i).spec->shape();
    if (shape.size() < 3) return false;
    if (first == nullptr) first = &shape;
    if (shape[dim] != (*first)[dim]) return false;
  }
  return first != nullptr;
}

// One row per pair dim (batch, heads): paired inputs and the leading outputs
// split on it, a mask split or replicated as it broadcasts, bookkeeping
// replicated.
std::vector<ShardingRow> attention_rows(const OpCall& call, const FusedAttention& fused) {
  check_no_dropout(call);
  std::vector<ShardingRow> rows;
  if (!splittable(call)) return rows;
  for (const int64_t dim : {0, 1}) {
    if (!pairs_align(call, dim)) continue;
    ShardingRow row;
    for (size_t i = 0; i < call.num_inputs(); ++i) {
      const std::vector<int64_t>& shape = call.input(i).spec->shape();
      switch (role_of_input(call, i)) {
        case AttentionRole::kPaired:
          row.inputs.push_back(Shard::make(dim));
          break;
        case AttentionRole::kMask: {
          const int64_t own = mask_dim(dim, static_cast<int64_t>(shape.size()));
          const bool broadcast = own < 0 || shape[own] == 1;
          row.inputs.push_back(broadcast ? Replicate::make() : Shard::make(own));
          break;
        }
        case AttentionRole::kBookkeeping:
          row.inputs.push_back(Replicate::make());
          break;
      }
    }
    for (size_t j = 0; j < call.schema().returns().size(); ++j) {
      row.outputs.push_back(j < fused.split_outputs ? Shard::make(dim) : Replicate::make());
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

const std::vector<int64_t>& shape_of_argument(const OpCall& call, const char* name) {
  const auto index = call.schema().argumentIndexWithName(name);
  const TensorInput* input =
      index.has_value() ? call.input_of_argument(static_cast<size_t>(*index)) : nullptr;
  DTENSOR_CHECK(input != nullptr, call.op_name(), ": expected a tensor argument named ", name);
  return input->spec->shape();
}

// Forward: the output [.., seq_q, head_dim_v] and the log-sum-exp [batch,
// heads, kernel-sized]; backward: the gradients of query, key, value; the
// rest sized by the kernel.
std::vector<std::vector<int64_t>> attention_shapes(const OpCall& call,
                                                   const FusedAttention& fused) {
  std::vector<std::vector<int64_t>> shapes;
  const std::vector<c10::Argument>& returns = call.schema().returns();
  for (size_t j = 0; j < returns.size(); ++j) {
    if (returns[j].type()->kind() != c10::TypeKind::TensorType) continue;
    if (j >= fused.split_outputs) {
      shapes.push_back({kSizedByKernel});
    } else if (fused.backward) {
      shapes.push_back(shape_of_argument(call, std::array{"query", "key", "value"}[j]));
    } else {
      std::vector<int64_t> output = shape_of_argument(call, "query");
      output.back() = shape_of_argument(call, "value").back();
      shapes.push_back(j == 0 ? output
                              : std::vector<int64_t>{output[0], output[1], kSizedByKernel});
    }
  }
  return shapes;
}

// `t` with its `empty_dims` (of the pair dims, in query numbering) one long,
// zero-filled.
at::Tensor one_pair_long(const at::Tensor& t, const std::vector<int64_t>& empty_dims, bool mask) {
  std::vector<int64_t> shape = t.sizes().vec();
  for (const int64_t dim : empty_dims) {
    const int64_t own = mask ? mask_dim(dim, t.dim()) : dim;
    if (own >= 0 && shape[own] == 0) shape[own] = 1;
  }
  return at::zeros(shape, t.options());
}

// The memory-efficient kernel reads the bias in rows of a multiple of 16
// elements: at::scaled_dot_product_attention pads the bias and slices it
// back to get them. A split that copied the bias lost that layout; this
// lays it out so again (a view when it already is).
at::Tensor aligned_bias(const at::Tensor& bias) {
  bool aligned = bias.stride(-1) == 1;
  for (int64_t d = 0; d + 1 < bias.dim(); ++d) aligned &= bias.stride(d) % kBiasAlignment == 0;
  if (aligned) return bias;
  const int64_t length = bias.size(-1);
  const int64_t padded = (length + kBiasAlignment - 1) / kBiasAlignment * kBiasAlignment;
  return at::constant_pad_nd(bias, {0, padded - length}).narrow(-1, 0, length);
}

// Replaces each defined tensor argument (of a call's `arguments` from
// stack[first]) that is paired or a mask by `replace(tensor, role)`.
template <typename Replace>
void replace_tensor_arguments(const std::vector<c10::Argument>& arguments, torch::jit::Stack& stack,
                              size_t first, Replace replace) {
  for (size_t a = 0; a < arguments.size(); ++a) {
    c10::IValue& value = stack[first + a];
    const AttentionRole role = role_of(arguments[a].name());
    if (role == AttentionRole::kBookkeeping || !value.isTensor() || !value.toTensor().defined()) {
      continue;
    }
    value = replace(value.toTensor(), role);
  }
}

// Runs the kernel on the local shards, biases aligned where it needs them.
// A rank whose shard holds no (batch, head) pair runs it on one zero pair
// and keeps none of the split outputs: kernels fail on empty inputs
// (libtorch 2.14's CPU flash attention divides by zero), and the
// bookkeeping outputs keep the kernel's own shapes.
void run_on_shards(const FusedAttention& fused, const c10::OperatorHandle& op,
                   torch::jit::Stack& stack) {
  const std::vector<c10::Argument>& arguments = op.schema().arguments();
  const size_t first = stack.size() - arguments.size();
  const auto query = static_cast<size_t>(op.schema().argumentIndexWithName("query").value());
  std::vector<int64_t> empty_dims;
  for (const int64_t dim : {0, 1}) {
    if (stack[first + query].toTensor().size(dim) == 0) empty_dims.push_back(dim);
  }
  if (!empty_dims.empty()) {
    replace_tensor_arguments(arguments, stack, first, [&](const at::Tensor& t, AttentionRole role) {
      return one_pair_long(t, empty_dims, role == AttentionRole::kMask);
    });
  }
  if (fused.aligns_bias) {
    replace_tensor_arguments(arguments, stack, first, [](const at::Tensor& t, AttentionRole role) {
      return role == AttentionRole::kMask && t.dim() >= 2 ? aligned_bias(t) : t;
    });
  }
  op.callBoxed(stack);
  for (size_t j = 0; j < fused.split_outputs && !empty_dims.empty(); ++j) {
    c10::IValue& value = stack[first + j];
    if (!value.isTensor() || !value.toTensor().defined()) continue;
    at::Tensor none = value.toTensor();
    for (const int64_t dim : empty_dims) none = none.narrow(dim, 0, 0);
    value = none;
  }
}

}  // namespace

DTENSOR_REGISTER(attention_ops) {
  for (const FusedAttention& fused : kFusedAttention) {
    Strategy strategy;
    strategy.rows = [fused](const OpCall& call, int64_t) { return attention_rows(call, fused); };
    strategy.output_shapes = [fused](const OpCall& call) { return attention_shapes(call, fused); };
    add_to_existing(strategies(), {fused.name}, strategy);
    add_to_existing(local_kernels(), {fused.name},
                    LocalKernel([fused](const c10::OperatorHandle& op, torch::jit::Stack& stack,
                                        const LocalContext&) { run_on_shards(fused, op, stack); }));
  }
}

}  // namespace dtensor
