// Copyright 2026 The dtensor Authors.
//
// The typed collectives of dtensor/spmd/collectives.h on the local backend,
// 4 ranks: each forward and the backward its types give, on exact integer
// values; a Megatron tensor-parallel MLP and its sequence-parallel variant
// written with them equal one device (float64, 1e-12), gradients included,
// with the collectives a hand-written plan has (and the Megatron MLP equals
// the same MLP on DTensors); all_to_all and all_to_all_v (run-time splits,
// some empty) move exact values and their gradients back; bad arguments get
// a clear error.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <dtensor/dtensor.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/collective_counter.h>
#include <dtensor/spmd/collectives.h>
#include "tests/support/expect_error.h"

namespace dtensor::spmd {
namespace {

constexpr int kRanks = 4;
constexpr double kTolerance = 1e-12;

at::Tensor filled(std::vector<int64_t> shape, double value) {
  return at::full(shape, value, at::kDouble);
}

// A collective's forward and backward on rank `rank`: x = rank + 1 everywhere
// (shape [4, 2]), the gradient seeded with rank + 10.
struct Case {
  std::string name;
  std::function<at::Tensor(const at::Tensor&, const DeviceMesh&)> collective;
  std::function<at::Tensor(int rank)> expected_output;
  std::function<at::Tensor(int rank)> expected_grad;
};

// Sums over the ranks of rank + 1 and of rank + 10.
constexpr double kSumX = 1 + 2 + 3 + 4;
constexpr double kSumGrad = 10 + 11 + 12 + 13;

std::vector<Case> cases() {
  const auto constant = [](std::vector<int64_t> shape, std::function<double(int)> value) {
    return [shape, value](int rank) { return filled(shape, value(rank)); };
  };
  // Rank r's rows of a gathered [16, 2] tensor hold r + 1.
  const auto gathered = [](int) {
    return at::arange(1, kRanks + 1, at::kDouble).repeat_interleave(4).unsqueeze(1).expand({16, 2});
  };
  return {
      {"all_reduce to R: backward all-reduces",
       [](const at::Tensor& x, const DeviceMesh& mesh) {
         return all_reduce(x, mesh, "tp", ReplicatedType::kReplicate);
       },
       constant({4, 2}, [](int) { return kSumX; }), constant({4, 2}, [](int) { return kSumGrad; })},
      {"all_reduce to I: backward passes the gradient",
       [](const at::Tensor& x, const DeviceMesh& mesh) {
         return all_reduce(x, mesh, "tp", ReplicatedType::kInvariant);
       },
       constant({4, 2}, [](int) { return kSumX; }),
       constant({4, 2}, [](int r) { return r + 10.0; })},
      {"all_gather to R: backward reduce-scatters",
       [](const at::Tensor& x, const DeviceMesh& mesh) {
         return all_gather(x, mesh, "tp", 0, ReplicatedType::kReplicate);
       },
       gathered, constant({4, 2}, [](int) { return kSumGrad; })},
      {"all_gather to I: backward slices",
       [](const at::Tensor& x, const DeviceMesh& mesh) {
         return all_gather(x, mesh, "tp", 0, ReplicatedType::kInvariant);
       },
       gathered, constant({4, 2}, [](int r) { return r + 10.0; })},
      {"reduce_scatter: backward all-gathers",
       [](const at::Tensor& x, const DeviceMesh& mesh) { return reduce_scatter(x, mesh, "tp", 0); },
       constant({1, 2}, [](int) { return kSumX; }),
       [](int) {
         return at::arange(10, 10 + kRanks, at::kDouble).unsqueeze(1).expand({4, 2}).contiguous();
       }},
      {"invariant_to_replicate: backward all-reduces",
       [](const at::Tensor& x, const DeviceMesh& mesh) {
         return invariant_to_replicate(x, mesh, "tp");
       },
       constant({4, 2}, [](int r) { return r + 1.0; }),
       constant({4, 2}, [](int) { return kSumGrad; })},
      {"replicate_to_invariant: backward keeps coordinate 0's gradient",
       [](const at::Tensor& x, const DeviceMesh& mesh) {
         return replicate_to_invariant(x, mesh, "tp");
       },
       constant({4, 2}, [](int r) { return r + 1.0; }),
       constant({4, 2}, [](int r) { return r == 0 ? 10.0 : 0.0; })},
  };
}

TEST(SpmdCollectivesTest, ForwardAndTypedBackward) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    run_ranks(kRanks, [&](int rank) {
      const DeviceMesh mesh = init_device_mesh("local", {kRanks}, {"tp"});
      const at::Tensor x = filled({4, 2}, rank + 1.0).requires_grad_();
      const at::Tensor y = c.collective(x, mesh);
      EXPECT_TRUE(at::equal(y, c.expected_output(rank))) << y;
      y.backward(at::full_like(y, rank + 10.0));
      EXPECT_TRUE(at::equal(x.grad(), c.expected_grad(rank))) << x.grad();
    });
  }
}

