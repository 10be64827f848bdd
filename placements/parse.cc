// Copyright 2026 The dtensor Authors.
#include <dtensor/placements/parse.h>

#include <algorithm>
#include <cctype>
#include <sstream>

#include <dtensor/base/check.h>

namespace dtensor {
namespace {

[[noreturn]] void parse_error(std::string_view text, size_t column, std::string_view expected) {
  std::ostringstream message;
  message << "parse_placements: expected " << expected << " at column " << column + 1 << ", found ";
  if (column < text.size()) {
    message << "'" << text[column] << "'";
  } else {
    message << "the end";
  }
  message << ":\n  " << text << "\n  " << std::string(column, ' ') << "^";
  DTENSOR_CHECK(false, message.str());
}

PlacementParser find_parser(std::string_view name) {
  auto found = placement_parsers().find(name);
  return found == nullptr ? nullptr : found->front();
}

std::string known_spellings() {
  std::string names;
  for (const std::string& name : placement_parsers().keys()) {
    names += (names.empty() ? "" : ", ") + name;
  }
  return names;
}

// Recursive descent over one string.
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  std::vector<PlacementPtr> placements() {
    std::vector<PlacementPtr> out{placement()};
    while (accept(',')) out.push_back(placement());
    expect_end();
    return out;
  }

  PlacementPtr single() {
    PlacementPtr out = placement();
    expect_end();
    return out;
  }

 private:
  PlacementPtr placement() {
    const size_t column = skip_space();
    const std::string name = identifier("a placement name such as R, S, P, SS or RG");
    PlacementParser parser = find_parser(name);
    if (parser == nullptr) {
      parse_error(text_, column, "a known placement (" + known_spellings() + ")");
    }
    std::vector<PlacementArguments::Argument> arguments;
    if (accept('(')) {
      if (!accept(')')) {
        arguments.push_back(argument());
        while (accept(',')) arguments.push_back(argument());
        expect(')');
      }
    }
    return parser(PlacementArguments(text_, name, column, std::move(arguments)));
  }

  // Whether an identifier (a key, a name) starts here.
  bool at_identifier() { return std::isalpha(static_cast<unsigned char>(peek())) || peek() == '_'; }

  PlacementArguments::Argument argument() {
    PlacementArguments::Argument arg;
    arg.column = skip_space();
    if (at_identifier()) {
      std::string word = identifier("an argument");
      if (accept('=')) {
        arg.key = std::move(word);
        arg.column = skip_space();
      } else {
        arg.kind = PlacementArguments::Argument::Kind::kName;
        arg.name = std::move(word);
        return arg;
      }
    }
    if (accept('[')) {
      arg.kind = PlacementArguments::Argument::Kind::kList;
      if (!accept(']')) {
        arg.list.push_back(integer());
        while (accept(',')) arg.list.push_back(integer());
        expect(']');
      }
    } else if (at_identifier()) {
      arg.kind = PlacementArguments::Argument::Kind::kName;
      arg.name = identifier("a value");
    } else {
      arg.kind = PlacementArguments::Argument::Kind::kInteger;
      arg.integer = integer();
    }
    return arg;
  }

  int64_t integer() {
    const size_t start = skip_space();
    size_t end = start;
    if (end < text_.size() && text_[end] == '-') ++end;
    const size_t digits = end;
    while (end < text_.size() && std::isdigit(static_cast<unsigned char>(text_[end]))) ++end;
    if (end == digits || end - digits > 18) parse_error(text_, start, "an integer");
    pos_ = end;
    return std::stoll(std::string(text_.substr(start, end - start)));
  }

  std::string identifier(std::string_view what) {
    const size_t start = skip_space();
    size_t end = start;
    while (end < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[end])) || text_[end] == '_')) {
      ++end;
    }
    if (end == start || std::isdigit(static_cast<unsigned char>(text_[start]))) {
      parse_error(text_, start, what);
    }
    pos_ = end;
    return std::string(text_.substr(start, end - start));
  }

  char peek() {
    skip_space();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }

  bool accept(char c) {
    if (peek() != c || pos_ >= text_.size()) return false;
    ++pos_;
    return true;
  }

  void expect(char c) {
    if (!accept(c)) parse_error(text_, pos_, std::string("'") + c + "'");
  }

  void expect_end() {
    if (skip_space() != text_.size()) parse_error(text_, pos_, "',' or the end");
  }

  size_t skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    return pos_;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

std::string_view kind_name(PlacementArguments::Argument::Kind kind) {
  switch (kind) {
    case PlacementArguments::Argument::Kind::kInteger:
      return "an integer";
    case PlacementArguments::Argument::Kind::kName:
      return "a name";
    case PlacementArguments::Argument::Kind::kList:
      return "a list of integers";
  }
  return "a value";
}

}  // namespace

void PlacementArguments::expect_count(size_t min, size_t max) const {
  if (arguments_.size() >= min && arguments_.size() <= max) return;
  std::ostringstream expected;
  expected << placement_ << " to take ";
  if (min == max) {
    expected << min;
  } else {
    expected << min << " to " << max;
  }
  expected << " argument" << (max == 1 ? "" : "s") << " (it has " << arguments_.size() << ")";
  parse_error(text_, column_, expected.str());
}

const PlacementArguments::Argument& PlacementArguments::find(size_t position, std::string_view key,
                                                             Argument::Kind kind,
                                                             std::string_view expected) const {
  const Argument* found = nullptr;
  for (const Argument& arg : arguments_) {
    if (arg.key == key) found = &arg;
  }
  if (found == nullptr && position < arguments_.size() && arguments_[position].key.empty()) {
    found = &arguments_[position];
  }
  if (found == nullptr) {
    parse_error(text_, column_,
                std::string(placement_) + " to have argument " + std::string(key) + " (" +
                    std::string(expected) + ")");
  }
  if (found->kind != kind) {
    parse_error(text_, found->column, std::string(key) + " to be " + std::string(kind_name(kind)));
  }
  return *found;
}

int64_t PlacementArguments::integer(size_t position, std::string_view key) const {
  return find(position, key, Argument::Kind::kInteger, "an integer").integer;
}

std::string PlacementArguments::name(size_t position, std::string_view key) const {
  return find(position, key, Argument::Kind::kName, "a name").name;
}

std::vector<int64_t> PlacementArguments::integer_list(size_t position, std::string_view key) const {
  return find(position, key, Argument::Kind::kList, "a list of integers").list;
}

void PlacementArguments::fail(size_t position, std::string_view key,
                              std::string_view expected) const {
  size_t column = column_;
  for (size_t i = 0; i < arguments_.size(); ++i) {
    if (arguments_[i].key == key || (i == position && arguments_[i].key.empty())) {
      column = arguments_[i].column;
    }
  }
  parse_error(text_, column, std::string(key) + " to be " + std::string(expected));
}

Registry<PlacementParser>& placement_parsers() {
  static auto* registry = new Registry<PlacementParser>(
      "placement parser registry", Registry<PlacementParser>::PerKey::kOneValue,
      [](std::string_view what, std::string_view key) {
        const bool identifier =
            std::all_of(
                key.begin(), key.end(),
                [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }) &&
            !std::isdigit(static_cast<unsigned char>(key.front()));
        DTENSOR_CHECK(identifier, what, ": expected a name like \"S\" or \"IS\", found \"", key,
                      "\"");
      });
  return *registry;
}

PlacementPtr parse_placement(std::string_view text) { return Parser(text).single(); }

std::vector<PlacementPtr> parse_placements(std::string_view text) {
  return Parser(text).placements();
}

}  // namespace dtensor
