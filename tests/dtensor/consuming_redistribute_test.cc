// Copyright 2026 The dtensor Authors.
//
// Redistributing a DTensor that is given up (`std::move(x).redistribute(...)`
// or a temporary): its shard's memory is reused exactly when nothing else
// holds it (P -> R in place, R -> S a view, one-rank groups no copy), the
// values are always those of the copying form, and a source that is still
// held anywhere is never written.
#include <cstdint>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <dtensor/dtensor.h>
#include <dtensor/mesh/device_mesh.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/collective_counter.h>

namespace dtensor {
namespace {

// Rank r's term of a Partial(sum): the global values times (r + 1).
at::Tensor term(int rank) { return at::arange(12, at::kFloat).reshape({3, 4}) * (rank + 1); }

// The sum of the four ranks' terms.
at::Tensor sum_of_terms() { return at::arange(12, at::kFloat).reshape({3, 4}) * 10; }

const void* shard_address(const DTensor& t) { return t.to_local().data_ptr(); }

TEST(ConsumingRedistributeTest, PartialToReplicateReducesInPlace) {
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    DTensor x = from_local(term(rank), mesh, parse_placements("P(sum)"));
    const void* address = shard_address(x);
    CollectiveCounter counter;
    const DTensor r = std::move(x).redistribute(parse_placements("R"));
    EXPECT_EQ(counter.count("all_reduce"), 1);
    EXPECT_EQ(counter.total(), 1);
    EXPECT_EQ(shard_address(r), address) << "expected the sum in the source's memory";
    EXPECT_TRUE(at::equal(r.to_local(), sum_of_terms())) << r.to_local();
  });
}

// Any other holder of the shard's memory makes the call copy: the holder
// keeps its values.
TEST(ConsumingRedistributeTest, HeldSourcesAreNeverWritten) {
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const std::vector<PlacementPtr> partial = parse_placements("P(sum)");
    const std::vector<PlacementPtr> replicate = parse_placements("R");
    {  // another handle on the DTensor
      DTensor x = from_local(term(rank), mesh, partial);
      const DTensor kept = x;
      const DTensor r = std::move(x).redistribute(replicate);
      EXPECT_TRUE(at::equal(kept.to_local(), term(rank)));
      EXPECT_TRUE(at::equal(r.to_local(), sum_of_terms()));
      EXPECT_NE(shard_address(r), shard_address(kept));
    }
    {  // its shard, taken with to_local
      DTensor x = from_local(term(rank), mesh, partial);
      const at::Tensor shard = x.to_local();
      const DTensor r = std::move(x).redistribute(replicate);
      EXPECT_TRUE(at::equal(shard, term(rank)));
      EXPECT_TRUE(at::equal(r.to_local(), sum_of_terms()));
    }
    {  // a view of its shard
      DTensor x = from_local(term(rank), mesh, partial);
      const at::Tensor row = x.to_local()[1];
      const DTensor r = std::move(x).redistribute(replicate);
      EXPECT_TRUE(at::equal(row, term(rank)[1]));
      EXPECT_TRUE(at::equal(r.to_local(), sum_of_terms()));
    }
    {  // the tensor from_local wrapped, still the caller's
      const at::Tensor mine = term(rank);
      DTensor x = from_local(mine, mesh, partial);
      const DTensor r = std::move(x).redistribute(replicate);
      EXPECT_TRUE(at::equal(mine, term(rank)));
      EXPECT_TRUE(at::equal(r.to_local(), sum_of_terms()));
    }
  });
}

// R -> S(0) keeps a contiguous block of rows: a view of the replicated
// shard at that block. R -> S(1) keeps a strided part: a contiguous copy.
TEST(ConsumingRedistributeTest, ReplicateToContiguousShardsIsAView) {
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor global = at::arange(30, at::kFloat).reshape({10, 3});
    // Uneven: rows 3, 3, 3, 1.
    const std::vector<int64_t> first_row = {0, 3, 6, 9};
    for (const char* target : {"S(0)", "RG(dims=1,units=[3,3,3,1])"}) {
      SCOPED_TRACE(target);
      // A copy: distribute_tensor's Replicate shard is the caller's tensor.
      DTensor x = distribute_tensor(global.clone(), mesh, parse_placements("R"));
      const auto* base = static_cast<const float*>(shard_address(x));
      const DTensor s = std::move(x).redistribute(parse_placements(target));
      const at::Tensor local = s.to_local();
      EXPECT_EQ(local.data_ptr(), base + first_row[rank] * 3) << "expected a view of the source";
      EXPECT_TRUE(local.is_contiguous());
      EXPECT_TRUE(
          at::equal(local, distribute_tensor(global, mesh, parse_placements(target)).to_local()));
    }
    DTensor x = distribute_tensor(global.clone(), mesh, parse_placements("R"));
    const DTensor s = std::move(x).redistribute(parse_placements("S(1)"));
    EXPECT_TRUE(s.to_local().is_contiguous());
    EXPECT_TRUE(at::equal(s.to_local(),
                          distribute_tensor(global, mesh, parse_placements("S(1)")).to_local()));
    EXPECT_TRUE(at::equal(s.full_tensor(), global));
  });
}

