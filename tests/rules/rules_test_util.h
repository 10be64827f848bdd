// Copyright 2026 The dtensor Authors.
//
// tests/rules/rules_test_util.h: small helpers shared by the rule and
// dispatch suites. Data is integer-valued so that every result is exact and
// comparable with at::equal against the single-device result.
#pragma once

#include <cstdint>
#include <exception>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <dtensor/base/check.h>
#include <dtensor/dtensor.h>
#include <dtensor/mesh/device_mesh.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/mesh/reduce_op.h>
#include <dtensor/placements/placements.h>

namespace dtensor {
namespace rules_testing {

using Shape = std::vector<int64_t>;

inline int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

// Distinct integers start, start+1, ... laid out in `shape`, as `dtype`.
inline at::Tensor iota(const Shape& shape, int64_t start = 1, at::ScalarType dtype = at::kFloat) {
  return (at::arange(numel_of(shape), at::kLong) + start).reshape(shape).to(dtype);
}

// Distinct integers centred on zero (about half negative): relu and max see
// both signs.
inline at::Tensor signed_iota(const Shape& shape, at::ScalarType dtype = at::kFloat) {
  return iota(shape, -(numel_of(shape) / 2), dtype);
}

inline DTensor dist(const at::Tensor& global, const DeviceMesh& mesh, std::string_view text) {
  return distribute_tensor(global, mesh, parse_placements(text));
}

inline std::string describe(const at::Tensor& t) {
  std::ostringstream out;
  out << t.sizes() << " " << t.scalar_type() << "\n" << t;
  return out.str();
}

inline std::string placements_of(const at::Tensor& t) {
  return placements_to_string(DTensor(t).placements());
}

// Whether `result` is a DTensor with the global sizes and dtype of
// `expected`, whose full tensor equals it exactly (or within rtol, and as
// much absolute tolerance for zeros, when `rtol` > 0), laid out as
// `placements` when given. Collective: every rank calls it.
inline ::testing::AssertionResult Matches(const at::Tensor& result, const at::Tensor& expected,
                                          std::string_view placements = {}, double rtol = 0) {
  if (!is_dtensor(result)) {
    return ::testing::AssertionFailure() << "result is not a DTensor: " << describe(result);
  }
  DTensor d(result);
  at::Tensor full = d.full_tensor();
  const std::string got = placements_to_string(d.placements());
  ::testing::AssertionResult failure = ::testing::AssertionFailure();
  bool ok = true;
  if (result.sizes() != expected.sizes()) {
    ok = false;
    failure << "wrapper sizes " << result.sizes() << " != expected " << expected.sizes() << "; ";
  }
  if (result.scalar_type() != expected.scalar_type()) {
    ok = false;
    failure << "wrapper dtype " << result.scalar_type() << " != expected " << expected.scalar_type()
            << "; ";
  }
  const bool same_values =
      full.sizes() == expected.sizes() && full.scalar_type() == expected.scalar_type() &&
      (rtol > 0 ? at::allclose(full, expected, rtol, /*atol=*/rtol) : at::equal(full, expected));
  if (!same_values) {
    ok = false;
    failure << "full tensor " << describe(full) << "\n!= expected " << describe(expected) << "; ";
  }
  if (!placements.empty() && got != placements) {
    ok = false;
    failure << "placements " << got << " != expected " << placements << "; ";
  }
  if (ok) return ::testing::AssertionSuccess();
  return failure << "(placements " << got << ")";
}

// The message of the dtensor::Error that `f` throws ("<no error>" when it
// returns; other exceptions are reported as such).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const ::dtensor::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not a dtensor::Error> ") + e.what();
  }
  return "<no error>";
}

// Whether any rank of the calling run_ranks world passes true.
inline bool any_rank(bool flag) {
  at::Tensor t = at::full({1}, flag ? 1.0 : 0.0, at::kFloat);
  local_world()->all_reduce(t, ReduceOp::kMax);
  return t.item<float>() != 0;
}

// Computes a result and checks it, turning exceptions into failures so one
// broken call does not hide the checks after it. The ranks agree on whether
// any of them threw before checking (which communicates), so a rank failing
// alone (a wrong local shape, say) does not leave the others waiting.
template <typename Compute, typename Check>
::testing::AssertionResult Guarded(Compute&& compute, Check&& check) {
  at::Tensor result;
  std::string error;
  try {
    result = compute();
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (any_rank(!error.empty())) {
    return ::testing::AssertionFailure()
           << (error.empty() ? std::string("another rank threw") : "threw: " + error);
  }
  try {
    return check(result);
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw while checking: " << e.what();
  }
}

// EXPECT_DT(result, expected [, placements [, rtol]]): Matches, with the
// result computed inside the guard.
#define EXPECT_DT(result, ...)                                                              \
  EXPECT_TRUE(::dtensor::rules_testing::Guarded([&]() -> at::Tensor { return (result); },   \
                                                [&](const at::Tensor& dt_result_) {         \
                                                  return ::dtensor::rules_testing::Matches( \
                                                      dt_result_, __VA_ARGS__);             \
                                                }))

#define EXPECT_CONTAINS(text, needle)                          \
  EXPECT_NE(std::string(text).find(needle), std::string::npos) \
      << "\"" << (text) << "\" lacks \"" << (needle) << "\""

}  // namespace rules_testing
}  // namespace dtensor
