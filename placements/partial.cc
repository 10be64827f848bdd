// Copyright 2026 The dtensor Authors.
#include <dtensor/placements/partial.h>

#include <array>

#include <dtensor/base/check.h>
#include <dtensor/placements/parse.h>
#include "absl/hash/hash.h"

namespace dtensor {

PlacementPtr Partial::make(ReduceOp op) {
  // Immutable: one object per op, so normalizing a spec's placements
  // allocates no Partial. Never destroyed, like Shard's.
  constexpr size_t kOps = static_cast<size_t>(ReduceOp::kBxor) + 1;
  static const auto* by_op = [] {
    auto* partials = new std::array<PlacementPtr, kOps>;
    for (size_t op = 0; op < partials->size(); ++op) {
      (*partials)[op] = std::make_shared<const Partial>(static_cast<ReduceOp>(op));
    }
    return partials;
  }();
  const auto index = static_cast<size_t>(op);
  if (index < by_op->size()) return (*by_op)[index];
  return std::make_shared<const Partial>(op);
}

std::string Partial::to_string() const { return "P(" + std::string(reduce_op_name(op_)) + ")"; }

bool Partial::equals(const Placement& other) const {
  const auto* partial = exactly<Partial>(other);
  return partial != nullptr && partial->op_ == op_;
}

size_t Partial::hash() const { return absl::HashOf(std::string_view("P"), static_cast<int>(op_)); }

namespace {

PlacementPtr parse_partial(const PlacementArguments& arguments) {
  arguments.expect_count(0, 1);
  if (arguments.size() == 0) return Partial::make(ReduceOp::kSum);
  const std::string op = arguments.name(0, "op");
  try {
    return Partial::make(parse_reduce_op(op));
  } catch (const Error&) {
    arguments.fail(0, "op", "one of sum, avg, max, min, product, band, bor, bxor");
  }
}

DTENSOR_REGISTER(parse_partial_spelling) { placement_parsers().add("P", parse_partial); }

}  // namespace
}  // namespace dtensor