// On a (dp, tp) mesh of 2 x 2 a collective runs within the calling rank's
// group of its mesh dim alone: dp groups {0, 2}, {1, 3}; tp groups {0, 1}, {2, 3}.
TEST(SpmdCollectivesTest, RunsWithinOneMeshDim) {
  run_ranks(kRanks, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2}, {"dp", "tp"});
    const at::Tensor x = filled({1, 2}, rank + 1.0).requires_grad_();
    const at::Tensor sum = all_reduce(x, mesh, "dp", ReplicatedType::kReplicate);
    EXPECT_TRUE(at::equal(sum, filled({1, 2}, rank % 2 == 0 ? 1.0 + 3.0 : 2.0 + 4.0)));
    const at::Tensor gathered = all_gather(x, mesh, "tp", 1, ReplicatedType::kReplicate);
    const double first = rank < 2 ? 1.0 : 3.0;
    EXPECT_TRUE(at::equal(
        gathered, at::tensor({first, first, first + 1, first + 1}, at::kDouble).reshape({1, 4})));
    // Gradients: the dp sum's all-reduce over dp, the tp gather's
    // reduce-scatter over tp, each of rank + 10.
    (sum * (rank + 10.0)).sum().add((gathered * (rank + 10.0)).sum()).backward();
    const double dp_grad = rank % 2 == 0 ? 10.0 + 12.0 : 11.0 + 13.0;
    const double tp_grad = rank < 2 ? 10.0 + 11.0 : 12.0 + 13.0;
    EXPECT_TRUE(at::equal(x.grad(), filled({1, 2}, dp_grad + tp_grad))) << x.grad();
  });
}

// Smooth, distinct float64 values.
at::Tensor values(const std::vector<int64_t>& shape, double phase) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return at::arange(n, at::kDouble).mul(0.37).add(phase).sin().reshape(shape);
}

// One device's MLP: y = tanh(x w1) w2 and loss = sum(y * t).
struct Mlp {
  at::Tensor x, w1, w2, t;
  at::Tensor y;

  static Mlp one_device(int64_t tokens) {
    Mlp m{values({tokens, 4}, 0.1).requires_grad_(), values({4, 8}, 0.7).requires_grad_(),
          values({8, 4}, 1.3).requires_grad_(), values({tokens, 4}, 2.1), at::Tensor()};
    m.y = at::mm(at::tanh(at::mm(m.x, m.w1)), m.w2);
    (m.y * m.t).sum().backward();
    return m;
  }
};

void expect_near(const at::Tensor& found, const at::Tensor& expected) {
  ASSERT_EQ(found.sizes(), expected.sizes());
  EXPECT_LE((found - expected).abs().max().item<double>(), kTolerance) << found << expected;
}

