// Copyright 2026 The dtensor Authors.
#include <dtensor/dispatch/dispatch.h>

#include <torch/library.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <dtensor/base/check.h>
#include <dtensor/base/op_name.h>
#include <dtensor/core/tensor_impl.h>
#include <dtensor/dispatch/op_runner.h>
#include <dtensor/redistribute/trace_sink.h>
#include <dtensor/rules/tensor_arguments.h>
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_join.h"

namespace dtensor {
namespace {

constexpr uint64_t kStrictBit = 1;
constexpr uint64_t kFallbackBit = 2;
constexpr uint64_t kImplicitReplicationBit = 4;

thread_local uint64_t tls_mode_bits = 0;

// "S(0); R; plain" for the tensors among the top `count` values of `stack`.
std::string describe_tensors(const torch::jit::Stack& stack, size_t count) {
  std::vector<std::string> parts;
  for_each_tensor_argument(
      c10::ArrayRef<c10::IValue>(stack).slice(stack.size() - count),
      [&](const at::Tensor& t, size_t, int64_t) {
        const DTensorSpecPtr* spec = dtensor_spec_or_null(t);
        parts.push_back(spec != nullptr ? placements_to_string((*spec)->placements()) : "plain");
      });
  return absl::StrJoin(parts, "; ");
}

// run_on_dtensors, reported to `sink` as an op event.
void run_traced(const c10::OperatorHandle& op, torch::jit::Stack& stack, const DispatchModes& modes,
                uint64_t bits, TraceSink& sink) {
  OpEvent event{op_name_string(op.operator_name()),
                describe_tensors(stack, op.schema().arguments().size()),
                "",
                {trace_clock_ns(), 0}};
  run_on_dtensors(op, stack, modes, bits);
  event.outputs = describe_tensors(stack, op.schema().returns().size());
  event.span.end_ns = trace_clock_ns();
  sink.on_op(std::move(event));
}

void dtensor_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  const uint64_t bits = tls_mode_bits;
  DispatchModes modes;
  modes.propagation.strict = (bits & kStrictBit) != 0;
  modes.propagation.replicate_fallback = (bits & kFallbackBit) != 0;
  modes.implicit_replication = (bits & kImplicitReplicationBit) != 0;
  if (TraceSink* sink = trace_sink()) {
    run_traced(op, *stack, modes, bits, *sink);
  } else {
    run_on_dtensors(op, *stack, modes, bits);
  }
}

// One Library per (namespace, key): torch::Library refuses a second IMPL
// block of the same namespace and key in one place, so they live for the
// process.
torch::Library& library_for(const std::string& ns, c10::DispatchKey key) {
  static std::mutex mutex;
  static auto* libraries = new absl::flat_hash_map<std::pair<std::string, c10::DispatchKey>,
                                                   std::unique_ptr<torch::Library>>();
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = (*libraries)[{ns, key}];
  if (!slot) {
    slot = std::make_unique<torch::Library>(torch::Library::IMPL, ns, key, __FILE__, __LINE__);
  }
  return *slot;
}

void register_kernel(const c10::OperatorName& name, c10::DispatchKey key,
                     torch::CppFunction kernel) {
  const std::string full = op_name_string(name);
  const auto colon = full.find("::");
  library_for(full.substr(0, colon), key).impl(full.substr(colon + 2).c_str(), std::move(kernel));
}

// Composite ops decompose before they reach the DTensor key, and keep their
// autograd formulas that way; registering them would hide both.
bool decomposes(const c10::OperatorHandle& op) {
  return op.hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd);
}

const bool aten_kernels_registered = [] {
  register_kernel_for_every_aten_op(kDTensorDispatchKey,
                                    torch::CppFunction::makeFromBoxedFunction<&dtensor_kernel>);
  return true;
}();

TORCH_LIBRARY_IMPL(_, PrivateUse3, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&dtensor_kernel>());
}

}  // namespace

static_assert(kDTensorDispatchKey == c10::DispatchKey::PrivateUse3,
              "the fallback above names the DTensor key");

ScopedDispatchMode::ScopedDispatchMode(uint64_t bit) : previous_(tls_mode_bits) {
  tls_mode_bits |= bit;
}
ScopedDispatchMode::~ScopedDispatchMode() { tls_mode_bits = previous_; }
ScopedStrictMode::ScopedStrictMode() : ScopedDispatchMode(kStrictBit) {}
ScopedReplicateFallback::ScopedReplicateFallback() : ScopedDispatchMode(kFallbackBit) {}
ScopedImplicitReplication::ScopedImplicitReplication()
    : ScopedDispatchMode(kImplicitReplicationBit) {}

uint64_t dispatch_mode_bits() { return tls_mode_bits; }

void register_kernel_for_every_aten_op(c10::DispatchKey key,
                                       const std::function<torch::CppFunction()>& make_kernel) {
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto op = dispatcher.findOp(name);
    if (op && !decomposes(*op)) register_kernel(name, key, make_kernel());
  }
}

void register_dtensor_kernel(std::string_view op_name) {
  const c10::OperatorName name = parse_op_name(op_name, "register_dtensor_kernel");
  auto op = c10::Dispatcher::singleton().findOp(name);
  DTENSOR_CHECK(op.has_value(),
                "register_dtensor_kernel: expected a registered operator, found "
                "no \"",
                op_name, "\"");
  DTENSOR_CHECK(!op->hasKernelForDispatchKey(kDTensorDispatchKey), "register_dtensor_kernel: \"",
                op_name, "\" already reaches the DTensor kernel");
  register_kernel(name, kDTensorDispatchKey,
                  torch::CppFunction::makeFromBoxedFunction<&dtensor_kernel>());
}

}  // namespace dtensor
