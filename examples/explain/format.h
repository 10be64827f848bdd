// Copyright 2026 The dtensor Authors.
//
// examples/explain/format.h: the text and JSON pieces dtensor-explain prints
// (dtensor-checkpoint prints with them too).
//
// Kept apart from the tool's logic so that every output line is built by the
// same few functions: the tests compare exact lines, and one spelling of a list
// or a number everywhere is what makes that stable.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtensor_explain {

// Debian's Abseil has its own string_view type, not std::string_view, so the
// few string chores the tool needs are done here on std::string_view.
std::vector<std::string_view> split(std::string_view text, char separator);
std::string_view trim(std::string_view text);
bool starts_with(std::string_view text, std::string_view prefix);
bool ends_with(std::string_view text, std::string_view suffix);

// "[2, 5]": how dtensor prints shapes (DTensorSpec::to_string does the same).
std::string bracketed(const std::vector<int64_t>& values);
// "(4, 2)": how DeviceMesh prints its shape.
std::string parenthesized(const std::vector<int64_t>& values);
// "0..7, 12, 13": runs of three or more consecutive indices as first..last
// (inclusive), so a dim of 4096 rows stays one short cell.
std::string index_runs(const std::vector<int64_t>& indices);
// A fixed-point number with `decimals` digits, e.g. cost estimates.
std::string fixed(double value, int decimals);

// A JSON string literal (quotes included) with ", \ and control characters
// escaped; everything else, UTF-8 included, passes through unchanged.
std::string json_string(std::string_view text);
// "[0,1]" and "[[0,1],[2]]", without spaces, as JSON lines usually are.
std::string json_array(const std::vector<int64_t>& values);
std::string json_array(const std::vector<std::vector<int64_t>>& lists);
// A JSON number with three decimals; JSON has no NaN or infinity, so those
// become null.
std::string json_number(double value);

// dtensor::Error messages are written for programmers: a "dtensor: " prefix,
// a "[check `...` failed at file:line]" suffix, and for parse errors the text
// with a caret under the bad character on lines of their own. The tools'
// rule is one line on stderr, so this keeps the words and drops the source
// location and the caret line (the message already says "at column N").
std::string one_line(std::string_view message);

// Left-aligned columns separated by two spaces; the last column is not
// padded, so no line ends in white space.
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string render() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace dtensor_explain