// Megatron: x Invariant, f (invariant_to_replicate), column-parallel w1,
// row-parallel w2, g (all_reduce to I). One all-reduce each way.
TEST(SpmdCollectivesTest, MegatronMlpMatchesOneDevice) {
  const Mlp reference = Mlp::one_device(3);
  run_ranks(kRanks, [&](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {kRanks}, {"tp"});
    const at::Tensor x = reference.x.detach().clone().requires_grad_();
    const at::Tensor w1 = reference.w1.detach().narrow(1, 2 * rank, 2).clone().requires_grad_();
    const at::Tensor w2 = reference.w2.detach().narrow(0, 2 * rank, 2).clone().requires_grad_();
    CollectiveCounter counter;
    const at::Tensor h = at::tanh(at::mm(invariant_to_replicate(x, mesh, "tp"), w1));
    const at::Tensor y = all_reduce(at::mm(h, w2), mesh, "tp", ReplicatedType::kInvariant);
    EXPECT_EQ(counter.total(), 1);
    expect_near(y, reference.y.detach());
    (y * reference.t).sum().backward();
    EXPECT_EQ(counter.count("all_reduce"), 2);
    EXPECT_EQ(counter.total(), 2);
    expect_near(x.grad(), reference.x.grad());
    expect_near(w1.grad(), reference.w1.grad().narrow(1, 2 * rank, 2));
    expect_near(w2.grad(), reference.w2.grad().narrow(0, 2 * rank, 2));

    // The same MLP on DTensors, laid out alike, has the same values.
    const DTensor x_dt = distribute_tensor(reference.x.detach().clone().requires_grad_(), mesh,
                                           parse_placements("R"));
    const DTensor w1_dt = distribute_tensor(reference.w1.detach().clone().requires_grad_(), mesh,
                                            parse_placements("S(1)"));
    const DTensor w2_dt = distribute_tensor(reference.w2.detach().clone().requires_grad_(), mesh,
                                            parse_placements("S(0)"));
    const at::Tensor y_dt = DTensor(at::mm(at::tanh(at::mm(x_dt, w1_dt)), w2_dt)).full_tensor();
    expect_near(y_dt, y.detach());
    (y_dt * reference.t).sum().backward();
    expect_near(DTensor(x_dt.tensor().grad()).full_tensor(), x.grad());
    expect_near(DTensor(w1_dt.tensor().grad()).to_local(), w1.grad());
    expect_near(DTensor(w2_dt.tensor().grad()).to_local(), w2.grad());
  });
}

// Sequence parallel: x split by tokens (Varying), all_gather to R in,
// reduce_scatter out; the loss is each rank's term.
TEST(SpmdCollectivesTest, SequenceParallelMlpMatchesOneDevice) {
  const Mlp reference = Mlp::one_device(8);
  run_ranks(kRanks, [&](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {kRanks}, {"tp"});
    const at::Tensor x = reference.x.detach().narrow(0, 2 * rank, 2).clone().requires_grad_();
    const at::Tensor w1 = reference.w1.detach().narrow(1, 2 * rank, 2).clone().requires_grad_();
    const at::Tensor w2 = reference.w2.detach().narrow(0, 2 * rank, 2).clone().requires_grad_();
    CollectiveCounter counter;
    const at::Tensor full = all_gather(x, mesh, "tp", 0, ReplicatedType::kReplicate);
    const at::Tensor y = reduce_scatter(at::mm(at::tanh(at::mm(full, w1)), w2), mesh, "tp", 0);
    expect_near(y, reference.y.detach().narrow(0, 2 * rank, 2));
    (y * reference.t.narrow(0, 2 * rank, 2)).sum().backward();
    EXPECT_EQ(counter.total(), 4);  // all-gather and reduce-scatter, each way
    expect_near(x.grad(), reference.x.grad().narrow(0, 2 * rank, 2));
    expect_near(w1.grad(), reference.w1.grad().narrow(1, 2 * rank, 2));
    expect_near(w2.grad(), reference.w2.grad().narrow(0, 2 * rank, 2));
  });
}

