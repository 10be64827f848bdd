// Copyright 2026 The dtensor Authors.
//
// Local SPMD types (dtensor/spmd/types.h), 4 local ranks over "tp": the
// mixing rules on ATen ops, linearity in pending sums read from the rule
// registry, the typed collectives checking and typing, assert_type, and
// local_map running its function type-checked: a sequence-parallel block
// (RMSNorm with an Invariant weight made Replicate, column- and row-parallel
// matmuls) equal to one device, and each classic mistake caught with a
// message that names the op, the mesh dim, the types and the fix.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include <dtensor/dtensor.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/collective_counter.h>
#include <dtensor/spmd/collectives.h>
#include <dtensor/spmd/local_map.h>
#include <dtensor/spmd/types.h>
#include "tests/support/expect_error.h"

namespace dtensor::spmd {
namespace {

constexpr int kRanks = 4;
constexpr Type R = Type::kReplicate;
constexpr Type I = Type::kInvariant;
constexpr Type V = Type::kVarying;
constexpr Type P = Type::kPartial;

at::Tensor typed(std::vector<int64_t> shape, Type type) {
  return set_types(at::ones(shape, at::kDouble), {type});
}

std::optional<Types> only(Type type) { return Types{type}; }

// Runs `body` on every rank inside a type-checking scope over "tp".
void in_scope(const std::function<void(const DeviceMesh&)>& body) {
  run_ranks(kRanks, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {kRanks}, {"tp"});
    ScopedTypeCheck check(mesh);
    body(mesh);
  });
}

TEST(SpmdTypesTest, ReplicateAndVaryingMixToVarying) {
  in_scope([](const DeviceMesh&) {
    const at::Tensor r = typed({2, 2}, R), v = typed({2, 2}, V);
    EXPECT_EQ(types_of(r + v), only(V));
    EXPECT_EQ(types_of(at::mm(v, v)), only(V));
    EXPECT_EQ(types_of(at::mm(r, r)), only(R));
    EXPECT_EQ(types_of(at::relu(v).t()), only(V));
    // A constant made in the scope fits anything and stays untyped alone.
    const at::Tensor constant = at::full({2, 2}, 3.0, at::kDouble);
    EXPECT_EQ(types_of(constant), std::nullopt);
    EXPECT_EQ(types_of(v * constant), only(V));
    EXPECT_EQ(types_of(at::exp(typed({2}, I)) * 2), only(I));
  });
}

TEST(SpmdTypesTest, InvariantMixesOnlyWithInvariant) {
  in_scope([](const DeviceMesh&) {
    const at::Tensor i = typed({2, 2}, I);
    EXPECT_EQ(types_of(i + i), only(I));
    DTENSOR_EXPECT_ERROR(at::mm(i, typed({2, 2}, V)),
                         "aten::mm over mesh dim \"tp\" (input types: I, V): input 0 is "
                         "Invariant (I) and input 1 is Varying (V); I mixes only with I");
    DTENSOR_EXPECT_ERROR(i + typed({2, 2}, R),
                         "Convert the I input with spmd::invariant_to_replicate(x, mesh, \"tp\")");
  });
}

// Linearity comes from the registry: add, mul by a Replicate value or a
// scalar, matmul with a Replicate operand, sum and views keep a pending sum.
TEST(SpmdTypesTest, PendingSumsPassOnlyThroughLinearOps) {
  in_scope([](const DeviceMesh&) {
    const at::Tensor p = typed({2, 2}, P), r = typed({2, 2}, R);
    EXPECT_EQ(types_of(p + p), only(P));
    EXPECT_EQ(types_of(p * r), only(P));
    EXPECT_EQ(types_of(p * 2), only(P));
    EXPECT_EQ(types_of(at::mm(r, p)), only(P));
    EXPECT_EQ(types_of(p.sum(0)), only(P));
    EXPECT_EQ(types_of(p.t().reshape({4})), only(P));
    DTENSOR_EXPECT_ERROR(at::exp(p),
                         "aten::exp over mesh dim \"tp\" (input types: P): input 0 is Partial "
                         "(P), a pending sum, and no sharding rule of aten::exp keeps it pending");
    DTENSOR_EXPECT_ERROR(p * p, "the op is not linear in it");
    DTENSOR_EXPECT_ERROR(p + 1, "a pending sum, and no sharding rule of aten::add");
    DTENSOR_EXPECT_ERROR(p + typed({2, 2}, V),
                         "a pending sum mixes only with pending sums (adding) and Replicate "
                         "values (scaling). Reduce it first: spmd::all_reduce(x, mesh, \"tp\"");
  });
}

