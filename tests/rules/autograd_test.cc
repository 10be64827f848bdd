// Copyright 2026 The dtensor Authors.
//
// Autograd through DTensors: tensor-parallel MLP training equals one-device
// training (examples/tp_mlp), and the layout calls carry gradients.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <dtensor/base/compat.h>
#include <dtensor/dtensor.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include "examples/tp_mlp/tp_mlp.h"
#include "tests/support/expect_error.h"
#include "tests/support/tp_mlp_expectations.h"

namespace dtensor {
namespace {

void expect_matches_one_device(bool sequence_parallel) {
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    examples::TpMlpOptions options;
    options.sequence_parallel = sequence_parallel;
    options.batch = 7;  // uneven over 4 ranks in the sequence-parallel variant
    testing::expect_trains_like_one_device(examples::train_tp_mlp(mesh, options), 4);
  });
}

TEST(AutogradTest, TensorParallelMlpMatchesOneDevice) { expect_matches_one_device(false); }

TEST(AutogradTest, SequenceParallelMlpMatchesOneDevice) { expect_matches_one_device(true); }

// cross_entropy = log_softmax + nll_loss. With reduction=mean on a split
// batch the loss must divide by the whole batch's weight (class 2 ignored, so
// it is not the row count): the loss comes out Partial(sum) on the split mesh
// dims and equals the one-device loss, and so do the gradients.
TEST(AutogradTest, CrossEntropyMeanOnASplitBatchMatchesOneDevice) {
  const at::Tensor logits = at::arange(35, at::kFloat).reshape({7, 5}).sin().mul(3);
  const at::Tensor target = at::tensor({0, 4, 2, 2, 1, 3, 0}, at::kLong);
  const at::Tensor weight = at::tensor({1.0f, 2.0f, 0.5f, 1.5f, 3.0f});
  constexpr int64_t kIgnored = 2;
  const at::Tensor reference_logits = logits.clone().requires_grad_();
  const at::Tensor reference =
      at::cross_entropy_loss(reference_logits, target, weight, at::Reduction::Mean, kIgnored, 0.0);
  reference.backward();
  struct Case {
    std::vector<int64_t> mesh;
    const char* placements;
    const char* loss_placements;
  };
  for (const Case& c : {Case{{4}, "S(0)", "P(sum)"}, Case{{2, 2}, "S(0),S(0)", "P(sum),P(sum)"},
                        Case{{2, 2}, "R,S(0)", "R,P(sum)"}}) {
    SCOPED_TRACE(c.placements);
    run_ranks(4, [&](int) {
      const DeviceMesh mesh = init_device_mesh("local", c.mesh);
      const std::vector<PlacementPtr> batch = parse_placements(c.placements);
      const std::vector<PlacementPtr> whole(c.mesh.size(), Replicate::make());
      DTensor x = distribute_tensor(logits.clone().requires_grad_(), mesh, batch);
      const DTensor loss(at::cross_entropy_loss(x, distribute_tensor(target, mesh, batch),
                                                distribute_tensor(weight, mesh, whole).tensor(),
                                                at::Reduction::Mean, kIgnored, 0.0));
      EXPECT_EQ(placements_to_string(loss.placements()), c.loss_placements);
      EXPECT_TRUE(at::allclose(loss.full_tensor(), reference)) << loss.full_tensor();
      loss.tensor().backward();
      const DTensor grad(x.tensor().grad());
      EXPECT_EQ(placements_to_string(grad.placements()), c.placements);
      EXPECT_TRUE(at::allclose(grad.full_tensor(), reference_logits.grad()));
    });
  }
}