// 5 rows over 4 ranks: torch.chunk's pieces 2, 2, 1, 0, and back.
TEST(SpmdCollectivesTest, ReduceScatterOfUnevenRows) {
  run_ranks(kRanks, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {kRanks}, {"tp"});
    const at::Tensor x = at::arange(5, at::kDouble).add(rank).requires_grad_();
    const at::Tensor y = reduce_scatter(x, mesh, "tp", 0);
    const at::Tensor sum = at::arange(5, at::kDouble).mul(kRanks).add(0 + 1 + 2 + 3);
    const int64_t begin = std::min<int64_t>(2 * rank, 5);
    EXPECT_TRUE(at::equal(y, sum.narrow(0, begin, std::min<int64_t>(2, 5 - begin))));
    y.backward(at::full_like(y, rank + 10.0));
    EXPECT_TRUE(at::equal(x.grad(), at::tensor({10.0, 10.0, 11.0, 11.0, 12.0}, at::kDouble)));
  });
}

// An all_to_all is one redistribute step each way, which the planner runs
// as its all-to-all (named all_to_all_v: the block transition cuts any dim).
void expect_one_exchange_each_way(const CollectiveCounter& counter) {
  const std::map<std::string, int64_t, std::less<>> expected = {{"all_to_all_v", 2}};
  EXPECT_EQ(counter.by_collective(), expected);
}

// all_to_all on [4, 2] tensors, rank r holding 100 r + (0..7): row p goes
// to rank p, which concatenates the rows along dim 1 in rank order. The
// backward sends each gradient entry back where its value came from.
TEST(SpmdCollectivesTest, AllToAllAcrossDims) {
  run_ranks(kRanks, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {kRanks}, {"ep"});
    const at::Tensor x =
        at::arange(8, at::kDouble).reshape({4, 2}).add(100.0 * rank).requires_grad_();
    CollectiveCounter counter;
    const at::Tensor y = all_to_all(x, mesh, "ep", /*split_dim=*/0, /*concat_dim=*/1);
    std::vector<double> expected;  // rank q's row `rank`: 2 rank + j + 100 q
    for (int q = 0; q < kRanks; ++q) {
      for (int j = 0; j < 2; ++j) expected.push_back(2 * rank + j + 100.0 * q);
    }
    EXPECT_TRUE(at::equal(y, at::tensor(expected, at::kDouble).reshape({1, 8}))) << y;
    y.backward(y.detach() + 1000.0 * rank);
    expect_one_exchange_each_way(counter);
    // x[p, j] went to rank p, whose gradient there is its value + 1000 p.
    const at::Tensor p = at::arange(4, at::kDouble).unsqueeze(1);
    EXPECT_TRUE(at::equal(x.grad(), x.detach() + 1000.0 * p)) << x.grad();
  });
}

// split_dim == concat_dim: rank r's [8, 1] rows 100 r + (0..7) cut into 4
// pieces of 2; rank p receives every rank's piece p, in rank order.
TEST(SpmdCollectivesTest, AllToAllAlongOneDim) {
  run_ranks(kRanks, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {kRanks}, {"ep"});
    const at::Tensor x = at::arange(8, at::kDouble).add(100.0 * rank).unsqueeze(1).requires_grad_();
    CollectiveCounter counter;
    const at::Tensor y = all_to_all(x, mesh, "ep", 0, 0);
    std::vector<double> expected;
    for (int q = 0; q < kRanks; ++q) {
      for (int i = 0; i < 2; ++i) expected.push_back(2 * rank + i + 100.0 * q);
    }
    EXPECT_TRUE(at::equal(y, at::tensor(expected, at::kDouble).unsqueeze(1))) << y;
    y.backward(y.detach() + 1000.0 * rank);
    expect_one_exchange_each_way(counter);
    const at::Tensor p = at::arange(4, at::kDouble).repeat_interleave(2).unsqueeze(1);
    EXPECT_TRUE(at::equal(x.grad(), x.detach() + 1000.0 * p)) << x.grad();
  });
}

