// Copyright 2026 The dtensor Authors.
//
// tests/support/expect_error.h: asserts that a call throws dtensor::Error
// whose message contains a given piece, so tests pin what the error says and
// not only that something was thrown.
#pragma once

#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include <dtensor/base/check.h>

#define DTENSOR_EXPECT_ERROR(statement, needle)                                 \
  do {                                                                          \
    try {                                                                       \
      statement;                                                                \
      ADD_FAILURE() << "expected dtensor::Error containing \"" << (needle)      \
                    << "\" from: " #statement;                                  \
    } catch (const ::dtensor::Error& error) {                                   \
      EXPECT_NE(std::string(error.what()).find(needle), std::string::npos)      \
          << "message \"" << error.what() << "\" lacks \"" << (needle) << "\""; \
    }                                                                           \
  } while (0)
