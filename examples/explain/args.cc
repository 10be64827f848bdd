// Copyright 2026 The dtensor Authors.
#include "examples/explain/args.h"

#include <cctype>
#include <charconv>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "examples/explain/format.h"

namespace dtensor_explain {
namespace {

std::vector<std::string> command_names(const std::vector<CommandSpec>& commands) {
  std::vector<std::string> names;
  for (const CommandSpec& command : commands) names.push_back(command.name);
  return names;
}

const CommandSpec& find_command(const std::vector<std::string>& args,
                                const std::vector<CommandSpec>& commands) {
  const std::string known = absl::StrJoin(command_names(commands), " or ");
  if (args.empty() || starts_with(args[0], "-")) {
    throw UsageError(absl::StrCat("expected a subcommand (", known, "); see --help"));
  }
  for (const CommandSpec& command : commands) {
    if (command.name == args[0]) return command;
  }
  throw UsageError(
      absl::StrCat("unknown subcommand '", args[0], "': expected ", known, "; see --help"));
}

// Reads the option at args[*i] (and its value, which may be the next
// argument) into `parsed`, advancing *i past what it used.
void read_option(const std::vector<std::string>& args, size_t* i, const CommandSpec& command,
                 ParsedCommand* parsed) {
  const std::string& arg = args[*i];
  if (!starts_with(arg, "--") || arg.size() == 2) {
    throw UsageError(absl::StrCat(command.name, ": unexpected argument '", arg, "'; see --help"));
  }
  const size_t equals = arg.find('=');
  const std::string name =
      arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
  const bool is_flag = command.flags.count(name) > 0;
  if (!is_flag && command.value_options.count(name) == 0) {
    throw UsageError(absl::StrCat(command.name, ": unknown option --", name, "; see --help"));
  }
  if (parsed->values.count(name) > 0 || parsed->flags.count(name) > 0) {
    throw UsageError(absl::StrCat("option --", name, " given twice"));
  }
  if (is_flag) {
    if (equals != std::string::npos) {
      throw UsageError(absl::StrCat("option --", name, " takes no value"));
    }
    parsed->flags.insert(name);
    return;
  }
  if (equals != std::string::npos) {
    parsed->values[name] = arg.substr(equals + 1);
    return;
  }
  // A following "--x" is the next option, not this one's value: reading it as
  // a value would turn a forgotten value into a confusing parse error later.
  if (*i + 1 >= args.size() || starts_with(args[*i + 1], "--")) {
    throw UsageError(absl::StrCat("option --", name, ": expected a value"));
  }
  ++*i;
  parsed->values[name] = args[*i];
}

}  // namespace

const std::string& ParsedCommand::required(const std::string& option) const {
  auto it = values.find(option);
  if (it == values.end()) {
    throw UsageError(absl::StrCat(name, ": missing option --", option, "; see --help"));
  }
  return it->second;
}

std::optional<std::string> ParsedCommand::optional(const std::string& option) const {
  auto it = values.find(option);
  if (it == values.end()) return std::nullopt;
  return it->second;
}

bool wants_help(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg == "--help" || arg == "-h") return true;
  }
  return false;
}

ParsedCommand parse_command_line(const std::vector<std::string>& args,
                                 const std::vector<CommandSpec>& commands) {
  const CommandSpec& command = find_command(args, commands);
  ParsedCommand parsed;
  parsed.name = command.name;
  for (size_t i = 1; i < args.size(); ++i) read_option(args, &i, command, &parsed);
  return parsed;
}

std::vector<int64_t> parse_sizes(std::string_view option, std::string_view text, bool allow_empty) {
  std::vector<int64_t> sizes;
  if (allow_empty && trim(text).empty()) return sizes;
  for (std::string_view piece : split(text, ',')) {
    piece = trim(piece);
    int64_t value = 0;
    const char* end = piece.data() + piece.size();
    // from_chars alone would accept a leading '-'; sizes never have one.
    const bool digits_only = !piece.empty() && std::isdigit(static_cast<unsigned char>(piece[0]));
    const auto [stop, error] = std::from_chars(piece.data(), end, value);
    if (!digits_only || error != std::errc() || stop != end) {
      throw UsageError(absl::StrCat("--", std::string(option),
                                    ": expected comma-separated non-negative integers, found '",
                                    std::string(text), "'"));
    }
    sizes.push_back(value);
  }
  return sizes;
}

}  // namespace dtensor_explain
