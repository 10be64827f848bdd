// Copyright 2026 The dtensor Authors.
#include <dtensor/placements/replicate.h>

#include <dtensor/placements/parse.h>

namespace dtensor {

PlacementPtr Replicate::make() {
  static const PlacementPtr instance = std::make_shared<const Replicate>();
  return instance;
}

bool Replicate::equals(const Placement& other) const {
  return exactly<Replicate>(other) != nullptr;
}

size_t Replicate::hash() const { return 0x52; }

namespace {

PlacementPtr parse_replicate(const PlacementArguments& arguments) {
  arguments.expect_count(0, 0);
  return Replicate::make();
}

DTENSOR_REGISTER(parse_replicate_spelling) { placement_parsers().add("R", parse_replicate); }

}  // namespace
}  // namespace dtensor
