// Copyright 2026 The dtensor Authors.
//
// examples/explain/args.h: dtensor-explain's command line, read by hand.
//
// The tool takes a subcommand and `--option value` / `--option=value` pairs
// plus a few flags. Every mistake throws UsageError with a one-line message,
// which main turns into exit code 2, so scripts can tell bad input (2) from a
// failure of the library (1).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dtensor_explain {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a subcommand accepts.
struct CommandSpec {
  std::string name;
  std::set<std::string> value_options;  // e.g. "mesh", without the dashes
  std::set<std::string> flags;          // e.g. "json"
};

struct ParsedCommand {
  std::string name;
  std::map<std::string, std::string> values;
  std::set<std::string> flags;

  bool has_flag(const std::string& flag) const { return flags.count(flag) > 0; }
  // The value of `--option`; throws UsageError when it was not given.
  const std::string& required(const std::string& option) const;
  std::optional<std::string> optional(const std::string& option) const;
};

// Whether `--help` or `-h` appears anywhere: help wins over every other
// mistake, so `dtensor-explain plan --mesh x --help` still explains itself.
bool wants_help(const std::vector<std::string>& args);

// Reads `args` (argv without the program name) against `commands`.
ParsedCommand parse_command_line(const std::vector<std::string>& args,
                                 const std::vector<CommandSpec>& commands);

// "4,2" -> {4, 2}. Non-negative decimal integers separated by commas, spaces
// around them allowed. `allow_empty` accepts "" as the empty list (a 0-d
// tensor's shape). `option` names the option in the error message.
std::vector<int64_t> parse_sizes(std::string_view option, std::string_view text, bool allow_empty);

}  // namespace dtensor_explain
