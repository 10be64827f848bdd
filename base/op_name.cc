// Copyright 2026 The dtensor Authors.
#include <dtensor/base/op_name.h>

#include <ATen/core/dispatch/Dispatcher.h>

#include <dtensor/base/check.h>

namespace dtensor {

std::string op_name_string(const c10::OperatorName& name) {
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

c10::OperatorName parse_op_name(std::string_view text, std::string_view what) {
  const size_t colons = text.find("::");
  const size_t dot = text.find('.', colons == std::string_view::npos ? 0 : colons);
  const bool well_formed = colons != std::string_view::npos && colons > 0 &&
                           colons + 2 < text.size() && text.find("::", colons + 2) == text.npos &&
                           dot != colons + 2 && (dot == text.npos || dot + 1 < text.size());
  DTENSOR_CHECK(well_formed, what,
                ": expected an operator name like \"aten::add.Tensor\", found \"", text, "\"");
  return c10::OperatorName(std::string(text.substr(0, dot)),
                           dot == text.npos ? "" : std::string(text.substr(dot + 1)));
}

bool operator_exists(std::string_view text) {
  return c10::Dispatcher::singleton().findOp(parse_op_name(text)).has_value();
}

}  // namespace dtensor
