// Copyright 2026 The dtensor Authors.
//
// The one registry shape (base/registry.h): register, override, look up,
// list; joined or one value per key; malformed keys refused; every change
// visible to the caches through the generations.
#include <dtensor/base/registry.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <dtensor/base/check.h>
#include "tests/support/expect_error.h"

namespace dtensor {
namespace {

using Strings = std::vector<std::string>;

std::vector<int> values_of(const Registry<int>& registry, std::string_view key) {
  const auto found = registry.find(key);
  return found == nullptr ? std::vector<int>{} : *found;
}

TEST(RegistryTest, JoinedValuesAccumulateInOrder) {
  Registry<int> registry("test registry", Registry<int>::PerKey::kJoinedValues);
  registry.add("b", 1);
  registry.add("b", 2);
  registry.add("a", 3);
  EXPECT_EQ(values_of(registry, "b"), (std::vector<int>{1, 2}));
  EXPECT_EQ(values_of(registry, "a"), (std::vector<int>{3}));
  EXPECT_EQ(registry.find("c"), nullptr);
  EXPECT_EQ(registry.keys(), (Strings{"a", "b"}));  // sorted, not insertion order
}

TEST(RegistryTest, OneValuePerKeyRefusesASecondAddButNotAnOverride) {
  Registry<int> registry("test registry", Registry<int>::PerKey::kOneValue);
  registry.add("k", 1);
  DTENSOR_EXPECT_ERROR(registry.add("k", 2),
                       "test registry: \"k\": expected one value per key, found one registered "
                       "already (override it to replace it)");
  EXPECT_EQ(values_of(registry, "k"), (std::vector<int>{1}));
  registry.override("k", 2);
  EXPECT_EQ(values_of(registry, "k"), (std::vector<int>{2}));
}

TEST(RegistryTest, OverrideReplacesEveryJoinedValueAndRemoveForgetsTheKey) {
  Registry<int> registry("test registry", Registry<int>::PerKey::kJoinedValues);
  registry.add("k", 1);
  registry.add("k", 2);
  registry.override("k", 7);
  EXPECT_EQ(values_of(registry, "k"), (std::vector<int>{7}));
  registry.remove("k");
  EXPECT_EQ(registry.find("k"), nullptr);
  EXPECT_EQ(registry.keys(), Strings{});
}

TEST(RegistryTest, LookupsAreSnapshots) {
  Registry<int> registry("test registry", Registry<int>::PerKey::kJoinedValues);
  registry.add("k", 1);
  const auto before = registry.find("k");
  registry.add("k", 2);
  EXPECT_EQ(*before, (std::vector<int>{1}));
  EXPECT_EQ(values_of(registry, "k"), (std::vector<int>{1, 2}));
}

TEST(RegistryTest, KeysAreChecked) {
  Registry<int> registry("test registry", Registry<int>::PerKey::kOneValue,
                         [](std::string_view what, std::string_view key) {
                           DTENSOR_CHECK(key.find(' ') == std::string_view::npos, what,
                                         ": expected a key without spaces, found \"", key, "\"");
                         });
  DTENSOR_EXPECT_ERROR(registry.add("", 1), "test registry: expected a key, found an empty one");
  DTENSOR_EXPECT_ERROR(registry.add("a b", 1),
                       "test registry: expected a key without spaces, found \"a b\"");
  DTENSOR_EXPECT_ERROR(registry.override("a b", 1),
                       "test registry: expected a key without spaces, found \"a b\"");
  EXPECT_EQ(registry.keys(), Strings{});
}

TEST(RegistryTest, EveryChangeBumpsItsGenerationAndTheGlobalOne) {
  Registry<int> registry("test registry", Registry<int>::PerKey::kJoinedValues);
  const uint64_t own = registry.generation();
  const uint64_t all = registries_generation();
  registry.add("k", 1);
  registry.override("k", 2);
  registry.remove("k");
  EXPECT_EQ(registry.generation(), own + 3);
  EXPECT_GE(registries_generation(), all + 3);
  const uint64_t unchanged = registry.generation();
  registry.find("k");
  registry.keys();
  EXPECT_EQ(registry.generation(), unchanged);
}

int registered_at_load = 0;
DTENSOR_REGISTER(registry_test_value) { registered_at_load = 42; }

TEST(RegistryTest, RegisterBlocksRunAtLoad) { EXPECT_EQ(registered_at_load, 42); }

}  // namespace
}  // namespace dtensor
