// Copyright 2026 The dtensor Authors.
#include <dtensor/rules/op_call.h>

#include <dtensor/base/check.h>
#include <dtensor/base/op_name.h>
#include "absl/strings/str_cat.h"

namespace dtensor {

OpCall::OpCall(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> arguments,
               std::vector<TensorInput> inputs, DeviceMesh mesh)
    : op_(op), arguments_(arguments), inputs_(std::move(inputs)), mesh_(std::move(mesh)) {}

std::string OpCall::op_name() const { return op_name_string(op_.operator_name()); }

const c10::IValue& OpCall::argument(const std::string& name) const {
  const auto index = schema().argumentIndexWithName(name);
  DTENSOR_CHECK(index.has_value(), op_name(), ": expected an argument named '", name,
                "', found none in ", schema());
  return arguments_[*index];
}

const TensorInput* OpCall::input_of_argument(size_t argument) const {
  for (const TensorInput& input : inputs_) {
    if (input.argument == argument) return &input;
  }
  return nullptr;
}

std::string OpCall::describe_inputs() const {
  std::string out;
  for (const TensorInput& input : inputs_) {
    absl::StrAppend(&out, out.empty() ? "" : "; ", input.is_dtensor ? "" : "plain ", "[",
                    placements_to_string(input.spec->placements()), "] shape [");
    for (size_t d = 0; d < input.spec->shape().size(); ++d) {
      absl::StrAppend(&out, d ? ", " : "", input.spec->shape()[d]);
    }
    absl::StrAppend(&out, "]");
  }
  return out;
}

int64_t argument_written_by_return(const c10::FunctionSchema& schema, size_t j) {
  const c10::AliasInfo* alias = schema.returns()[j].alias_info();
  if (alias == nullptr || !alias->isWrite()) return -1;
  const std::vector<c10::Argument>& arguments = schema.arguments();
  for (size_t a = 0; a < arguments.size(); ++a) {
    const c10::AliasInfo* written = arguments[a].alias_info();
    if (written != nullptr && written->isWrite() && written->beforeSets() == alias->beforeSets()) {
      return static_cast<int64_t>(a);
    }
  }
  return -1;
}

}  // namespace dtensor