// An in-place op gives the tensor it writes the result's type.
TEST(SpmdTypesTest, InPlaceOpsRetypeWhatTheyWrite) {
  in_scope([](const DeviceMesh&) {
    at::Tensor r = typed({2, 2}, R);
    r.mul_(typed({2, 2}, V));
    EXPECT_EQ(types_of(r), only(V));
    at::Tensor written = typed({2, 2}, R);
    DTENSOR_EXPECT_ERROR(written.add_(typed({2, 2}, P)), "aten::add_.Tensor over mesh dim");
  });
}

// What autograd makes anew around a typed tensor (detach's shallow copy)
// views the same memory the same way and keeps its types, so a pending sum
// stays checked.
TEST(SpmdTypesTest, DetachedTensorsKeepTheirTypes) {
  in_scope([](const DeviceMesh&) {
    const at::Tensor p = typed({2, 2}, P);
    EXPECT_EQ(types_of(p.detach()), only(P));
    DTENSOR_EXPECT_ERROR(at::tanh(p.detach()), "the op is not linear in it");
    const at::Tensor v = typed({2, 2}, V).requires_grad_();
    EXPECT_EQ(types_of(v.detach().t()), only(V));
    EXPECT_EQ(types_of(at::ones({2, 2}, at::kDouble)), std::nullopt);
  });
}

// A write retypes every typed tensor viewing memory it writes: R meeting V
// is V, for the base and for other views that overlap (not for those that
// do not). A pending sum written into a view of a replicated tensor is
// refused (by the mixing rules) before anything is written, and so is a
// write that would leave a tensor of two types.
TEST(SpmdTypesTest, WritesRetypeEveryTensorViewingWhatTheyWrite) {
  in_scope([](const DeviceMesh&) {
    const at::Tensor base = typed({2, 2}, R);
    const at::Tensor row0 = base.select(0, 0), column0 = base.select(1, 0);
    base.select(0, 1).copy_(typed({2}, V));
    EXPECT_EQ(types_of(base), only(V));
    EXPECT_EQ(types_of(column0), only(V));
    EXPECT_EQ(types_of(row0), only(R));
    const at::Tensor replicated = typed({2, 2}, R);
    DTENSOR_EXPECT_ERROR(replicated.select(0, 0).copy_(typed({2}, P) * 2),
                         "aten::copy_ over mesh dim \"tp\" (input types: R, P)");
    EXPECT_TRUE(at::equal(replicated, at::ones({2, 2}, at::kDouble)));
    EXPECT_EQ(types_of(replicated), only(R));
    const at::Tensor pending = typed({2, 2}, P);
    const at::Tensor row1 = set_types(pending.select(0, 1), {R});
    DTENSOR_EXPECT_ERROR(pending.mul_(2), "over memory a Replicate (R) tensor views");
    EXPECT_EQ(pending.data_ptr<double>()[3], 1.0);  // unwritten (read past the checker)
  });
}

// A `_foreach_*` op types element by element: an optimizer's list may hold
// R and I tensors side by side, each element's result takes its own type,
// and a mistake in one element is named by its per-element op.
TEST(SpmdTypesTest, ForeachOpsTypeElementByElement) {
  in_scope([](const DeviceMesh&) {
    const std::vector<at::Tensor> params = {typed({2}, R), typed({2}, I)};
    at::_foreach_add_(params, {typed({2}, R), typed({2}, I)});
    EXPECT_EQ(types_of(params[0]), only(R));
    EXPECT_EQ(types_of(params[1]), only(I));
    const std::vector<at::Tensor> scaled = at::_foreach_mul(params, {typed({2}, V), typed({2}, I)});
    EXPECT_EQ(types_of(scaled[0]), only(V));
    EXPECT_EQ(types_of(scaled[1]), only(I));
    at::_foreach_mul_(params, {typed({2}, V), typed({2}, I)});
    EXPECT_EQ(types_of(params[0]), only(V));
    EXPECT_TRUE(at::equal(params[1], at::full({2}, 2.0, at::kDouble)));
    DTENSOR_EXPECT_ERROR(at::_foreach_add_(params, {typed({2}, V), typed({2}, V)}),
                         "aten::add_.Tensor over mesh dim \"tp\" (input types: I, V)");
  });
}

