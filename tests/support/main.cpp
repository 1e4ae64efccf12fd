// The one doctest main of every test program; it owns the harness lifetime.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <csignal>

#include "redis_server.hpp"

int main(int argc, char** argv) {
  // Writing to a killed or paused server must be an error return, not a
  // process-killing signal.
  std::signal(SIGPIPE, SIG_IGN);
  doctest::Context context(argc, argv);
  int result = context.run();
  // Servers are RAII-owned; this only catches ones leaked by a test (e.g. static).
  redsync::test::kill_all_servers();
  return result;
}
