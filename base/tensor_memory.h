// Copyright 2026 The dtensor Authors.
//
// base/tensor_memory.h: whether a tensor's bytes may be copied as they lie.
//
// A tensor can read other than its memory holds: a lazily conjugated or
// negated view applies its bit when read, a zero tensor has no memory, and a
// quantized tensor's values need its quantizer. Copies that move bytes
// themselves (memcpy, row by row) are exact only for the others:
//
//   if (holds_plain_cpu_values(t)) std::memcpy(dst, t.data_ptr(), t.nbytes());
#pragma once

#include <ATen/core/Tensor.h>

namespace dtensor {

// Whether `t` is strided CPU memory whose bytes are its values as read.
inline bool holds_plain_cpu_values(const at::Tensor& t) {
  return t.device().is_cpu() && t.layout() == at::kStrided && !t.is_quantized() && !t.is_conj() &&
         !t.is_neg() && !t._is_zerotensor();
}

}  // namespace dtensor