TEST(SpmdTypesTest, CollectivesCheckTheirInputAndTypeTheirResult) {
  in_scope([](const DeviceMesh& mesh) {
    EXPECT_EQ(types_of(all_reduce(typed({4}, P), mesh, "tp", ReplicatedType::kReplicate)), only(R));
    EXPECT_EQ(types_of(all_reduce(typed({4}, V), mesh, "tp", ReplicatedType::kInvariant)), only(I));
    EXPECT_EQ(types_of(reduce_scatter(typed({4}, P), mesh, "tp", 0)), only(V));
    EXPECT_EQ(types_of(all_gather(typed({4}, V), mesh, "tp", 0, ReplicatedType::kReplicate)),
              only(R));
    EXPECT_EQ(types_of(invariant_to_replicate(typed({4}, I), mesh, "tp")), only(R));
    EXPECT_EQ(types_of(replicate_to_invariant(typed({4}, R), mesh, "tp")), only(I));
    DTENSOR_EXPECT_ERROR(all_reduce(typed({4}, I), mesh, "tp", ReplicatedType::kReplicate),
                         "spmd::all_reduce over mesh dim \"tp\": expected an input Partial (P) or "
                         "Varying (V), found Invariant (I)");
    DTENSOR_EXPECT_ERROR(invariant_to_replicate(typed({4}, V), mesh, "tp"),
                         "spmd::invariant_to_replicate over mesh dim \"tp\": expected an input "
                         "Invariant (I), found Varying (V)");
  });
}

TEST(SpmdTypesTest, AssertType) {
  in_scope([](const DeviceMesh&) {
    const at::Tensor v = typed({2}, V);
    assert_type(v, {{"tp", V}});
    assert_type(at::ones({2}), {{"tp", R}});  // untyped counts as R
    DTENSOR_EXPECT_ERROR(assert_type(v, {{"tp", R}}),
                         "spmd::assert_type: over mesh dim \"tp\" expected Replicate (R), found "
                         "Varying (V)");
    DTENSOR_EXPECT_ERROR(assert_type(v, {{"dp", V}}), "expected a dim of");
    DTENSOR_EXPECT_ERROR(set_types(v, {V, V}), "expected one per mesh dim");
  });
  run_ranks(1, [](int) { DTENSOR_EXPECT_ERROR(set_types(at::ones({1}), {V}), "found none"); });
}

TEST(SpmdTypesTest, ParseTypes) {
  EXPECT_EQ(parse_types("V,R"), (Types{V, R}));
  EXPECT_EQ(parse_types("P, I"), (Types{P, I}));
  DTENSOR_EXPECT_ERROR(parse_types("V,X"),
                       "spmd::parse_types: expected R, I, V or P per mesh dim, found \"X\" at "
                       "position 2 of \"V,X\"");
}

// A sequence-parallel block, x [8, 4] split by rows: RMSNorm with weight g,
// then a column-parallel w1 [4, 8] and a row-parallel w2 [8, 4] around a
// tanh, the sequence gathered in and reduce-scattered out.
struct Block {
  at::Tensor x, g, w1, w2, t, y;

  static Block one_device() {
    Block b;
    b.x = at::linspace(-1, 1, 32, at::kDouble).reshape({8, 4}).requires_grad_();
    b.g = at::linspace(0.5, 1.5, 4, at::kDouble).requires_grad_();
    b.w1 = at::linspace(-0.3, 0.4, 32, at::kDouble).reshape({4, 8}).requires_grad_();
    b.w2 = at::linspace(0.2, -0.5, 32, at::kDouble).reshape({8, 4}).requires_grad_();
    b.t = at::linspace(1, 2, 32, at::kDouble).reshape({8, 4});
    b.y = forward(
        b.x, b.g, b.w1, b.w2, [](const at::Tensor& h) { return h; },
        [](const at::Tensor& h) { return h; }, [](const at::Tensor& g) { return g; });
    (b.y * b.t).sum().backward();
    return b;
  }

  // The block with the sequence gathered and scattered by `gather` and
  // `scatter`, and the norm weight made usable on rows by `weight`.
  template <typename Gather, typename Scatter, typename Weight>
  static at::Tensor forward(const at::Tensor& x, const at::Tensor& g, const at::Tensor& w1,
                            const at::Tensor& w2, Gather gather, Scatter scatter, Weight weight) {
    const at::Tensor normed = x * at::rsqrt(x.pow(2).mean(-1, true) + 1e-6) * weight(g);
    return scatter(at::mm(at::tanh(at::mm(gather(normed), w1)), w2));
  }
};

