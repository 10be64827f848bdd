// Copyright 2026 The dtensor Authors.
#include <dtensor/base/op_name.h>

#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <cctype>

#include <dtensor/base/check.h>

namespace dtensor {

std::string op_name_string(const c10::OperatorName& name) {
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

namespace {

// Letters, digits and underscores, not empty.
bool is_identifier(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

}  // namespace

c10::OperatorName parse_op_name(std::string_view text, std::string_view what) {
  const size_t colons = text.find("::");
  const size_t dot = colons == text.npos ? text.npos : text.find('.', colons + 2);
  const std::string_view ns = text.substr(0, colons);
  const std::string_view name =
      colons == text.npos ? std::string_view() : text.substr(colons + 2, dot - colons - 2);
  const std::string_view overload = dot == text.npos ? std::string_view("_") : text.substr(dot + 1);
  DTENSOR_CHECK(is_identifier(ns) && is_identifier(name) && is_identifier(overload), what,
                ": expected an operator name like \"aten::add.Tensor\", found \"", text, "\"");
  return c10::OperatorName(std::string(text.substr(0, dot)),
                           dot == text.npos ? "" : std::string(text.substr(dot + 1)));
}

bool operator_exists(std::string_view text) {
  return c10::Dispatcher::singleton().findOp(parse_op_name(text)).has_value();
}

}  // namespace dtensor
