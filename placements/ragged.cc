// Copyright 2026 The dtensor Authors.
#include <dtensor/placements/ragged.h>

#include <numeric>

#include <dtensor/base/check.h>
#include <dtensor/placements/parse.h>
#include "absl/hash/hash.h"
#include "absl/strings/str_join.h"

namespace dtensor {
namespace {

// The sum of non-negative `units`, or -1 when it does not fit in 64 bits
// (row boundaries scale rows by prefix sums of the units).
int64_t total_of(const std::vector<int64_t>& units) {
  int64_t total = 0;
  for (int64_t unit : units) {
    if (__builtin_add_overflow(total, unit, &total)) return -1;
  }
  return total;
}

}  // namespace

PlacementPtr Ragged::make(int64_t dims, std::vector<int64_t> units) {
  const std::string spelling = Ragged(dims, units).to_string();
  DTENSOR_CHECK(dims >= 1, spelling, ": dims: expected at least 1 leading dim, found ", dims);
  DTENSOR_CHECK(!units.empty(), spelling, ": units: expected one unit per rank, found none");
  for (int64_t unit : units) {
    DTENSOR_CHECK(unit >= 0, spelling, ": units: expected non-negative units, found ", unit);
  }
  const int64_t total = total_of(units);
  DTENSOR_CHECK(total != -1, spelling,
                ": units: expected units whose sum fits in 64 bits, found a larger sum");
  DTENSOR_CHECK(total > 0, spelling,
                ": units: expected at least one non-zero unit, found all zero");
  return std::make_shared<const Ragged>(dims, std::move(units));
}

std::string Ragged::to_string() const {
  return "RG(dims=" + std::to_string(dims_) + ",units=[" + absl::StrJoin(units_, ",") + "])";
}

bool Ragged::equals(const Placement& other) const {
  const auto* ragged = exactly<Ragged>(other);
  return ragged != nullptr && ragged->dims_ == dims_ && ragged->units_ == units_;
}

size_t Ragged::hash() const { return absl::HashOf(std::string_view("RG"), dims_, units_); }

PlacementPtr Ragged::normalized(int64_t tensor_ndim) const {
  DTENSOR_CHECK(dims_ <= tensor_ndim, to_string(), ": expected at most ", tensor_ndim,
                " leading dims for a ", tensor_ndim, "-D tensor, found dims=", dims_);
  return std::make_shared<const Ragged>(dims_, units_);
}

PlacementPtr Ragged::moved_to_dim(int64_t dim) const {
  return dim == 0 ? std::make_shared<const Ragged>(dims_, units_) : nullptr;
}

void Ragged::check_mesh_dim_size(int64_t n) const {
  DTENSOR_CHECK(static_cast<int64_t>(units_.size()) == n, to_string(),
                ": units: expected one unit per rank of the mesh dim (", n, "), found ",
                units_.size());
}

ChunkRange Ragged::row_range(int64_t rows, int64_t r) const {
  const int64_t total = total_of(units_);
  const int64_t before = std::accumulate(units_.begin(), units_.begin() + r, int64_t{0});
  // 128-bit products: rows * units may exceed 64 bits for large tensors.
  auto boundary = [&](int64_t prefix) {
    return static_cast<int64_t>(static_cast<__int128>(rows) * prefix / total);
  };
  return {boundary(before), boundary(before + units_[r])};
}

void Ragged::restrict(LayoutIndices& indices, int64_t n, int64_t r) const {
  check_mesh_dim_size(n);
  DTENSOR_CHECK(indices.merged() == std::max<int64_t>(dims_, 1), to_string(),
                ": expected the layout to merge ", dims_, " leading dims, found ",
                indices.merged());
  std::vector<int64_t>& rows = indices.rows();
  keep_range(rows, row_range(static_cast<int64_t>(rows.size()), r));
}

namespace {

PlacementPtr parse_ragged(const PlacementArguments& arguments) {
  arguments.expect_count(2, 2);
  const int64_t dims = arguments.integer(0, "dims");
  if (dims < 1) arguments.fail(0, "dims", "at least 1");
  const std::vector<int64_t> units = arguments.integer_list(1, "units");
  for (int64_t unit : units) {
    if (unit < 0) arguments.fail(1, "units", "a list of non-negative integers");
  }
  const int64_t total = total_of(units);
  if (total == -1) arguments.fail(1, "units", "a list whose sum fits in 64 bits");
  if (total == 0) arguments.fail(1, "units", "a list with at least one non-zero unit");
  return Ragged::make(dims, units);
}

DTENSOR_REGISTER(parse_ragged_spelling) { placement_parsers().add("RG", parse_ragged); }

}  // namespace
}  // namespace dtensor