// Rows rank q sends rank p under all_to_all_v below: 0, 1 or 2, so some
// pairs exchange nothing.
int64_t rows_from_to(int64_t q, int64_t p) { return (q + 2 * p) % 3; }

// Rank q's rows for rank p: [100 q + 10 p + i, -(100 q + 10 p + i)].
at::Tensor rows_for(int64_t q, int64_t p) {
  const at::Tensor v = at::arange(rows_from_to(q, p), at::kDouble).add(100.0 * q + 10.0 * p);
  return at::stack({v, -v}, 1);
}

TEST(SpmdCollectivesTest, AllToAllVWithRunTimeSplits) {
  run_ranks(kRanks, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {kRanks}, {"ep"});
    std::vector<int64_t> send(kRanks), expected_recv(kRanks);
    std::vector<at::Tensor> sent, expected_rows;
    for (int p = 0; p < kRanks; ++p) {
      send[p] = rows_from_to(rank, p);
      expected_recv[p] = rows_from_to(p, rank);
      sent.push_back(rows_for(rank, p));
      expected_rows.push_back(rows_for(p, rank));
    }
    const at::Tensor x = at::cat(sent).requires_grad_();
    CollectiveCounter counter;
    const std::vector<int64_t> recv = exchange_split_sizes(x, send, mesh, "ep");
    EXPECT_EQ(recv, expected_recv);
    EXPECT_EQ(counter.count("all_to_all"), 1);
    const at::Tensor y = all_to_all_v(x, mesh, "ep", send, recv);
    EXPECT_TRUE(at::equal(y, at::cat(expected_rows))) << y;
    y.backward(y.detach() + 1000.0 * rank);
    EXPECT_EQ(counter.count("all_to_all_v"), 2);
    EXPECT_EQ(counter.total(), 3);
    // Rank `rank`'s rows for rank p come back with p's 1000 p added.
    std::vector<at::Tensor> expected_grad;
    for (int p = 0; p < kRanks; ++p) expected_grad.push_back(rows_for(rank, p) + 1000.0 * p);
    EXPECT_TRUE(at::equal(x.grad(), at::cat(expected_grad))) << x.grad();
  });
}

// Two counts per rank (an MoE's two experts per rank): rank q sends rank p
// q + p rows for its first expert and 2 q + p for its second.
TEST(SpmdCollectivesTest, ExchangeSplitSizesOfSeveralCountsPerRank) {
  run_ranks(kRanks, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {kRanks}, {"ep"});
    std::vector<int64_t> send, expected;
    for (int p = 0; p < kRanks; ++p) {
      send.insert(send.end(), {rank + p, 2 * rank + p});
      expected.insert(expected.end(), {p + rank, 2 * p + rank});
    }
    const at::Tensor x = filled({3 * rank * kRanks + 2 * (0 + 1 + 2 + 3), 2}, 1.0);
    EXPECT_EQ(exchange_split_sizes(x, send, mesh, "ep"), expected);
  });
}

