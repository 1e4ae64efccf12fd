// Precompiled for every source of redis_tests (cpp_pch in ../meson.build):
// the headers nearly all of them include. Parsing doctest, {fmt}, the public
// API and the standard library once instead of forty times is about a
// quarter of the suite's compile time, which CI pays three times. Only
// headers that change rarely belong here: each change rebuilds the suite.

#include <doctest/doctest.h>
#include <redsync/redsync.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "wait.hpp"
