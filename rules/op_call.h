// Copyright 2026 The dtensor Authors.
//
// rules/op_call.h: what a sharding rule sees of one operator call.
//
// An `OpCall` names the ATen operator, gives the call's arguments as the
// dispatcher passed them, and lists the tensor inputs in order (the elements
// of a Tensor[] argument one by one), each with a spec: a DTensor's own, or a
// Replicate spec for a plain tensor the dispatcher admitted (a 0-dim scalar,
// or any tensor under implicit replication).
//
//   // In a strategy: the placements of input 0 on mesh dim `m`.
//   const dtensor::PlacementPtr& p = call.input(0).spec->placements()[m];
//   int64_t dim = call.argument(1).toInt();
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>

#include <dtensor/placements/spec.h>

namespace dtensor {

struct TensorInput {
  size_t argument = 0;      // index in the schema's arguments
  int64_t list_index = -1;  // position inside a Tensor[] argument, else -1
  DTensorSpecPtr spec;
  bool is_dtensor = false;
};

class OpCall {
 public:
  OpCall(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> arguments,
         std::vector<TensorInput> inputs, DeviceMesh mesh);

  const c10::OperatorHandle& op() const { return op_; }
  const c10::FunctionSchema& schema() const { return op_.schema(); }
  // "aten::add.Tensor".
  std::string op_name() const;
  c10::ArrayRef<c10::IValue> arguments() const { return arguments_; }
  const c10::IValue& argument(size_t i) const { return arguments_[i]; }
  // The argument named `name` (throws when the schema has none).
  const c10::IValue& argument(const std::string& name) const;

  const std::vector<TensorInput>& inputs() const { return inputs_; }
  const TensorInput& input(size_t i) const { return inputs_[i]; }
  size_t num_inputs() const { return inputs_.size(); }
  // The input that is argument `argument` (the first element for a list).
  const TensorInput* input_of_argument(size_t argument) const;
  const DeviceMesh& mesh() const { return mesh_; }

  // The placement of input `i` on mesh dim `m`.
  const PlacementPtr& placement(size_t i, int64_t m) const {
    return inputs_[i].spec->placements()[m];
  }
  // Input placements as "S(0),R; R,P(sum)" for error messages.
  std::string describe_inputs() const;

 private:
  const c10::OperatorHandle& op_;
  c10::ArrayRef<c10::IValue> arguments_;
  std::vector<TensorInput> inputs_;
  DeviceMesh mesh_;
};

// The argument that return `j` of `schema` aliases and writes (an in-place
// or out= op's), or -1: the first argument marked written (`Tensor(a!)`)
// in the alias set of a return marked written too. Every ATen schema with
// such a return has exactly one such argument.
int64_t argument_written_by_return(const c10::FunctionSchema& schema, size_t j);

}  // namespace dtensor