// A temporary is given up too; a group of one rank then copies nothing.
TEST(ConsumingRedistributeTest, TemporariesAndOneRankGroups) {
  run_ranks(4, [](int /*rank*/) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor global = at::arange(24, at::kDouble).reshape({4, 6});
    for (const char* target : {"S(0)", "S(1)"}) {
      const DTensor s = distribute_tensor(global.clone(), mesh, parse_placements("R"))
                            .redistribute(parse_placements(target));
      EXPECT_TRUE(at::equal(s.full_tensor(), global)) << target;
    }
  });
  run_ranks(1, [](int /*rank*/) {
    const DeviceMesh mesh = init_device_mesh("local", {1});
    const at::Tensor global = at::arange(6, at::kFloat).reshape({2, 3});
    DTensor x = distribute_tensor(global, mesh, parse_placements("S(1)"));
    const void* address = shard_address(x);
    const DTensor r = std::move(x).redistribute(parse_placements("R"));
    EXPECT_EQ(shard_address(r), address);
    EXPECT_TRUE(at::equal(r.to_local(), global));
  });
}

// Two mesh dims: the Partial sums reduce in place (one all-reduce over the
// group of both dims), and a shard of rows kept from Replicate is a view.
TEST(ConsumingRedistributeTest, TwoDimMeshes) {
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2});
    DTensor partial = from_local(term(rank), mesh, parse_placements("P(sum),P(sum)"));
    const void* address = shard_address(partial);
    const DTensor sum = std::move(partial).redistribute(parse_placements("R,R"));
    EXPECT_EQ(shard_address(sum), address);
    EXPECT_TRUE(at::equal(sum.to_local(), sum_of_terms()));

    const at::Tensor global = at::arange(24, at::kFloat).reshape({6, 4});
    DTensor replicated = distribute_tensor(global.clone(), mesh, parse_placements("R,R"));
    const auto* base = static_cast<const float*>(shard_address(replicated));
    const DTensor rows = std::move(replicated).redistribute(parse_placements("S(0),R"));
    EXPECT_EQ(shard_address(rows), base + mesh.coordinate()[0] * 3 * 4);
    EXPECT_TRUE(at::equal(rows.full_tensor(), global));
  });
}

// What the counts cannot see is never written: memory libtorch does not own
// (from_blob), and a leaf that requires grad.
TEST(ConsumingRedistributeTest, ForeignMemoryAndLeavesAreCopied) {
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    std::vector<float> buffer(12);
    at::from_blob(buffer.data(), {3, 4}, at::kFloat).copy_(term(rank));
    DTensor x = from_local(at::from_blob(buffer.data(), {3, 4}, at::kFloat), mesh,
                           parse_placements("P(sum)"));
    const DTensor r = std::move(x).redistribute(parse_placements("R"));
    EXPECT_TRUE(at::equal(at::from_blob(buffer.data(), {3, 4}, at::kFloat), term(rank)));
    EXPECT_TRUE(at::equal(r.to_local(), sum_of_terms()));

    const at::Tensor global = at::arange(8, at::kFloat).reshape({4, 2});
    DTensor leaf(distribute_tensor(global.clone(), mesh, parse_placements("R"))
                     .tensor()
                     .detach()
                     .requires_grad_());
    const auto* base = static_cast<const float*>(leaf.to_local().detach().data_ptr());
    const DTensor s = std::move(leaf).redistribute(parse_placements("S(0)"));
    EXPECT_NE(s.to_local().detach().data_ptr(), base + rank * 2) << "a leaf was viewed";
    EXPECT_TRUE(at::equal(s.full_tensor().detach(), global));
  });
}

