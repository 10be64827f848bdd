// Copyright 2026 The dtensor Authors.
//
// base/check.h (<dtensor/base/check.h>): the one way dtensor reports bad input.
//
// Every argument check in the library goes through `DTENSOR_CHECK`. The
// message pieces are streamed only when the check fails, so a check on a hot
// path costs one branch. Messages follow one convention: name the argument or
// call, then say what was expected and what was found, e.g.
//
//   DTENSOR_CHECK(output.dtype() == input.dtype(),
//                 "all_gather: output dtype: expected ", input.dtype(),
//                 ", found ", output.dtype());
//
// Failures throw `dtensor::Error` (a std::runtime_error), so callers can catch
// dtensor's errors apart from others.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace dtensor {

// The exception type of every error dtensor raises.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace base_internal {

template <typename... Pieces>
[[noreturn]] void throw_check_failure(const char* condition, const char* file, int line,
                                      const Pieces&... pieces) {
  std::ostringstream message;
  message << "dtensor: ";
  (message << ... << pieces);
  message << " [check `" << condition << "` failed at " << file << ":" << line << "]";
  throw Error(message.str());
}

}  // namespace base_internal
}  // namespace dtensor

// Throws dtensor::Error with the streamed pieces when `condition` is false.
#define DTENSOR_CHECK(condition, ...)                                                             \
  do {                                                                                            \
    if (__builtin_expect(!(condition), 0)) {                                                      \
      ::dtensor::base_internal::throw_check_failure(#condition, __FILE__, __LINE__, __VA_ARGS__); \
    }                                                                                             \
  } while (0)
