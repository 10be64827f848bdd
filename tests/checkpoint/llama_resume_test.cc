// Copyright 2026 The dtensor Authors.
//
// Resuming training from a checkpoint on another mesh and layout: the Llama
// example (float64) trains 2 steps with AdamW under tensor parallelism on
// mesh (4), saves model and optimizer, and resumes for 2 more steps on
// (dp 2, tp 2) (tensor parallelism, every parameter and its AdamW state
// fully sharded over dp: StridedShard where tp splits rows) and on one
// device. Every loss and the final parameters equal a run of 4 steps on one
// device that never stopped, within 1e-9.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/optim/adamw.h>

#include <unistd.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <dtensor/checkpoint/checkpoint.h>
#include <dtensor/checkpoint/files.h>
#include <dtensor/dtensor.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/nn/reduce_gradients.h>
#include <dtensor/placements/placements.h>
#include "examples/llama/llama_parallel.h"

namespace dtensor::examples {
namespace {

constexpr int kSteps = 4;
constexpr int kSavedAfter = 2;
constexpr double kLearningRate = 0.01;
constexpr uint64_t kSeed = 1234;

struct Data {
  at::Tensor tokens;
  at::Tensor targets;
};

Data batch(const LlamaConfig& config) {
  at::Generator generator = at::detail::createCPUGenerator(kSeed);
  const at::Tensor tokens = at::randint(config.vocab, {4, 8}, generator, at::kLong);
  return {tokens, tokens.roll(-1, 1)};
}

// A model and its AdamW, on `mesh` (laid out by `plan`) or on one device.
struct Trainer {
  Trainer(uint64_t seed, const std::optional<DeviceMesh>& mesh)
      : model(seeded_llama(LlamaConfig{}, seed)), mesh(mesh) {
    if (mesh) parallelize_llama(model, *mesh, LlamaPlan::kTensorParallel);
    // Built after parallelize_llama: its parameters are the laid-out ones.
    optimizer.emplace(model->parameters(), torch::optim::AdamWOptions(kLearningRate));
  }

  // One step on the whole batch; its loss.
  double step(const Data& data) {
    const at::Tensor tokens = mesh ? llama_batch(data.tokens, *mesh) : data.tokens;
    const at::Tensor targets = mesh ? llama_batch(data.targets, *mesh) : data.targets;
    const at::Tensor loss = model->loss(tokens, targets);
    loss.backward();
    if (mesh) nn::reduce_gradients(model->parameters());
    optimizer->step();
    for (at::Tensor& parameter : model->parameters()) parameter.mutable_grad() = at::Tensor();
    return mesh ? llama_loss_value(loss, *mesh) : loss.item<double>();
  }

  void save(const std::string& path) const {
    std::map<std::string, at::Tensor> state = checkpoint::state_dict(*model);
    state.merge(checkpoint::state_dict(*optimizer, *model));
    checkpoint::save(state, path);
  }

  void load(const std::string& path) {
    checkpoint::load_state_dict(*model, path);
    checkpoint::load_state_dict(*optimizer, *model, path);
  }

  // Every parameter's global value by name.
  std::map<std::string, at::Tensor> parameters() const {
    std::map<std::string, at::Tensor> values;
    for (const auto& item : model->named_parameters()) {
      values[item.key()] =
          is_dtensor(item.value()) ? DTensor(item.value()).full_tensor() : item.value().detach();
    }
    return values;
  }

  Llama model;
  std::optional<DeviceMesh> mesh;
  std::optional<torch::optim::AdamW> optimizer;
};

void expect_parameters_near(const std::map<std::string, at::Tensor>& actual,
                            const std::map<std::string, at::Tensor>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (const auto& [name, value] : actual) {
    EXPECT_LE((value - expected.at(name)).abs().max().item<double>(), 1e-9) << name;
  }
}

TEST(LlamaResumeTest, ResumesOnAnotherMeshAsIfNeverStopped) {
  const Data data = batch(LlamaConfig{});
  Trainer uninterrupted(kSeed, std::nullopt);
  std::vector<double> losses;
  for (int step = 0; step < kSteps; ++step) losses.push_back(uninterrupted.step(data));
  ASSERT_LT(losses.back(), losses.front());  // it trains
  const std::map<std::string, at::Tensor> expected = uninterrupted.parameters();

  const std::string dir = "/tmp/dtensor-llama-resume-" + std::to_string(::getpid());
  const std::string path = checkpoint::join_path(dir, "step-2");
  run_ranks(4, [&](int) {
    Trainer trainer(kSeed, init_device_mesh("local", {4}, {"tp"}));
    for (int step = 0; step < kSavedAfter; ++step)
      EXPECT_NEAR(trainer.step(data), losses[step], 1e-9);
    trainer.save(path);
  });

  // Another initialization: only the checkpoint carries the trained state.
  run_ranks(4, [&](int) {
    Trainer trainer(kSeed + 1, init_device_mesh("local", {2, 2}, {"dp", "tp"}));
    trainer.load(path);
    const DTensor wq(trainer.model->named_parameters()["layers.0.attention.wq.weight"]);
    EXPECT_EQ(placements_to_string(wq.placements()), "SS(0,2),S(0)");
    const DTensor exp_avg(checkpoint::state_dict(*trainer.optimizer, *trainer.model)
                              .at("optim.layers.0.attention.wq.weight.exp_avg"));
    EXPECT_TRUE(same_placements(exp_avg.placements(), wq.placements()));
    for (int step = kSavedAfter; step < kSteps; ++step)
      EXPECT_NEAR(trainer.step(data), losses[step], 1e-9) << "step " << step;
    expect_parameters_near(trainer.parameters(), expected);
  });

  Trainer one_device(kSeed + 1, std::nullopt);
  one_device.load(path);
  for (int step = kSavedAfter; step < kSteps; ++step)
    EXPECT_NEAR(one_device.step(data), losses[step], 1e-9) << "step " << step;
  expect_parameters_near(one_device.parameters(), expected);
  checkpoint::remove_tree(dir);
}

}  // namespace
}  // namespace dtensor::examples
