// Copyright 2026 The dtensor Authors.
#include <dtensor/spmd/types.h>

#include <c10/core/impl/LocalDispatchKeySet.h>

#include <algorithm>
#include <iterator>
#include <utility>

#include <dtensor/base/check.h>
#include <dtensor/spmd/type_table.h>
#include "absl/strings/str_join.h"

namespace dtensor::spmd {
namespace {

thread_local ScopedTypeCheck::State* tls_scope = nullptr;

int64_t dim_index(const DeviceMesh& mesh, std::string_view dim) {
  const std::vector<std::string>& names = mesh.dim_names();
  const auto it = std::find(names.begin(), names.end(), dim);
  return it == names.end() ? -1 : it - names.begin();
}

}  // namespace

struct ScopedTypeCheck::State {
  explicit State(DeviceMesh mesh) : table(std::move(mesh)) {}
  TypeTable table;
  State* previous = tls_scope;
  c10::impl::IncludeDispatchKeyGuard include{kTypeCheckKey};
};

ScopedTypeCheck::ScopedTypeCheck(DeviceMesh mesh)
    : state_(std::make_unique<State>(std::move(mesh))) {
  tls_scope = state_.get();
}

ScopedTypeCheck::~ScopedTypeCheck() { tls_scope = state_->previous; }

TypeTable* current_type_table() { return tls_scope == nullptr ? nullptr : &tls_scope->table; }

struct ScopedTypeCheckPause::State {
  explicit State(TypeTable& table) : pause(table) {}
  TypeTable::Pause pause;
};

ScopedTypeCheckPause::ScopedTypeCheckPause() {
  if (TypeTable* table = current_type_table()) state_ = std::make_unique<State>(*table);
}
ScopedTypeCheckPause::~ScopedTypeCheckPause() = default;

const char* type_letter(Type type) {
  switch (type) {
    case Type::kReplicate:
      return "R";
    case Type::kInvariant:
      return "I";
    case Type::kVarying:
      return "V";
    case Type::kPartial:
      return "P";
  }
  return "?";
}

std::string type_name(Type type) {
  static const char* const kNames[] = {"Replicate", "Invariant", "Varying", "Partial"};
  return std::string(kNames[static_cast<int>(type)]) + " (" + type_letter(type) + ")";
}

Types parse_types(std::string_view text) {
  Types types;
  const Type all[] = {Type::kReplicate, Type::kInvariant, Type::kVarying, Type::kPartial};
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t comma = std::min(text.find(',', begin), text.size());
    std::string_view letter = text.substr(begin, comma - begin);
    while (!letter.empty() && letter.front() == ' ') letter.remove_prefix(1);
    while (!letter.empty() && letter.back() == ' ') letter.remove_suffix(1);
    const auto found = std::find_if(std::begin(all), std::end(all),
                                    [&](Type type) { return letter == type_letter(type); });
    DTENSOR_CHECK(found != std::end(all), "spmd::parse_types: expected R, I, V or P per mesh dim, ",
                  "found \"", letter, "\" at position ", begin, " of \"", text, "\"");
    types.push_back(*found);
    begin = comma + 1;
  }
  return types;
}

bool type_checking() { return tls_scope != nullptr; }

const at::Tensor& set_types(const at::Tensor& x, Types types) {
  TypeTable* table = current_type_table();
  DTENSOR_CHECK(table != nullptr, "spmd::set_types: expected an active spmd::ScopedTypeCheck, ",
                "found none");
  table->set(x, std::move(types));
  return x;
}

std::optional<Types> types_of(const at::Tensor& x) {
  TypeTable* table = current_type_table();
  if (table == nullptr) return std::nullopt;
  const Types* types = table->find(x);
  return types == nullptr ? std::nullopt : std::optional<Types>(*types);
}

void assert_type(const at::Tensor& x, const std::map<std::string, Type>& expected) {
  TypeTable* table = current_type_table();
  if (table == nullptr) return;
  const Types* types = table->find(x);
  for (const auto& [dim, type] : expected) {
    const int64_t m = dim_index(table->mesh(), dim);
    DTENSOR_CHECK(m >= 0, "spmd::assert_type: expected a dim of ", table->mesh().to_string(),
                  ", found \"", dim, "\"");
    const Type found = types == nullptr ? Type::kReplicate : (*types)[m];
    DTENSOR_CHECK(found == type, "spmd::assert_type: over mesh dim \"", dim, "\" expected ",
                  type_name(type), ", found ", type_name(found));
  }
}

std::optional<Types> collective_result_types(const at::Tensor& x, std::string_view collective,
                                             std::string_view dim,
                                             const std::vector<Type>& accepted, Type produced) {
  TypeTable* table = current_type_table();
  if (table == nullptr) return std::nullopt;
  const int64_t m = dim_index(table->mesh(), dim);
  const Types* types = table->find(x);
  if (m < 0 || types == nullptr) return std::nullopt;
  const Type found = (*types)[m];
  if (std::find(accepted.begin(), accepted.end(), found) == accepted.end()) {
    std::vector<std::string> names;
    for (Type type : accepted) names.push_back(type_name(type));
    DTENSOR_CHECK(false, "spmd::", collective, " over mesh dim \"", dim, "\": expected an input ",
                  absl::StrJoin(names, " or "), ", found ", type_name(found));
  }
  Types result = *types;
  result[m] = produced;
  return result;
}

}  // namespace dtensor::spmd
