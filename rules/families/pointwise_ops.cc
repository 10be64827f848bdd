// Copyright 2026 The dtensor Authors.
//
// rules/families/pointwise_ops.cc: the elementwise operators, grouped by how
// Partial placements pass through them (rules/pointwise.h).
#include <dtensor/placements/replicate.h>
#include <dtensor/rules/pointwise.h>
#include <dtensor/rules/registration.h>

namespace dtensor {
namespace {

// masked_fill(self, mask, 0): a zero is a term of any sum, so terms of a
// pending sum (or average) stay terms, with the mask whole. (Autograd's
// backward of masked_fill is this fill with 0.)
std::vector<ShardingRow> zero_fill_rows(const OpCall& call, int64_t m) {
  const PlacementPtr& p = call.placement(0, m);
  const std::optional<ReduceOp> op = p->partial_op();
  const c10::IValue& value = call.argument("value");
  if (!op || (*op != ReduceOp::kSum && *op != ReduceOp::kAvg) || !value.isScalar() ||
      value.toScalar().toComplexDouble() != 0.0) {
    return {};
  }
  return {{{p, Replicate::make()}, {p}}};
}

}  // namespace

DTENSOR_REGISTER(pointwise_strategies) {
  Registry<Strategy>& registry = strategies();
  add_to_existing(registry,
                  {"aten::add.Tensor", "aten::add_.Tensor", "aten::add.out", "aten::sub.Tensor",
                   "aten::sub_.Tensor", "aten::sub.out", "aten::rsub.Tensor", "aten::neg",
                   "aten::neg_", "aten::neg.out"},
                  pointwise_strategy(Linearity::kAdditive));
  add_to_existing(registry,
                  {"aten::mul.Tensor", "aten::mul_.Tensor", "aten::mul.out", "aten::mul.Scalar",
                   "aten::mul_.Scalar"},
                  pointwise_strategy(Linearity::kMultiplicative));
  add_to_existing(registry,
                  {"aten::div.Tensor", "aten::div_.Tensor", "aten::div.out", "aten::div.Scalar",
                   "aten::div_.Scalar"},
                  pointwise_strategy(Linearity::kFirstOperand));
  add_to_existing(registry,
                  {"aten::maximum", "aten::maximum.out", "aten::minimum", "aten::minimum.out",
                   "aten::fmax", "aten::fmin"},
                  pointwise_strategy(Linearity::kMaxMin));
  add_to_existing(registry,
                  {"aten::clone", "aten::detach", "aten::alias", "aten::copy_", "aten::lift_fresh",
                   "aten::positive",
                   // Zeros reduce to zero under every Partial op, so zeroing a
                   // Partial keeps it (optimizers zero Partial gradients).
                   "aten::zero_"},
                  pointwise_strategy(Linearity::kIdentity));
  add_to_existing(
      registry,
      {// Arithmetic that is not linear in a Partial operand.
       "aten::add.Scalar", "aten::add_.Scalar", "aten::sub.Scalar", "aten::sub_.Scalar",
       "aten::rsub.Scalar", "aten::div.Tensor_mode", "aten::div_.Tensor_mode",
       "aten::remainder.Tensor", "aten::remainder.Scalar", "aten::fmod.Tensor", "aten::fmod.Scalar",
       "aten::pow.Tensor_Scalar", "aten::pow.Tensor_Tensor", "aten::pow.Scalar",
       "aten::pow_.Scalar", "aten::pow_.Tensor", "aten::reciprocal", "aten::reciprocal_",
       "aten::abs", "aten::abs_", "aten::sign", "aten::sgn", "aten::floor", "aten::ceil",
       "aten::round", "aten::trunc", "aten::frac",
       // Transcendental and activation functions.
       "aten::exp", "aten::exp_", "aten::exp2", "aten::expm1", "aten::log", "aten::log_",
       "aten::log2", "aten::log10", "aten::log1p", "aten::sqrt", "aten::sqrt_", "aten::rsqrt",
       "aten::rsqrt_", "aten::sin", "aten::cos", "aten::tan", "aten::erf", "aten::erfinv",
       "aten::sigmoid", "aten::sigmoid_", "aten::tanh", "aten::tanh_", "aten::relu", "aten::relu_",
       "aten::gelu", "aten::gelu_", "aten::silu", "aten::silu_", "aten::mish", "aten::elu",
       "aten::leaky_relu", "aten::hardtanh", "aten::hardsigmoid", "aten::hardswish",
       "aten::softplus", "aten::logit", "aten::nan_to_num", "aten::clamp", "aten::clamp_",
       "aten::clamp.Tensor", "aten::clamp_min", "aten::clamp_min_", "aten::clamp_max",
       "aten::clamp_max_",
       // Their backward formulas.
       "aten::threshold_backward", "aten::gelu_backward", "aten::silu_backward",
       "aten::tanh_backward", "aten::sigmoid_backward", "aten::elu_backward",
       "aten::leaky_relu_backward", "aten::hardtanh_backward", "aten::softplus_backward",
       "aten::mish_backward",
       // Comparisons, logic, selection.
       "aten::eq.Tensor", "aten::eq.Scalar", "aten::ne.Tensor", "aten::ne.Scalar",
       "aten::lt.Tensor", "aten::lt.Scalar", "aten::le.Tensor", "aten::le.Scalar",
       "aten::gt.Tensor", "aten::gt.Scalar", "aten::ge.Tensor", "aten::ge.Scalar",
       "aten::logical_not", "aten::logical_and", "aten::logical_or", "aten::logical_xor",
       "aten::bitwise_not", "aten::bitwise_and.Tensor", "aten::bitwise_or.Tensor",
       "aten::bitwise_xor.Tensor", "aten::isnan", "aten::isinf", "aten::isfinite",
       "aten::where.self", "aten::masked_fill.Scalar", "aten::masked_fill_.Scalar",
       "aten::masked_fill.Tensor", "aten::masked_fill_.Tensor",
       // Fused optimizer and update math.
       "aten::addcmul", "aten::addcmul_", "aten::addcdiv", "aten::addcdiv_", "aten::lerp.Scalar",
       "aten::lerp_.Scalar", "aten::lerp.Tensor", "aten::lerp_.Tensor",
       // Fills and casts (a fill of a Partial would multiply the value).
       "aten::fill_.Scalar", "aten::fill_.Tensor", "aten::_to_copy"},
      pointwise_strategy(Linearity::kNone));
}

DTENSOR_REGISTER(zero_fill_strategies) {
  Strategy zero_fill;
  zero_fill.rows = zero_fill_rows;
  add_to_existing(strategies(), {"aten::masked_fill.Scalar", "aten::masked_fill_.Scalar"},
                  zero_fill);
}

}  // namespace dtensor
