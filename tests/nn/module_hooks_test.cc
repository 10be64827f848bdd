// Copyright 2026 The dtensor Authors.
//
// dtensor::nn::call and the forward hooks it runs (dtensor/nn/module_hooks.h):
// without hooks call is exactly forward(); pre-hooks map the first argument
// and hooks the output, each in registration order; hooks belong to one
// module instance; removing them restores forward(); a module not owned by a
// std::shared_ptr is refused. parallelize_module's use of the hooks is pinned
// in parallel_styles_test.cc.
#include <dtensor/nn/module_hooks.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/expect_error.h"

namespace dtensor::nn {
namespace {

at::Tensor input_of(int64_t rows, int64_t columns) {
  return at::arange(rows * columns, at::kDouble).mul(0.37).sin().reshape({rows, columns});
}

// Multiplies its input by 10 and remembers what forward() received, so a
// test sees where the pre-hooks end and the hooks begin.
struct ScaleImpl : torch::nn::Module {
  at::Tensor forward(const at::Tensor& x) {
    received = x;
    return x * 10;
  }
  at::Tensor received;
};
TORCH_MODULE(Scale);

// A forward() of two arguments: call passes the rest through untouched.
struct AffineImpl : torch::nn::Module {
  at::Tensor forward(const at::Tensor& x, const at::Tensor& shift, double factor) {
    return x * factor + shift;
  }
};
TORCH_MODULE(Affine);

TEST(ModuleHooksTest, CallWithoutHooksIsForward) {
  torch::nn::Linear linear(4, 3);
  linear->to(at::kDouble);
  const at::Tensor x = input_of(5, 4);
  EXPECT_FALSE(has_forward_hooks(*linear));
  EXPECT_TRUE(at::equal(call(linear, x), linear->forward(x)));
  // Through a std::shared_ptr to the module as well as through its holder.
  const std::shared_ptr<torch::nn::LinearImpl> shared = linear.ptr();
  EXPECT_TRUE(at::equal(call(shared, x), linear->forward(x)));
  // The run_* functions leave a tensor alone when there is nothing to run.
  EXPECT_TRUE(run_forward_pre_hooks(*linear, x).is_same(x));
  EXPECT_TRUE(run_forward_hooks(*linear, x).is_same(x));
}

// x -> 2x then +1 gives 2x + 1 (the reverse order would give 2x + 2); the
// output hooks then +3 and *5: (10 (2x + 1) + 3) * 5.
TEST(ModuleHooksTest, HooksRunInRegistrationOrderAroundForward) {
  Scale scale;
  std::vector<std::string> order;
  register_forward_pre_hook(*scale, [&](const at::Tensor& x) {
    order.push_back("pre 1");
    return x * 2;
  });
  register_forward_pre_hook(*scale, [&](const at::Tensor& x) {
    order.push_back("pre 2");
    return x + 1;
  });
  register_forward_hook(*scale, [&](const at::Tensor& y) {
    order.push_back("post 1");
    return y + 3;
  });
  register_forward_hook(*scale, [&](const at::Tensor& y) {
    order.push_back("post 2");
    return y * 5;
  });
  EXPECT_TRUE(has_forward_hooks(*scale));
  const at::Tensor x = input_of(3, 2);
  const at::Tensor y = call(scale, x);
  EXPECT_EQ(order, (std::vector<std::string>{"pre 1", "pre 2", "post 1", "post 2"}));
  EXPECT_TRUE(at::equal(scale->received, x * 2 + 1));
  EXPECT_TRUE(at::equal(y, ((x * 2 + 1) * 10 + 3) * 5));
  // forward() itself runs no hooks: only call does.
  EXPECT_TRUE(at::equal(scale->forward(x), x * 10));
  // The run_* functions are the halves of call.
  EXPECT_TRUE(at::equal(run_forward_pre_hooks(*scale, x), x * 2 + 1));
  EXPECT_TRUE(at::equal(run_forward_hooks(*scale, x), (x + 3) * 5));
}

// A pre-hook maps the first argument only; the others reach forward() as
// they were given.
TEST(ModuleHooksTest, PreHooksMapTheFirstArgumentOnly) {
  Affine affine;
  register_forward_pre_hook(*affine, [](const at::Tensor& x) { return -x; });
  register_forward_hook(*affine, [](const at::Tensor& y) { return y.pow(2); });
  const at::Tensor x = input_of(3, 4), shift = input_of(1, 4).add(2);
  EXPECT_TRUE(at::equal(call(affine, x, shift, 3.0), (-x * 3.0 + shift).pow(2)));
}

// Hooks belong to the instance: another module of the same type, and a
// module of the same tree, run none.
TEST(ModuleHooksTest, HooksOfOneInstanceDoNotReachAnother) {
  torch::nn::Sequential tree{Scale(), Scale()};
  const auto first = tree->ptr<ScaleImpl>(0), second = tree->ptr<ScaleImpl>(1);
  register_forward_hook(*first, [](const at::Tensor& y) { return y + 1; });
  Scale standalone;
  const at::Tensor x = input_of(2, 3);
  EXPECT_TRUE(has_forward_hooks(*first));
  EXPECT_FALSE(has_forward_hooks(*second));
  EXPECT_FALSE(has_forward_hooks(*standalone));
  EXPECT_FALSE(has_forward_hooks(*tree));
  EXPECT_TRUE(at::equal(call(first, x), x * 10 + 1));
  EXPECT_TRUE(at::equal(call(second, x), x * 10));
  EXPECT_TRUE(at::equal(call(standalone, x), x * 10));
}

// Each rank thread of the local backend registers on its own model at once;
// every one sees its own hooks only.
TEST(ModuleHooksTest, ConcurrentRegistrationOnSeparateInstances) {
  constexpr int kThreads = 8;
  std::vector<Scale> modules(kThreads);
  std::vector<at::Tensor> results(kThreads);
  std::vector<std::thread> threads;
  const at::Tensor x = input_of(2, 2);
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k <= i; ++k) {
        register_forward_hook(*modules[i], [](const at::Tensor& y) { return y + 1; });
      }
      results[i] = call(modules[i], x);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_TRUE(at::equal(results[i], x * 10 + (i + 1))) << i;
  }
}

