// A program using an installed redsync, built by tests/install/run through
// pkg-config (shared and static), CMake's find_package and a Meson
// subproject. It needs no server: it parses a node URI, has a bad option
// rejected with config_error (an exception thrown inside the library and
// caught here), and makes a Redsync and a Mutex without locking (which pulls
// the engine, libuv and hiredis into a static link). Exits 0 when all agree.
#include <redsync/redsync.hpp>

#include <chrono>
#include <iostream>
#include <system_error>

int main() {
  using namespace std::chrono_literals;

  const redsync::node_options node = redsync::node_options::parse("redis://app:secret@127.0.0.1:7001/2");
  std::cout << "node " << node.address() << ", db " << node.db << ", user " << node.username << "\n";
  if (node.host != "127.0.0.1" || node.port != 7001 || node.db != 2 || node.password != "secret") return 1;

  try {
    redsync::Redsync rejected({"redis://127.0.0.1:7001"}, redsync::redsync_options{.pool_size = 0});
    std::cerr << "consumer: pool_size = 0 was accepted\n";
    return 1;
  } catch (const redsync::config_error& e) {
    std::cout << "config_error: " << e.what() << "\n";
  }

  // Nothing is sent to the nodes until a lock call, so none needs to be up.
  redsync::Redsync rs({"redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"});
  redsync::Mutex mutex = rs.new_mutex("install-test", {.expiry = 2s, .tries = 1});
  const std::error_code busy = redsync::errc::busy;
  std::cout << "mutex " << mutex.name() << ", held " << std::boolalpha << mutex.held() << "; "
            << busy.category().name() << ": " << busy.message() << "\n";
  return mutex.held() || mutex.name() != "install-test" ? 1 : 0;
}