TEST(SpmdCollectivesTest, AllToAllVBadArgumentsAreErrors) {
  run_ranks(kRanks, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {kRanks}, {"ep"});
    const at::Tensor x = filled({4, 2}, 1.0);
    DTENSOR_EXPECT_ERROR((all_to_all_v(x, mesh, "ep", {1, 1, 2}, {1, 1, 1, 1})),
                         "all_to_all_v: send_splits: expected 1 count(s) per rank of the mesh "
                         "dim (4 in all), found 3");
    DTENSOR_EXPECT_ERROR((all_to_all_v(x, mesh, "ep", {1, 1, 1, 2}, {1, 1, 1, 1})),
                         "all_to_all_v: send_splits: expected counts summing to x.size(0) (4), "
                         "found 5");
    DTENSOR_EXPECT_ERROR((all_to_all_v(x, mesh, "ep", {1, 1, 1, 1}, {2, -1, 1, 1})),
                         "all_to_all_v: recv_splits: expected counts >= 0, found -1");
    DTENSOR_EXPECT_ERROR((all_to_all_v(filled({}, 1.0), mesh, "ep", {1, 0, 0, 0}, {1, 0, 0, 0})),
                         "all_to_all_v: expected a tensor with at least one dim (rows), found a "
                         "0-dim tensor");
    DTENSOR_EXPECT_ERROR((exchange_split_sizes(x, {4, 0, 0, 0, 0}, mesh, "ep")),
                         "exchange_split_sizes: send_splits: expected 1 count(s) per rank of the "
                         "mesh dim (4 in all), found 5");
    DTENSOR_EXPECT_ERROR(all_to_all(x, mesh, "ep", 1, 0),
                         "all_to_all: split_dim: expected a size divisible by the 4 ranks of "
                         "\"ep\", found 2 (shape [4, 2])");
    DTENSOR_EXPECT_ERROR(all_to_all(x, mesh, "ep", 0, 2),
                         "all_to_all: concat_dim: expected a dim in [-2, 2) of a tensor of "
                         "shape [4, 2], found 2");
  });
}

// A rank whose rows differ in dtype or shape from the others' makes
// exchange_split_sizes fail on every rank, before any row moves.
TEST(SpmdCollectivesTest, ExchangeSplitSizesChecksEveryRanksRows) {
  run_ranks(kRanks, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {kRanks}, {"ep"});
    const std::vector<int64_t> send = {1, 1, 1, 1};
    const at::Tensor x = rank == 2 ? at::ones({4, 2}, at::kFloat) : filled({4, 2}, 1.0);
    DTENSOR_EXPECT_ERROR(
        exchange_split_sizes(x, send, mesh, "ep"),
        rank == 2
            ? "exchange_split_sizes: expected every rank's x of dtype Float (this rank's), found "
              "Double on rank 0 of \"ep\""
            : "exchange_split_sizes: expected every rank's x of dtype Double (this rank's), found "
              "Float on rank 2 of \"ep\"");
    const at::Tensor wide = rank == 1 ? filled({4, 3}, 1.0) : filled({4, 2}, 1.0);
    DTENSOR_EXPECT_ERROR(exchange_split_sizes(wide, send, mesh, "ep"),
                         rank == 1
                             ? "exchange_split_sizes: expected every rank's x with rows of shape "
                               "[3] (this rank's), found other rows on rank 0 of \"ep\""
                             : "exchange_split_sizes: expected every rank's x with rows of shape "
                               "[2] (this rank's), found other rows on rank 1 of \"ep\"");
  });
}

TEST(SpmdCollectivesTest, BadArgumentsAreErrors) {
  run_ranks(kRanks, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {kRanks}, {"tp"});
    const at::Tensor x = filled({4, 2}, 1.0);
    DTENSOR_EXPECT_ERROR(all_gather(x, mesh, "tp", 2, ReplicatedType::kReplicate),
                         "all_gather: gather_dim: expected a dim in [-2, 2) of a tensor of shape "
                         "[4, 2], found 2");
    DTENSOR_EXPECT_ERROR(reduce_scatter(x, mesh, "tp", -3),
                         "reduce_scatter: scatter_dim: expected a dim in [-2, 2)");
    DTENSOR_EXPECT_ERROR(all_reduce(x, mesh, "dp", ReplicatedType::kReplicate),
                         "DeviceMesh: expected a dim name in [tp], found \"dp\"");
  });
}

}  // namespace
}  // namespace dtensor::spmd