at::Tensor local_block(const std::vector<at::Tensor>& in, const DeviceMesh& mesh,
                       bool convert_weight) {
  return Block::forward(
      in[0], in[1], in[2], in[3],
      [&](const at::Tensor& h) { return all_gather(h, mesh, "tp", 0, ReplicatedType::kReplicate); },
      [&](const at::Tensor& h) { return reduce_scatter(h, mesh, "tp", 0); },
      [&](const at::Tensor& g) {
        return convert_weight ? invariant_to_replicate(g, mesh, "tp") : g;
      });
}

LocalMapFunction block_map(const DeviceMesh& mesh, bool convert_weight) {
  LocalMapOptions options;
  options.in_types = {std::nullopt, Types{I}, std::nullopt, std::nullopt};
  options.out_shapes = {std::vector<int64_t>{8, 4}};
  return local_map(
      [&mesh, convert_weight](const std::vector<at::Tensor>& in) {
        return std::vector<at::Tensor>{local_block(in, mesh, convert_weight)};
      },
      {parse_placements("S(0)")},
      {parse_placements("S(0)"), parse_placements("R"), parse_placements("S(1)"),
       parse_placements("S(0)")},
      mesh, options);
}

void expect_near(const at::Tensor& a, const at::Tensor& b) {
  ASSERT_EQ(a.sizes(), b.sizes());
  EXPECT_LE((a - b).abs().max().item<double>(), 1e-12);
}

// The block on DTensors, as propagation runs it (the sequence gathered and
// scattered by redistribute): what the typed version must equal.
at::Tensor dtensor_block(const std::vector<DTensor>& in) {
  return Block::forward(
      in[0].tensor(), in[1].tensor(), in[2].tensor(), in[3].tensor(),
      [](const at::Tensor& h) { return DTensor(h).redistribute(parse_placements("R")).tensor(); },
      [](const at::Tensor& h) {
        return DTensor(h).redistribute(parse_placements("S(0)")).tensor();
      },
      [](const at::Tensor& g) { return g; });
}

// The typed block's result and gradients (x, g, w1, w2), full, on `mesh`,
// and the collectives its step ran.
struct BlockRun {
  std::vector<at::Tensor> values;  // y, then the gradients
  std::map<std::string, int64_t, std::less<>> collectives;
};

BlockRun run_block(const Block& reference, const DeviceMesh& mesh, bool typed) {
  const auto dist = [&](const at::Tensor& t, const char* placements) {
    return distribute_tensor(t.detach().clone().requires_grad_(), mesh,
                             parse_placements(placements));
  };
  const std::vector<DTensor> in = {dist(reference.x, "S(0)"), dist(reference.g, "R"),
                                   dist(reference.w1, "S(1)"), dist(reference.w2, "S(0)")};
  const at::Tensor target = distribute_tensor(reference.t, mesh, parse_placements("S(0)")).tensor();
  BlockRun run;
  {
    CollectiveCounter counter;
    const at::Tensor y = typed ? block_map(mesh, true)({in[0].tensor(), in[1].tensor(),
                                                        in[2].tensor(), in[3].tensor()})[0]
                               : dtensor_block(in);
    (y * target).sum().backward();
    run.collectives = counter.by_collective();
    run.values.push_back(DTensor(y).full_tensor());
  }
  for (const DTensor& t : in) run.values.push_back(DTensor(t.tensor().grad()).full_tensor());
  return run;
}

// The norm weight is Invariant: converted to Replicate before it meets the
// rows, its gradient is a pending sum that the conversion's backward
// all-reduces, so every rank holds the whole gradient. The typed block
// equals one device and the same block on DTensors, values and gradients,
// with the same gathers and scatters.
TEST(SpmdTypesTest, SequenceParallelBlockIsCheckedAndEqualsOneDeviceAndDTensors) {
  const Block reference = Block::one_device();
  const std::vector<at::Tensor> expected = {reference.y.detach(), reference.x.grad(),
                                            reference.g.grad(), reference.w1.grad(),
                                            reference.w2.grad()};
  run_ranks(kRanks, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {kRanks}, {"tp"});
    const BlockRun typed = run_block(reference, mesh, /*typed=*/true);
    const BlockRun propagated = run_block(reference, mesh, /*typed=*/false);
    for (size_t i = 0; i < expected.size(); ++i) {
      SCOPED_TRACE(i);
      expect_near(typed.values[i], expected[i]);
      expect_near(typed.values[i], propagated.values[i]);
    }
    // The same gathers and scatters; the typed block also all-reduces the
    // weight's gradient in backward (the DTensor one leaves it a pending
    // sum until read).
    using Counts = std::map<std::string, int64_t, std::less<>>;
    EXPECT_EQ(propagated.collectives, (Counts{{"all_gather_v", 2}, {"reduce_scatter_v", 2}}));
    EXPECT_EQ(typed.collectives,
              (Counts{{"all_gather_v", 2}, {"all_reduce", 1}, {"reduce_scatter_v", 2}}));
  });
}

