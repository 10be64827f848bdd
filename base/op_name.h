// Copyright 2026 The dtensor Authors.
//
// base/op_name.h (<dtensor/base/op_name.h>): ATen operator names as text.
//
// Registries, errors and tools name operators as "ns::name.overload"
// ("aten::add.Tensor", "aten::relu" for the default overload).
//
//   c10::OperatorName name = dtensor::parse_op_name("aten::add.Tensor");
//   dtensor::op_name_string(name);  // "aten::add.Tensor"
#pragma once

#include <string>
#include <string_view>

#include <ATen/core/operator_name.h>

namespace dtensor {

// "ns::name.overload" ("ns::name" for the default overload).
std::string op_name_string(const c10::OperatorName& name);

// The name and overload of "ns::name[.overload]". Throws dtensor::Error
// (prefixed by `what`) for text of another shape.
c10::OperatorName parse_op_name(std::string_view text, std::string_view what = "operator name");

// Whether this libtorch has the operator `text` names (op sets differ
// between versions).
bool operator_exists(std::string_view text);

}  // namespace dtensor