// Sources autograd saved (an input of mul, an output of exp) are held by the
// graph: their shards are copied, never viewed, and the gradients are exact.
TEST(ConsumingRedistributeTest, SourcesAutogradSavedAreCopied) {
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor global = at::arange(8, at::kDouble).reshape({4, 2}) / 8;
    const at::Tensor w =
        distribute_tensor(global, mesh, parse_placements("R")).tensor().detach().requires_grad_();
    DTensor x(at::mul(w, 3));
    const DTensor squares(at::mul(x.tensor(), x.tensor()));  // saves x
    const auto* x_base = static_cast<const double*>(shard_address(x));
    const DTensor x_rows = std::move(x).redistribute(parse_placements("S(0)"));
    EXPECT_NE(shard_address(x_rows), x_base + rank * 2) << "viewed a source mul saved";
    DTensor e(at::exp(w));  // saves its output
    const auto* e_base = static_cast<const double*>(shard_address(e));
    const DTensor e_rows = std::move(e).redistribute(parse_placements("S(0)"));
    EXPECT_NE(shard_address(e_rows), e_base + rank * 2) << "viewed a source exp saved";
    (squares.tensor().sum() + x_rows.tensor().sum() + e_rows.tensor().sum()).backward();
    // d/dw of sum(9 w^2) + sum(3 w) + sum(exp(w)).
    const at::Tensor expected = global * 18 + 3 + global.exp();
    EXPECT_TRUE(at::allclose(DTensor(w.grad()).full_tensor(), expected, 1e-12, 0));
  });
}

// Edge cases given up: a 0-dim sum in place, a strided Partial shard, and
// empty shards kept from Replicate.
TEST(ConsumingRedistributeTest, ScalarsStridedAndEmptyShards) {
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    DTensor scalar =
        from_local(at::scalar_tensor(rank + 1.0, at::kFloat), mesh, parse_placements("P(sum)"));
    const void* address = shard_address(scalar);
    const DTensor reduced = std::move(scalar).redistribute(parse_placements("R"));
    EXPECT_EQ(shard_address(reduced), address);
    EXPECT_EQ(reduced.to_local().item<float>(), 10.0F);

    DTensor strided = from_local(term(rank).t().contiguous().t(), mesh, parse_placements("P(sum)"));
    const DTensor strided_sum = std::move(strided).redistribute(parse_placements("R"));
    EXPECT_TRUE(at::equal(strided_sum.to_local(), sum_of_terms()));

    const at::Tensor global = at::arange(6, at::kBFloat16).reshape({2, 3});
    DTensor replicated = distribute_tensor(global.clone(), mesh, parse_placements("R"));
    const DTensor rows = std::move(replicated).redistribute(parse_placements("S(0)"));
    EXPECT_EQ(rows.to_local().size(0), rank < 2 ? 1 : 0);
    EXPECT_TRUE(at::equal(rows.full_tensor(), global));
  });
}

// Gradients through a consumed redistribute equal those through the
// copying one.
TEST(ConsumingRedistributeTest, GradientsMatchTheCopyingForm) {
  run_ranks(4, [](int /*rank*/) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor global = at::arange(16, at::kFloat).reshape({8, 2});
    const at::Tensor weights = at::arange(16, at::kFloat).reshape({8, 2}) + 1;
    const auto gradient = [&](bool consume) {
      const at::Tensor leaf =
          distribute_tensor(global, mesh, parse_placements("R")).tensor().detach().requires_grad_();
      DTensor doubled(at::mul(leaf, 2));  // mul by a scalar saves no tensor
      const auto* base = static_cast<const float*>(shard_address(doubled));
      const DTensor shards = consume ? std::move(doubled).redistribute(parse_placements("S(0)"))
                                     : doubled.redistribute(parse_placements("S(0)"));
      EXPECT_EQ(shard_address(shards) == base + mesh.coordinate()[0] * 2 * 2, consume)
          << "expected a view exactly when the source is given up";
      const DTensor w = distribute_tensor(weights, mesh, parse_placements("S(0)"));
      at::mul(shards.tensor(), w.tensor()).sum().backward();
      return DTensor(leaf.grad()).full_tensor();
    };
    const at::Tensor copied = gradient(false);
    EXPECT_TRUE(at::equal(copied, weights * 2)) << copied;
    EXPECT_TRUE(at::equal(gradient(true), copied));
  });
}

}  // namespace
}  // namespace dtensor
