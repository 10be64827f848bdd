// Copyright 2026 The dtensor Authors.
#include "examples/explain/format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dtensor_explain {

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> pieces;
  size_t begin = 0;
  for (size_t end = text.find(separator); end != std::string_view::npos;
       end = text.find(separator, begin)) {
    pieces.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  pieces.push_back(text.substr(begin));
  return pieces;
}

std::string_view trim(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return {};
  return text.substr(begin, text.find_last_not_of(" \t\r\n") - begin + 1);
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

std::string bracketed(const std::vector<int64_t>& values) {
  return absl::StrCat("[", absl::StrJoin(values, ", "), "]");
}

std::string parenthesized(const std::vector<int64_t>& values) {
  return absl::StrCat("(", absl::StrJoin(values, ", "), ")");
}

std::string index_runs(const std::vector<int64_t>& indices) {
  std::vector<std::string> pieces;
  size_t begin = 0;
  while (begin < indices.size()) {
    size_t end = begin + 1;
    while (end < indices.size() && indices[end] == indices[end - 1] + 1) ++end;
    // Two consecutive indices read better listed than as a range.
    if (end - begin >= 3) {
      pieces.push_back(absl::StrCat(indices[begin], "..", indices[end - 1]));
    } else {
      for (size_t i = begin; i < end; ++i) pieces.push_back(absl::StrCat(indices[i]));
    }
    begin = end;
  }
  return absl::StrJoin(pieces, ", ");
}

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", decimals, value);
  return buffer;
}

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escape[8];
          std::snprintf(escape, sizeof(escape), "\\u%04x", static_cast<unsigned>(c));
          out += escape;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string json_array(const std::vector<int64_t>& values) {
  return absl::StrCat("[", absl::StrJoin(values, ","), "]");
}

std::string json_array(const std::vector<std::vector<int64_t>>& lists) {
  std::vector<std::string> inner;
  inner.reserve(lists.size());
  for (const std::vector<int64_t>& list : lists) inner.push_back(json_array(list));
  return absl::StrCat("[", absl::StrJoin(inner, ","), "]");
}

std::string json_number(double value) { return std::isfinite(value) ? fixed(value, 3) : "null"; }

std::string Table::render() const {
  std::vector<size_t> widths;
  for (const std::vector<std::string>& row : rows_) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (const std::vector<std::string>& row : rows_) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string one_line(std::string_view message) {
  if (starts_with(message, "dtensor: ")) message.remove_prefix(9);
  const size_t check = message.rfind(" [check `");
  if (check != std::string_view::npos && ends_with(message, "]")) {
    message = message.substr(0, check);
  }
  std::vector<std::string> kept;
  for (std::string_view line : split(message, '\n')) {
    line = trim(line);
    if (line.empty() || line.find_first_not_of("^ ") == std::string_view::npos) continue;
    kept.emplace_back(line);
  }
  return absl::StrJoin(kept, " ");
}

}  // namespace dtensor_explain
