// Copyright 2026 The dtensor Authors.
//
// dtensor/tools/builtin_samples.cc: sample calls the rule verifier runs for
// the built-in rule families, where arguments made from an op's schema alone
// (schema_samples.cc) would miss the interesting cases: index tensors,
// reductions over several dims, views that split a sharded dim.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <limits>

#include <dtensor/tools/rule_verifier.h>
#include <dtensor/tools/sample_values.h>

namespace dtensor {
namespace {

using sample_values::index_pattern;
using sample_values::positive;
using sample_values::values;

SampleCall call(std::string op, std::vector<c10::IValue> arguments) {
  return {std::move(op), std::move(arguments)};
}

// Bitwise ops need integers or bools; fills and masks take 0-dim values.
void add_integer_and_bool_samples(std::vector<SampleCall>& samples) {
  const at::Tensor a = values({5, 6}).to(at::kLong), b = values({5, 6}, 2).to(at::kLong);
  const at::Tensor mask = values({5, 6}, 1).gt(0), x = values({5, 6});
  for (const char* op :
       {"aten::bitwise_and.Tensor", "aten::bitwise_or.Tensor", "aten::bitwise_xor.Tensor"}) {
    samples.push_back(call(op, {a, b}));
    samples.push_back(call(op, {mask, values({6}, 3).gt(0)}));
  }
  samples.push_back(call("aten::bitwise_not", {a}));
  samples.push_back(call("aten::masked_fill.Tensor", {x, mask, at::scalar_tensor(7.0)}));
  samples.push_back(call("aten::masked_fill_.Tensor", {x, mask, at::scalar_tensor(7.0)}));
  samples.push_back(call("aten::fill_.Tensor", {x, at::scalar_tensor(-2.0)}));
  samples.push_back(call("aten::is_nonzero", {values({1, 1}, 4)}));
  samples.push_back(call("aten::addmv", {values({5}, 1), values({5, 7}), values({7}, 2), 1, 2}));
}

// layer_norm's backward, from the statistics its forward saves.
void add_layer_norm_backward_sample(std::vector<SampleCall>& samples) {
  const at::Tensor x = values({3, 5, 6}), weight = positive({6}), bias = values({6}, 1);
  const std::vector<int64_t> normalized{6};
  const auto forward = at::native_layer_norm(x, normalized, weight, bias, 1e-5);
  samples.push_back(
      call("aten::native_layer_norm_backward",
           {values({3, 5, 6}, 2), x, normalized, std::get<1>(forward), std::get<2>(forward), weight,
            bias, c10::List<bool>({true, true, true})}));
}

// The fused rms_norm of libtorch 2.9+, where the CPU runs it.
void add_fused_rms_norm_samples(std::vector<SampleCall>& samples) {
  const at::Tensor x = values({3, 5, 6}), weight = positive({6});
  const std::vector<int64_t> normalized{6};
  if (runs_on_cpu("aten::_fused_rms_norm")) {
    samples.push_back(call("aten::_fused_rms_norm", {x, normalized, weight, 1e-5}));
  }
  if (runs_on_cpu("aten::_fused_rms_norm_backward")) {
    samples.push_back(call("aten::_fused_rms_norm_backward",
                           {values({3, 5, 6}, 1), x, normalized, positive({3, 5, 1}, 2), weight,
                            c10::List<bool>({true, true})}));
  }
}

// libtorch 2.x's CPU flash attention ([batch 4, heads 6, seq 5, head_dim
// 3]; 6 heads split unevenly over 4 ranks), with a causal mask, and its
// backward from the forward's own output and log-sum-exp.
void add_flash_attention_samples(std::vector<SampleCall>& samples) {
  const char* forward = "aten::_scaled_dot_product_flash_attention_for_cpu";
  if (!runs_on_cpu(forward)) return;
  const at::Tensor q = values({4, 6, 5, 3}), k = values({4, 6, 5, 3}, 1),
                   v = values({4, 6, 5, 3}, 2);
  const at::Tensor causal =
      at::full({5, 5}, -std::numeric_limits<double>::infinity(), q.options()).triu(1);
  std::vector<c10::IValue> arguments = {q, k, v, 0.0, false, causal, c10::IValue()};
  samples.push_back(call(forward, arguments));
  samples.push_back(call(forward, {q, k, v, 0.0, true, c10::IValue(), 0.5}));
  const char* backward = "aten::_scaled_dot_product_flash_attention_for_cpu_backward";
  if (!runs_on_cpu(backward)) return;
  torch::jit::Stack stack(arguments.begin(), arguments.end());
  c10::Dispatcher::singleton().findSchemaOrThrow(forward, "").callBoxed(stack);
  samples.push_back(call(backward, {values({4, 6, 5, 3}, 3), q, k, v, stack[0], stack[1], 0.0,
                                    false, causal, c10::IValue()}));
}

}  // namespace

std::vector<SampleCall> builtin_samples() {
  const at::Tensor a = values({5, 6}), b = values({5, 6}, 2), row = values({6}, 1);
  const at::Tensor col = values({5, 1}, 3), p = positive({5, 6});
  const at::Tensor m1 = values({5, 7}), m2 = values({7, 6}, 1), v = values({7}, 2);
  const at::Tensor b1 = values({3, 5, 7}), b2 = values({3, 7, 6}, 1), x3 = values({3, 5, 6});
  const c10::optional<at::ScalarType> no_dtype;
  const double inf = std::numeric_limits<double>::infinity();
  // nll_loss: log-probabilities [7, 5] (7 rows split unevenly), class 2 ignored in one sample.
  const at::Tensor log_probs = values({7, 5}, 4),
                   target = at::tensor({0, 4, 2, 2, 1, 3, 0}, at::kLong);
  const int64_t none = 0, mean = 1, sum = 2, no_ignore = -100;
  std::vector<SampleCall> s = {
      call("aten::add.Tensor", {a, b, 1}),
      call("aten::add.Tensor", {a, row, 2}),
      call("aten::sub.Tensor", {a, col, 1}),
      call("aten::mul.Tensor", {a, b}),
      call("aten::mul.Tensor", {a, row}),
      call("aten::mul.Scalar", {a, 3}),
      call("aten::div.Tensor", {a, p}),
      call("aten::neg", {a}),
      call("aten::maximum", {a, b}),
      call("aten::relu", {a}),
      call("aten::exp", {a}),
      call("aten::where.self", {a.gt(0), a, b}),
      call("aten::add_.Tensor", {a, b, 1}),
      call("aten::mul_.Tensor", {a, b}),
      call("aten::clone", {a, c10::IValue()}),
      call("aten::mm", {m1, m2}),
      call("aten::addmm", {row, m1, m2, 1, 1}),
      call("aten::mv", {m1, v}),
      call("aten::dot", {v, values({7}, 4)}),
      call("aten::bmm", {b1, b2}),
      call("aten::baddbmm", {x3, b1, b2, 1, 1}),
      call("aten::sum.dim_IntList", {a, std::vector<int64_t>{0}, false, no_dtype}),
      call("aten::sum.dim_IntList", {x3, std::vector<int64_t>{1, 2}, true, no_dtype}),
      call("aten::sum", {a, no_dtype}),
      call("aten::mean.dim", {a, std::vector<int64_t>{1}, false, no_dtype}),
      call("aten::mean.dim", {a, std::vector<int64_t>{0}, true, no_dtype}),
      call("aten::amax", {a, std::vector<int64_t>{0}, false}),
      call("aten::amin", {a, std::vector<int64_t>{1}, true}),
      call("aten::argmax", {a, 1, false}),
      call("aten::linalg_vector_norm", {a, 2, c10::IValue(), false, no_dtype}),
      call("aten::linalg_vector_norm", {a, 1, std::vector<int64_t>{0}, true, no_dtype}),
      call("aten::linalg_vector_norm", {a, inf, std::vector<int64_t>{1}, false, no_dtype}),
      call("aten::linalg_vector_norm", {a, -inf, c10::IValue(), false, no_dtype}),
      call("aten::linalg_vector_norm", {a, 0, std::vector<int64_t>{0, 1}, false, no_dtype}),
      call("aten::norm.Scalar", {x3, 3}),
      call("aten::var.correction", {a, std::vector<int64_t>{0}, c10::IValue(1), false}),
      call("aten::_softmax", {a, 1, false}),
      call("aten::_log_softmax", {a, 0, false}),
      call("aten::view", {a, std::vector<int64_t>{30}}),
      call("aten::view", {values({4, 8}), std::vector<int64_t>{32}}),
      call("aten::view", {values({8, 4}), std::vector<int64_t>{2, 4, 4}}),
      call("aten::t", {a}),
      call("aten::transpose.int", {x3, 0, 2}),
      call("aten::permute", {x3, std::vector<int64_t>{2, 0, 1}}),
      call("aten::unsqueeze", {a, 1}),
      call("aten::squeeze.dim", {col, 1}),
      call("aten::expand", {col, std::vector<int64_t>{5, 6}, false}),
      call("aten::select.int", {a, 0, 2}),
      call("aten::slice.Tensor", {a, 1, 1, 5, 1}),
      call("aten::split.Tensor", {a, 2, 1}),
      call("aten::cat", {c10::List<at::Tensor>({a, b}), 0}),
      call("aten::stack", {c10::List<at::Tensor>({a, b}), 1}),
      call("aten::index_select", {a, 0, at::tensor({4, 0, 2}, at::kLong)}),
      call("aten::gather", {a, 1, index_pattern(5, 3, 2, 6), false}),
      call("aten::gather", {a, 0, index_pattern(3, 6, 1, 5), false}),
      call("aten::scatter.src", {a, 1, index_pattern(5, 6, 5, 6), b}),
      call("aten::scatter_add", {a, 0, index_pattern(5, 6, 2, 5), b}),
      call("aten::nll_loss_forward", {log_probs, target, c10::IValue(), mean, no_ignore}),
      call("aten::nll_loss_forward", {log_probs, target, positive({5}), mean, 2}),
      call("aten::nll_loss_forward", {log_probs, target, c10::IValue(), sum, no_ignore}),
      call("aten::nll_loss_forward", {log_probs, target, c10::IValue(), none, 2}),
      call("aten::nll_loss_backward", {at::scalar_tensor(0.5), log_probs, target, c10::IValue(),
                                       mean, no_ignore, at::scalar_tensor(7.0)}),
      call("aten::nll_loss_backward",
           {values({7}, 1), log_probs, target, positive({5}), none, 2, at::scalar_tensor(0.0)}),
      call("aten::embedding",
           {values({9, 4}), at::tensor({0, 8, 3, 5, 5, 1}, at::kLong).reshape({2, 3}), -1, false,
            false}),
      // The weight's placements name the mesh dims that split its rows.
      call("dtensor::embedding_backward_for_layout",
           {values({2, 3, 4}), at::tensor({0, 8, 3, 5, 5, 1}, at::kLong).reshape({2, 3}), 9, -1,
            false, std::string("S(0)")}),
      call("dtensor::embedding_backward_for_layout",
           {values({2, 3, 4}), at::tensor({0, 8, 3, 5, 5, 1}, at::kLong).reshape({2, 3}), 9, 5,
            true, std::string("S(0)")}),
      call("dtensor::embedding_backward_for_layout",
           {values({2, 3, 4}), at::tensor({0, 8, 3, 5, 5, 1}, at::kLong).reshape({2, 3}), 9, 3,
            true, std::string("R")}),
      // A split batch adds its rows' terms, unless they are divided by counts.
      call("aten::embedding_dense_backward",
           {values({4, 2, 3}), index_pattern(4, 2, 3, 5), 5, -1, false}),
      call("aten::embedding_dense_backward",
           {values({4, 2, 3}), index_pattern(4, 2, 3, 5), 5, 2, true}),
      call("aten::zeros_like",
           {a, no_dtype, c10::IValue(), c10::IValue(), c10::IValue(), c10::IValue()}),
      call("aten::native_layer_norm",
           {x3, std::vector<int64_t>{6}, positive({6}), values({6}), 1e-5}),
  };
  // libtorch 2.14's list matmul: shapes that multiply, one pair per element.
  if (runs_on_cpu("aten::_foreach_mm")) {
    s.push_back(call("aten::_foreach_mm", {c10::List<at::Tensor>({m1, values({3, 7}, 5)}),
                                           c10::List<at::Tensor>({m2, values({7, 2}, 6)})}));
  }
  add_integer_and_bool_samples(s);
  add_layer_norm_backward_sample(s);
  add_fused_rms_norm_samples(s);
  add_flash_attention_samples(s);
  return s;
}

}  // namespace dtensor
