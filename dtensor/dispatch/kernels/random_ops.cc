// Copyright 2026 The dtensor Authors.
//
// dtensor/dispatch/kernels/random_ops.cc: random ops whose DTensor results
// equal one device's (dtensor/core/random.h).
//
// Every rank draws the op's whole global result on the CPU from its DTensor
// generator (seeded alike on every rank, so all draw the same numbers, as
// one device would) and keeps its own part, laid out like the input. Any
// layout works, custom placements included, since the part is cut by
// redistribute's local slice from Replicate (no communication); a Partial
// input is random-filled as Replicate.
//
// Covered: the in-place samplers (bernoulli_, uniform_, normal_, random_,
// exponential_, geometric_, log_normal_, cauchy_), bernoulli.p, rand_like,
// randn_like and native_dropout (what dropout calls on CUDA; on the CPU
// dropout decomposes into empty_like + bernoulli_ + div_ + mul).
#include <ATen/ATen.h>

#include <dtensor/core/random.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/redistribute/planner.h>
#include <dtensor/rules/propagation.h>
#include <dtensor/rules/registration.h>

namespace dtensor {
namespace {

// The input's layout for every output (a Partial input reads as
// Replicate). The op's kernel runs for every layout, the engine's
// all-Replicate one included, so the op itself never draws from the default
// generator.
std::vector<ShardingRow> same_layout_rows(const OpCall& call, int64_t m, size_t outputs) {
  const PlacementPtr& p = call.placement(0, m);
  const PlacementPtr out = p->is_partial() ? Replicate::make() : p;
  return {{{out}, std::vector<PlacementPtr>(outputs, out)}};
}

// The calling rank's part of `global` (on the CPU) as output `k` lays it out,
// on the mesh's device.
at::Tensor rank_part(const at::Tensor& global, const LocalContext& context, size_t k) {
  const DTensorSpecPtr& target =
      context.propagation().output_spec(k, global.scalar_type(), context.mesh());
  const DTensorSpec replicated = target->with_placements(
      std::vector<PlacementPtr>(target->placements().size(), Replicate::make()));
  const at::Tensor on_device = global.to(context.mesh().device());
  const RedistributePlanPtr plan = plan_redistribute(replicated, target->placements());
  return plan->steps.empty() ? on_device : execute_plan(*plan, on_device);
}

// A CPU tensor of the input's global shape and dtype, to draw into.
at::Tensor global_like_input(const at::Tensor& local, const LocalContext& context) {
  return at::empty(context.propagation().input_targets[0]->shape(),
                   local.options().device(c10::kCPU));
}

// The op's generator argument, or the rank's generator when it is None.
void use_rank_generator(const OpCall& call, torch::jit::Stack& stack) {
  const auto index = call.schema().argumentIndexWithName("generator");
  DTENSOR_CHECK(index.has_value(), call.op_name(), ": expected a generator argument");
  if (stack[*index].isNone()) stack[*index] = c10::IValue(rank_generator());
}

// In-place samplers and bernoulli.p: the op itself, on a CPU stand-in of the
// whole tensor, with the rank generator.
void sample_globally(const c10::OperatorHandle& op, torch::jit::Stack& stack,
                     const LocalContext& context) {
  const at::Tensor self = stack[0].toTensor();
  stack[0] = global_like_input(self, context);
  use_rank_generator(context.call(), stack);
  op.callBoxed(stack);
  const at::Tensor part = rank_part(stack.back().toTensor(), context, 0);
  stack.clear();
  const bool in_place = op.schema().name().back() == '_';
  if (in_place) {
    at::Tensor written = self;
    written.copy_(part);
    stack.emplace_back(written);
  } else {
    stack.emplace_back(part);
  }
}

// rand_like / randn_like(self, dtype, layout, device, pin_memory, memory_format):
// what ATen does, empty_like(...).uniform_() or .normal_(), on the global shape.
template <bool kNormal>
void like_globally(const c10::OperatorHandle&, torch::jit::Stack& stack,
                   const LocalContext& context) {
  const at::Tensor self = stack[0].toTensor();
  const c10::IValue& dtype = stack[1];
  at::Tensor global = global_like_input(self, context);
  if (!dtype.isNone()) global = global.to(static_cast<c10::ScalarType>(dtype.toInt()));
  at::Generator generator = rank_generator();
  if (kNormal) {
    global.normal_(0, 1, generator);
  } else {
    global.uniform_(0, 1, generator);
  }
  stack.clear();
  stack.emplace_back(rank_part(global, context, 0));
}

// native_dropout(input, p, train) -> (output, mask): the keep-mask drawn like
// the CPU kernel draws it (bernoulli_(1 - p) on the input's dtype), the
// output input * mask / (1 - p), the mask as bool.
void dropout_globally(const c10::OperatorHandle&, torch::jit::Stack& stack,
                      const LocalContext& context) {
  const at::Tensor input = stack[0].toTensor();
  const double p = stack[1].toDouble();
  const bool train = stack[2].isNone() || stack[2].toBool();
  at::Tensor output, mask;
  if (train) {
    const double keep = 1.0 - p;
    const at::Tensor global_mask =
        global_like_input(input, context).bernoulli_(keep, rank_generator());
    const at::Tensor local_mask = rank_part(global_mask, context, 1);
    output = input.mul(local_mask).mul_(keep == 0 ? 0.0 : 1.0 / keep);
    mask = local_mask.to(at::kBool);
  } else {
    output = input.clone();
    mask = at::ones_like(input, input.options().dtype(at::kBool));
  }
  stack.clear();
  stack.emplace_back(output);
  stack.emplace_back(mask);
}

Strategy random_strategy(size_t outputs) {
  Strategy strategy;
  strategy.rows = [outputs](const OpCall& call, int64_t m) {
    return same_layout_rows(call, m, outputs);
  };
  // Shapes are the input's (some of these ops have no meta kernel to ask).
  strategy.output_shapes = [outputs](const OpCall& call) {
    return std::vector<std::vector<int64_t>>(outputs, call.input(0).spec->shape());
  };
  return strategy;
}

// Registers `kernel` and the strategy of ops with `outputs` outputs for every
// op of `op_names` this libtorch has.
void add_random_ops(std::initializer_list<std::string_view> op_names, LocalKernel kernel,
                    size_t outputs) {
  add_to_existing(strategies(), op_names, random_strategy(outputs));
  add_to_existing(local_kernels(), op_names, kernel);
}

}  // namespace

DTENSOR_REGISTER(random_ops) {
  add_random_ops({"aten::bernoulli_.float", "aten::uniform_", "aten::normal_", "aten::random_",
                  "aten::random_.from", "aten::random_.to", "aten::exponential_",
                  "aten::geometric_", "aten::log_normal_", "aten::cauchy_", "aten::bernoulli.p"},
                 sample_globally, 1);
  add_random_ops({"aten::rand_like"}, like_globally<false>, 1);
  add_random_ops({"aten::randn_like"}, like_globally<true>, 1);
  add_random_ops({"aten::native_dropout"}, dropout_globally, 2);
}

}  // namespace dtensor