// A transformer's input block: embedding with row-wise sharded weight
// (masked Partial), layer_norm (and rms_norm where libtorch has it) over the
// whole hidden dim, a column-sharded projection and softmax/log_softmax over
// the split dim. The loss and every parameter's gradient (through the
// backward ops of each) equal one device.
TEST(AutogradTest, EmbeddingNormsAndSoftmaxMatchOneDevice) {
  const int64_t vocab = 11, hidden = 6, classes = 5;
  const at::Tensor ids = at::tensor({3, 10, 0, 7, 7, 1, 4, 9, 2, 5}, at::kLong).reshape({2, 5});
  auto values = [](std::vector<int64_t> shape, double phase) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return at::arange(n, at::kFloat).add(phase).sin().reshape(shape);
  };
  const std::vector<at::Tensor> init = {values({vocab, hidden}, 0.1), values({hidden}, 0.2).add(1),
                                        values({hidden}, 0.3), values({classes, hidden}, 0.4)};
  auto loss_of = [&](const at::Tensor& tokens, const std::vector<at::Tensor>& p) {
    at::Tensor h = at::layer_norm(at::embedding(p[0], tokens), {hidden}, p[1], p[2]);
#if DTENSOR_TORCH_AT_LEAST(2, 4)
    h = at::rms_norm(h, {hidden}, p[1], 1e-6);
#endif
    const at::Tensor logits = at::linear(h, p[3]);
    return (at::softmax(logits, -1) * 3 + at::log_softmax(logits, -1)).mul(logits).sum();
  };
  std::vector<at::Tensor> reference;
  for (const at::Tensor& t : init) reference.push_back(t.clone().requires_grad_());
  const at::Tensor reference_loss = loss_of(ids, reference);
  reference_loss.backward();
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const std::vector<const char*> layouts = {"S(0)", "R", "R", "S(0)"};
    std::vector<at::Tensor> params;
    for (size_t i = 0; i < init.size(); ++i) {
      params.push_back(
          distribute_tensor(init[i].clone().requires_grad_(), mesh, parse_placements(layouts[i]))
              .tensor());
    }
    const DTensor loss(loss_of(distribute_tensor(ids, mesh, parse_placements("R")), params));
    EXPECT_TRUE(at::allclose(loss.full_tensor(), reference_loss, 1e-5, 1e-5));
    loss.tensor().backward();
    for (size_t i = 0; i < params.size(); ++i) {
      SCOPED_TRACE(i);
      const DTensor grad(params[i].grad());
      EXPECT_TRUE(at::allclose(grad.full_tensor(), reference[i].grad(), 1e-4, 1e-5))
          << grad.full_tensor() << "\nvs\n"
          << reference[i].grad();
    }
  });
}

// A vocabulary-sharded embedding's gradient is computed shard by shard: each
// rank computes and holds only its rows, laid out like the weight (uneven
// rows, a padding id, scale_grad_by_freq); ids split over another mesh dim
// add a pending sum over it, unless scale_grad_by_freq needs every id's
// count over the whole batch.
TEST(AutogradTest, VocabShardedEmbeddingGradientStaysSharded) {
  const int64_t vocab = 11, hidden = 3;
  const at::Tensor ids =
      at::tensor({3, 10, 0, 7, 7, 1, 4, 9, 2, 5, 7, 4}, at::kLong).reshape({4, 3});
  const at::Tensor init = at::arange(vocab * hidden, at::kFloat).sin().reshape({vocab, hidden});
  const at::Tensor scale = at::arange(4 * 3 * hidden, at::kFloat).cos().reshape({4, 3, hidden});
  struct Case {
    std::vector<int64_t> mesh;
    const char* weight;
    const char* ids;
    const char* grad;
    const char* grad_by_frequency;  // counts need the whole batch: ids gathered
  };
  for (const Case& c : {Case{{4}, "S(0)", "R", "S(0)", "S(0)"},
                        Case{{2, 2}, "R,S(0)", "S(0),R", "P(sum),S(0)", "R,S(0)"}}) {
    for (const int64_t padding_idx : {int64_t{-1}, int64_t{4}}) {
      for (const bool by_frequency : {false, true}) {
        SCOPED_TRACE(::testing::Message() << c.weight << " padding " << padding_idx
                                          << " scale_grad_by_freq " << by_frequency);
        const at::Tensor reference = init.clone().requires_grad_();
        (at::embedding(reference, ids, padding_idx, by_frequency) * scale).sum().backward();
        run_ranks(4, [&](int) {
          const DeviceMesh mesh = init_device_mesh("local", c.mesh);
          const DTensor weight =
              distribute_tensor(init.clone().requires_grad_(), mesh, parse_placements(c.weight));
          const at::Tensor dids = distribute_tensor(ids, mesh, parse_placements(c.ids)).tensor();
          const at::Tensor dscale =
              distribute_tensor(scale, mesh, parse_placements(c.ids)).tensor();
          (at::embedding(weight.tensor(), dids, padding_idx, by_frequency) * dscale)
              .sum()
              .backward();
          const DTensor grad(weight.tensor().grad());
          EXPECT_EQ(placements_to_string(grad.placements()),
                    by_frequency ? c.grad_by_frequency : c.grad);
          EXPECT_EQ(grad.to_local().size(0), weight.to_local().size(0));
          EXPECT_TRUE(at::allclose(grad.full_tensor(), reference.grad(), 1e-5, 1e-6))
              << grad.full_tensor() << "\nvs\n"
              << reference.grad();
        });
      }
    }
  }
}