TEST(ModuleHooksTest, RemoveForwardHooksRestoresForward) {
  Scale scale;
  register_forward_pre_hook(*scale, [](const at::Tensor& x) { return x + 100; });
  register_forward_hook(*scale, [](const at::Tensor& y) { return y * 0; });
  remove_forward_hooks(*scale);
  EXPECT_FALSE(has_forward_hooks(*scale));
  const at::Tensor x = input_of(2, 3);
  EXPECT_TRUE(at::equal(call(scale, x), x * 10));
  // Registering again starts from none: the removed hooks do not come back.
  register_forward_hook(*scale, [](const at::Tensor& y) { return y - 1; });
  EXPECT_TRUE(at::equal(call(scale, x), x * 10 - 1));
  // Removing from a module that never had hooks is a no-op.
  Scale fresh;
  remove_forward_hooks(*fresh);
  EXPECT_FALSE(has_forward_hooks(*fresh));
}

// A hook may itself call modules with hooks (the table is not locked while
// hooks run), and gradients flow through what hooks compute.
TEST(ModuleHooksTest, HooksMayCallOtherModulesAndAreDifferentiable) {
  Scale inner, outer;
  register_forward_hook(*inner, [](const at::Tensor& y) { return y + 1; });
  register_forward_pre_hook(*outer, [&](const at::Tensor& x) { return call(inner, x); });
  const at::Tensor x = input_of(2, 3).requires_grad_();
  const at::Tensor y = call(outer, x);
  EXPECT_TRUE(at::equal(y, (x * 10 + 1) * 10));
  y.sum().backward();
  EXPECT_TRUE(at::equal(x.grad(), at::full({2, 3}, 100.0, at::kDouble)));
}

// The table is keyed by address: a module created where a dead one with
// hooks lived must not inherit them. (Modules made by std::make_shared, as
// holders are, share one block with the control block, which the table's
// weak reference keeps allocated; a module allocated on its own frees its
// memory at once, so the address can come back.)
TEST(ModuleHooksTest, ANewModuleAtADeadModulesAddressHasNoHooks) {
  const torch::nn::Module* dead_address = nullptr;
  {
    std::shared_ptr<ScaleImpl> dead(new ScaleImpl);
    register_forward_hook(*dead, [](const at::Tensor& y) { return y * 0; });
    dead_address = dead.get();
  }
  // Keep the candidates alive so that each try gets a new address.
  std::vector<std::shared_ptr<ScaleImpl>> candidates;
  for (int i = 0; i < 64; ++i) {
    candidates.emplace_back(new ScaleImpl);
    if (candidates.back().get() == dead_address) break;
  }
  if (candidates.back().get() != dead_address) {
    GTEST_SKIP() << "the allocator did not reuse the dead module's address";
  }
  EXPECT_FALSE(has_forward_hooks(*candidates.back()));
  const at::Tensor x = input_of(2, 2);
  EXPECT_TRUE(at::equal(call(candidates.back(), x), x * 10));
  // Hooks registered on the new module are its own, not added to the dead
  // module's.
  register_forward_hook(*candidates.back(), [](const at::Tensor& y) { return y + 1; });
  EXPECT_TRUE(at::equal(call(candidates.back(), x), x * 10 + 1));
}

TEST(ModuleHooksErrorTest, ModuleNotOwnedByASharedPtrIsRefused) {
  ScaleImpl on_stack;
  DTENSOR_EXPECT_ERROR(
      register_forward_hook(on_stack, [](const at::Tensor& y) { return y; }),
      "register_forward_hook: module dtensor::nn::(anonymous namespace)::Scale: expected a module "
      "owned by a std::shared_ptr (a module holder or a registered submodule), found one on the "
      "stack or owned otherwise");
  DTENSOR_EXPECT_ERROR(
      register_forward_pre_hook(on_stack, [](const at::Tensor& x) { return x; }),
      "expected a module owned by a std::shared_ptr (a module holder or a registered submodule)");
  EXPECT_FALSE(has_forward_hooks(on_stack));
}

TEST(ModuleHooksErrorTest, NullHookIsRefused) {
  Scale scale;
  DTENSOR_EXPECT_ERROR(register_forward_pre_hook(*scale, nullptr),
                       "register_forward_pre_hook: expected a hook, found null");
  DTENSOR_EXPECT_ERROR(register_forward_hook(*scale, nullptr),
                       "register_forward_hook: expected a hook, found null");
  EXPECT_FALSE(has_forward_hooks(*scale));
}

}  // namespace
}  // namespace dtensor::nn
