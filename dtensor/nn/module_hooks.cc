// Copyright 2026 The dtensor Authors.
#include <dtensor/nn/module_hooks.h>

#include <atomic>
#include <iterator>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include <dtensor/base/check.h>
#include <dtensor/nn/module_parameters.h>

namespace dtensor::nn {
namespace {

struct Hooks {
  // Tells a live entry from one whose module died and whose address was
  // reused.
  std::weak_ptr<const torch::nn::Module> owner;
  std::vector<ForwardPreHook> pre;
  std::vector<ForwardHook> post;
};

// Every module's hooks, by address. A process-wide table because modules
// have no slot of their own for them; `any` keeps `call` at one load for
// models with no hooks at all. Entries are immutable snapshots, replaced on
// update, so a lookup hands one out without copying the hooks, and hooks
// run without the lock (a hook may call other modules).
class HookTable {
 public:
  static HookTable& instance() {
    static auto* table = new HookTable;
    return *table;
  }

  template <typename Add>
  void update(const char* caller, torch::nn::Module& module, Add add) {
    std::shared_ptr<const torch::nn::Module> owner = owned(caller, module);
    std::unique_lock lock(mutex_);
    forget_dead_modules();
    std::shared_ptr<const Hooks>& entry = table_[&module];
    auto hooks = std::make_shared<Hooks>();
    if (entry && entry->owner.lock() == owner) *hooks = *entry;
    hooks->owner = owner;
    add(*hooks);
    entry = std::move(hooks);
    any_.store(true, std::memory_order_release);
  }

  void remove(const torch::nn::Module& module) {
    std::unique_lock lock(mutex_);
    table_.erase(&module);
  }

  // The module's hooks, or null when it has none.
  std::shared_ptr<const Hooks> find(const torch::nn::Module& module) const {
    if (!any_.load(std::memory_order_acquire)) return nullptr;
    std::shared_lock lock(mutex_);
    const auto found = table_.find(&module);
    if (found == table_.end() || found->second->owner.expired()) return nullptr;
    return found->second;
  }

 private:
  // Entries of modules that died: their weak_ptrs would keep the memory of
  // modules made by make_shared (as module holders are) allocated.
  void forget_dead_modules() {
    for (auto it = table_.begin(); it != table_.end();) {
      it = it->second->owner.expired() ? table_.erase(it) : std::next(it);
    }
  }

  static std::shared_ptr<const torch::nn::Module> owned(const char* caller,
                                                        torch::nn::Module& module) {
    try {
      return module.shared_from_this();
    } catch (const std::bad_weak_ptr&) {
      DTENSOR_CHECK(false, caller, ": module ", module_type_name(module),
                    ": expected a module owned by a std::shared_ptr (a module holder or a "
                    "registered submodule), found one on the stack or owned otherwise");
    }
    return nullptr;
  }

  mutable std::shared_mutex mutex_;
  std::unordered_map<const torch::nn::Module*, std::shared_ptr<const Hooks>> table_;
  std::atomic<bool> any_{false};
};

}  // namespace

void register_forward_pre_hook(torch::nn::Module& module, ForwardPreHook hook) {
  DTENSOR_CHECK(hook != nullptr, "register_forward_pre_hook: expected a hook, found null");
  HookTable::instance().update("register_forward_pre_hook", module,
                               [&](Hooks& hooks) { hooks.pre.push_back(std::move(hook)); });
}

void register_forward_hook(torch::nn::Module& module, ForwardHook hook) {
  DTENSOR_CHECK(hook != nullptr, "register_forward_hook: expected a hook, found null");
  HookTable::instance().update("register_forward_hook", module,
                               [&](Hooks& hooks) { hooks.post.push_back(std::move(hook)); });
}

void remove_forward_hooks(const torch::nn::Module& module) { HookTable::instance().remove(module); }

bool has_forward_hooks(const torch::nn::Module& module) {
  const std::shared_ptr<const Hooks> hooks = HookTable::instance().find(module);
  return hooks != nullptr && (!hooks->pre.empty() || !hooks->post.empty());
}

at::Tensor run_forward_pre_hooks(const torch::nn::Module& module, at::Tensor input) {
  const std::shared_ptr<const Hooks> hooks = HookTable::instance().find(module);
  if (hooks == nullptr) return input;
  for (const ForwardPreHook& hook : hooks->pre) input = hook(input);
  return input;
}

at::Tensor run_forward_hooks(const torch::nn::Module& module, at::Tensor output) {
  const std::shared_ptr<const Hooks> hooks = HookTable::instance().find(module);
  if (hooks == nullptr) return output;
  for (const ForwardHook& hook : hooks->post) output = hook(output);
  return output;
}

namespace {
thread_local std::vector<const torch::nn::Module*> modules_in_call;
}  // namespace

const std::vector<const torch::nn::Module*>& modules_being_called() { return modules_in_call; }

namespace nn_internal {
ScopedModuleCall::ScopedModuleCall(const torch::nn::Module& module) {
  modules_in_call.push_back(&module);
}
ScopedModuleCall::~ScopedModuleCall() { modules_in_call.pop_back(); }
}  // namespace nn_internal

}  // namespace dtensor::nn