// Two leaves sharing one incoming gradient: autograd copies it for one of
// them through new_empty_strided(grad.sizes()), which keeps its layout.
TEST(AutogradTest, SharedGradientsKeepTheirLayout) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor global = at::arange(32, at::kFloat).reshape({8, 4});
    DTensor a = distribute_tensor(global.clone().requires_grad_(), mesh, parse_placements("S(0)"));
    DTensor b = distribute_tensor(global.clone().requires_grad_(), mesh, parse_placements("S(0)"));
    DTensor w = distribute_tensor(global.cos(), mesh, parse_placements("S(0)"));
    ((a.tensor() + b.tensor()) * w.tensor()).sum().backward();
    for (const DTensor* leaf : {&a, &b}) {
      const DTensor grad(leaf->tensor().grad());
      EXPECT_EQ(placements_to_string(grad.placements()), "S(0)");
      EXPECT_TRUE(at::equal(grad.full_tensor(), global.cos()));
    }
    const at::Tensor fresh = a.tensor().new_empty_strided({8, 4}, {4, 1});
    EXPECT_EQ(placements_to_string(DTensor(fresh).placements()), "S(0)");
    EXPECT_EQ(placements_to_string(DTensor(a.tensor().new_zeros({3})).placements()), "R");
    // A whole tensor keeps the strides asked for; an uninitialized one keeps
    // a Partial (its contents are never read), a filled one does not.
    const at::Tensor whole = distribute_tensor(global, mesh, parse_placements("R")).tensor();
    EXPECT_EQ(whole.new_empty_strided({8, 4}, {1, 8}).strides(), (at::IntArrayRef{1, 8}));
    const at::Tensor partial = from_local(global, mesh, parse_placements("P(sum)")).tensor();
    EXPECT_EQ(placements_to_string(DTensor(partial.new_empty({8, 4})).placements()), "P(sum)");
    EXPECT_EQ(placements_to_string(DTensor(partial.new_zeros({8, 4})).placements()), "R");
  });
}

TEST(AutogradTest, RedistributeBackwardReturnsToSourceLayout) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor global = at::arange(10, at::kFloat).reshape({5, 2});
    DTensor x = distribute_tensor(global.clone().requires_grad_(), mesh, parse_placements("S(0)"));
    DTensor r = x.redistribute(parse_placements("R"));
    at::Tensor local = r.to_local();
    (local * local).sum().backward();  // d/dx sum(x^2) = 2x on every rank's full copy
    DTensor grad(x.tensor().grad());
    EXPECT_EQ(placements_to_string(grad.placements()), "S(0)");
    EXPECT_TRUE(at::equal(grad.full_tensor(), global * 2));
  });
}

TEST(AutogradTest, FromLocalAndToLocalCarryGradients) {
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor local = at::full({2, 3}, rank + 1.0).requires_grad_();
    DTensor d = from_local(local, mesh, parse_placements("S(0)"));
    DTensor doubled(d.tensor() * 2);
    doubled.to_local().sum().backward();
    EXPECT_TRUE(at::equal(local.grad(), at::full({2, 3}, 2.0)));
  });
}

// grad_placements say how each rank's gradient of the local or full tensor
// makes up the whole one: by default it is the DTensor's own layout
// (Replicate: every rank holds the whole gradient); Partial(sum) makes the
// ranks' gradients terms of it.
TEST(AutogradTest, GradPlacementsOfToLocalAndFullTensor) {
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const std::vector<PlacementPtr> replicated = parse_placements("R");
    const std::vector<PlacementPtr> terms = parse_placements("P(sum)");
    auto grad_of = [&](auto&& take) {
      DTensor x = distribute_tensor(at::ones({3}).requires_grad_(), mesh, replicated);
      take(x).mul(rank + 1.0).sum().backward();
      return DTensor(x.tensor().grad()).full_tensor();
    };
    EXPECT_TRUE(at::equal(grad_of([](const DTensor& x) { return x.to_local(); }),
                          at::full({3}, rank + 1.0)));
    EXPECT_TRUE(at::equal(grad_of([&](const DTensor& x) { return x.to_local(terms); }),
                          at::full({3}, 10.0)));  // 1 + 2 + 3 + 4
    EXPECT_TRUE(at::equal(grad_of([&](const DTensor& x) { return x.full_tensor(terms); }),
                          at::full({3}, 10.0)));
    DTensor y = distribute_tensor(at::ones({3}).requires_grad_(), mesh, replicated);
    DTENSOR_EXPECT_ERROR(y.to_local(parse_placements("R,R")),
                         "to_local: grad_placements: expected one per mesh dim (1), found 2");
  });
}

}  // namespace
}  // namespace dtensor