// A row-parallel matmul's local product (V times V) is each rank's term of
// the sum: placed P(sum), it is accepted, and its gradient reaches every
// rank whole.
TEST(SpmdTypesTest, AVaryingOutputPlacedPartialIsEachRanksTerm) {
  const at::Tensor x = at::linspace(-1, 1, 24, at::kDouble).reshape({3, 8}).requires_grad_();
  const at::Tensor w = at::linspace(0.5, -0.5, 32, at::kDouble).reshape({8, 4}).requires_grad_();
  const at::Tensor t = at::linspace(1, 2, 12, at::kDouble).reshape({3, 4});
  const at::Tensor y = at::mm(x, w);
  (y * t).sum().backward();
  run_ranks(kRanks, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {kRanks}, {"tp"});
    const DTensor x_dt =
        distribute_tensor(x.detach().clone().requires_grad_(), mesh, parse_placements("S(1)"));
    const DTensor w_dt =
        distribute_tensor(w.detach().clone().requires_grad_(), mesh, parse_placements("S(0)"));
    const auto row_parallel = local_map(
        [](const std::vector<at::Tensor>& in) {
          return std::vector<at::Tensor>{at::mm(in[0], in[1])};
        },
        {parse_placements("P(sum)")}, {parse_placements("S(1)"), parse_placements("S(0)")}, mesh);
    const DTensor out(row_parallel({x_dt.tensor(), w_dt.tensor()})[0]);
    expect_near(out.full_tensor(), y.detach());
    (out.redistribute(parse_placements("R")).tensor() *
     distribute_tensor(t, mesh, parse_placements("R")).tensor())
        .sum()
        .backward();
    expect_near(DTensor(x_dt.tensor().grad()).full_tensor(), x.grad());
    expect_near(DTensor(w_dt.tensor().grad()).full_tensor(), w.grad());
  });
}

// Classic mistakes, each caught where it is made.
TEST(SpmdTypesTest, ClassicMistakesAreCaught) {
  run_ranks(kRanks, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {kRanks}, {"tp"});
    const DTensor x =
        distribute_tensor(at::ones({8, 4}, at::kDouble), mesh, parse_placements("S(0)"));
    const DTensor g = distribute_tensor(at::ones({4}, at::kDouble), mesh, parse_placements("R"));
    const DTensor w1 =
        distribute_tensor(at::ones({4, 8}, at::kDouble), mesh, parse_placements("S(1)"));
    const DTensor w2 =
        distribute_tensor(at::ones({8, 4}, at::kDouble), mesh, parse_placements("S(0)"));
    // The Invariant norm weight used on rows without invariant_to_replicate:
    // its gradient would lack the all-reduce.
    DTENSOR_EXPECT_ERROR(
        block_map(mesh, false)({x.tensor(), g.tensor(), w1.tensor(), w2.tensor()}),
        "aten::mul.Tensor over mesh dim \"tp\" (input types: V, I): input 1 is Invariant (I) and "
        "input 0 is Varying (V); I mixes only with I (its gradient must be the same on every "
        "rank). Convert the I input with spmd::invariant_to_replicate(x, mesh, \"tp\")");
    // An activation on a pending sum (a row-parallel layer's output passed
    // in as Partial).
    const DTensor pending =
        from_local(at::ones({8, 4}, at::kDouble), mesh, parse_placements("P(sum)"));
    const auto activate = local_map(
        [](const std::vector<at::Tensor>& in) { return std::vector<at::Tensor>{at::gelu(in[0])}; },
        {parse_placements("P(sum)")}, {parse_placements("P(sum)")}, mesh);
    DTENSOR_EXPECT_ERROR(activate({pending.tensor()}),
                         "aten::gelu over mesh dim \"tp\" (input types: P): input 0 is Partial "
                         "(P), a pending sum");
    // A Varying result declared Replicate.
    const auto wrong_output = local_map(
        [](const std::vector<at::Tensor>& in) { return std::vector<at::Tensor>{in[0] * 2}; },
        {parse_placements("R")}, {parse_placements("S(0)")}, mesh);
    DTENSOR_EXPECT_ERROR(wrong_output({x.tensor()}),
                         "local_map: output 0 on mesh dim \"tp\": expected Replicate (R) or "
                         "Invariant (I) for placement R (out_placements[0]), found Varying (V)");
  });
}

}  // namespace
}  // namespace dtensor::spmd
