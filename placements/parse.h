// Copyright 2026 The dtensor Authors.
//
// placements/parse.h: reading placements from text, and the registry through
// which every placement kind (built-in or user) adds its spelling.
//
// Grammar (white space is ignored):
//   placements := placement ("," placement)*
//   placement  := NAME ["(" [argument ("," argument)*] ")"]
//   argument   := [NAME "="] (INTEGER | NAME | "[" [INTEGER ("," INTEGER)*] "]")
// e.g. "S(0),R", "P(sum)", "SS(0,2)", "RG(dims=1,units=[1,2,1,0])".
//
// A malformed string throws dtensor::Error that quotes the text and puts a
// caret under the offending character.
//
// A placement kind registers its name once, in its own source file:
//
//   PlacementPtr parse_interleaved(const PlacementArguments& args) {
//     args.expect_count(2, 2);
//     return InterleavedShard::make(args.integer(0, "dim"), args.integer(1, "interleave"));
//   }
//   DTENSOR_REGISTER(interleaved_shard_spelling) {
//     dtensor::placement_parsers().add("IS", parse_interleaved);
//   }
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <dtensor/base/registry.h>
#include <dtensor/placements/placement.h>

namespace dtensor {

// The arguments between a placement's parentheses, with their positions so
// that errors can point at them.
class PlacementArguments {
 public:
  struct Argument {
    std::string key;  // empty for a positional argument
    enum class Kind { kInteger, kName, kList } kind;
    int64_t integer = 0;
    std::string name;
    std::vector<int64_t> list;
    size_t column = 0;
  };

  PlacementArguments(std::string_view text, std::string_view placement, size_t column,
                     std::vector<Argument> arguments)
      : text_(text), placement_(placement), column_(column), arguments_(std::move(arguments)) {}

  size_t size() const { return arguments_.size(); }
  // Throws unless there are between `min` and `max` arguments.
  void expect_count(size_t min, size_t max) const;
  // The argument at `position`, or the one called `key` (either spelling is
  // accepted), as an integer, a name or a list of integers.
  int64_t integer(size_t position, std::string_view key) const;
  std::string name(size_t position, std::string_view key) const;
  std::vector<int64_t> integer_list(size_t position, std::string_view key) const;
  // Throws a parse error pointing at the argument at `position` (or `key`).
  [[noreturn]] void fail(size_t position, std::string_view key, std::string_view expected) const;

 private:
  const Argument& find(size_t position, std::string_view key, Argument::Kind kind,
                       std::string_view expected) const;

  std::string_view text_;
  std::string_view placement_;
  size_t column_;
  std::vector<Argument> arguments_;
};

using PlacementParser = PlacementPtr (*)(const PlacementArguments& arguments);

// Placement parsers by name ("S", "RG", a plugin's "IS"): the spellings
// parse_placement understands; one parser per name.
Registry<PlacementParser>& placement_parsers();

// One placement, e.g. "S(0)".
PlacementPtr parse_placement(std::string_view text);
// A comma-separated list, e.g. "S(0),R".
std::vector<PlacementPtr> parse_placements(std::string_view text);

}  // namespace dtensor
