// Test helper for the unit tests of node URIs (node_options_test.cpp,
// util/redacted_uri_test.cpp): the message a URI is refused with.
#pragma once

#include <redsync/error.hpp>
#include <redsync/options.hpp>

#include <doctest/doctest.h>

#include <string>
#include <string_view>

namespace redsync::test {

/// The message of the config_error that parsing `uri` throws; fails the test
/// when nothing (or something else) is thrown.
inline std::string node_uri_error(std::string_view uri) {
  try {
    node_options::parse(uri);
  } catch (const config_error& e) {
    return e.what();
  }
  FAIL_CHECK("no config_error for \"", std::string(uri), "\"");
  return {};
}

}  // namespace redsync::test
