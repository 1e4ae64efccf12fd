#include "util/value_generator.hpp"

#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <cstddef>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <utility>

using redsync::detail::base64_encode;
using redsync::detail::random_value;

namespace {

std::string b64(std::string_view s) {
  return base64_encode({reinterpret_cast<const unsigned char*>(s.data()), s.size()});
}

constexpr std::string_view alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

TEST_CASE("base64_encode matches the RFC 4648 test vectors") {
  CHECK(b64("") == "");
  CHECK(b64("f") == "Zg==");
  CHECK(b64("fo") == "Zm8=");
  CHECK(b64("foo") == "Zm9v");
  CHECK(b64("foob") == "Zm9vYg==");
  CHECK(b64("fooba") == "Zm9vYmE=");
  CHECK(b64("foobar") == "Zm9vYmFy");
}

TEST_CASE("base64_encode uses '+' and '/' for the last two digits") {
  const std::array<unsigned char, 3> high{0xFB, 0xEF, 0xFF};
  CHECK(base64_encode(high) == "++//");
  const std::array<unsigned char, 3> zero{0, 0, 0};
  CHECK(base64_encode(zero) == "AAAA");
}

TEST_CASE("100000 random values are distinct 24-character base64 strings") {
  constexpr std::size_t count = 100'000;
  std::unordered_set<std::string> seen;
  seen.reserve(count);
  std::size_t malformed = 0;
  for (std::size_t i = 0; i < count; ++i) {
    std::string v = random_value();
    const bool ok = v.size() == 24 && v.ends_with("==") && v.find_first_not_of(alphabet) == 22;
    if (!ok) {
      ++malformed;
      CAPTURE(v);
      CHECK(ok);  // reports the first few bad values, not 100000 lines
      if (malformed > 3) break;
    }
    seen.insert(std::move(v));
  }
  CHECK(malformed == 0);
  CHECK(seen.size() == count);
}

TEST_CASE("the /dev/urandom fallback fills the whole buffer") {
  // 1000 zero bytes staying zero after a fill has probability 2^-8000.
  std::array<unsigned char, 1000> buffer{};
  redsync::detail::fill_from_urandom(buffer);
  std::size_t zeros = 0;
  for (unsigned char b : buffer) zeros += b == 0 ? 1 : 0;
  CHECK(zeros < 50);
}

TEST_CASE("fill_random fills buffers larger than one getrandom call may return") {
  // getrandom may return short reads above 256 bytes; the loop must cover them.
  std::array<unsigned char, 1 << 16> buffer{};
  redsync::detail::fill_random(buffer);
  std::size_t zeros_at_end = 0;
  for (std::size_t i = buffer.size() - 1000; i < buffer.size(); ++i) {
    zeros_at_end += buffer[i] == 0 ? 1 : 0;
  }
  CHECK(zeros_at_end < 50);
}

TEST_CASE("a forked child never repeats its parent's next values (the buffered random bytes are wiped)") {
  // The parent has drawn from its buffer, so bytes are left in it; a child
  // that inherited them would make the parent's next values too.
  (void)random_value();
  int out[2];
  REQUIRE(::pipe(out) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::string values;
    for (int i = 0; i < 8; ++i) values += random_value();
    const auto wrote = ::write(out[1], values.data(), values.size());
    ::_exit(wrote == static_cast<ssize_t>(values.size()) ? 0 : 1);
  }
  ::close(out[1]);
  std::string parent;
  for (int i = 0; i < 8; ++i) parent += random_value();
  std::string from_child(8 * 24, '\0');
  std::size_t got = 0;
  while (got < from_child.size()) {
    const auto n = ::read(out[0], from_child.data() + got, from_child.size() - got);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(out[0]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  REQUIRE(got == from_child.size());
  std::unordered_set<std::string> seen;
  for (std::size_t i = 0; i < 8; ++i) {
    seen.insert(parent.substr(i * 24, 24));
    seen.insert(from_child.substr(i * 24, 24));
  }
  CHECK(seen.size() == 16);
}

namespace {

// Set by the destructor of a thread_local made before the thread's first
// lock value, so destroyed after that thread's buffer of random bytes.
std::string made_at_thread_exit;

struct makes_a_value_at_exit {
  ~makes_a_value_at_exit() { made_at_thread_exit = random_value(); }
};

}  // namespace

TEST_CASE("a lock value can still be made while the thread exits (after its buffered bytes are gone)") {
  // Thread-local destructors run in reverse order of construction: one made
  // before the thread's first value (an application's session object whose
  // destructor takes a lock one last time) runs after the buffer's. A fork
  // keeps a crash from taking the test program with it.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::signal(SIGSEGV, SIG_DFL);  // not the test framework's handler: die of it
    std::thread t([] {
      thread_local makes_a_value_at_exit guard;
      (void)&guard;
      (void)random_value();
    });
    t.join();
    ::_exit(made_at_thread_exit.size() == 24 ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  if (WIFSIGNALED(status)) MESSAGE("the child died of signal " << WTERMSIG(status));
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
}
