// A thread that runs the loop for a blocking call (loop_owner.hpp) is an
// application thread: a write to a closed peer must never raise SIGPIPE
// there (its default action ends the process, this test program included).

#include "transport/socket_write.hpp"

#include "take_loop.hpp"
#include "transport/event_loop.hpp"

#include <doctest/doctest.h>

#include <uv.h>

#include <chrono>
#include <csignal>
#include <optional>
#include <thread>

#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace std::chrono_literals;
using redsync::detail::event_loop;

namespace {

// SIGPIPE at its default action, unblocked, for the test's duration.
struct default_sigpipe {
  struct sigaction old {};
  sigset_t old_mask{};
  default_sigpipe() {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGPIPE, &dfl, &old);
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_UNBLOCK, &pipe, &old_mask);
  }
  ~default_sigpipe() {
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    sigaction(SIGPIPE, &old, nullptr);
  }
};

bool sigpipe_in(int how_pending_or_mask) {
  sigset_t set;
  sigemptyset(&set);
  if (how_pending_or_mask == 0) {
    sigpending(&set);
  } else {
    pthread_sigmask(SIG_BLOCK, nullptr, &set);
  }
  return sigismember(&set, SIGPIPE) == 1;
}

// A connected socket whose peer has closed.
int closed_peer() {
  int sv[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  ::close(sv[1]);
  return sv[0];
}

}  // namespace

TEST_CASE("an immediate write to a closed peer fails with EPIPE and raises no SIGPIPE") {
  default_sigpipe dfl;
  uv_loop_t loop;
  REQUIRE(uv_loop_init(&loop) == 0);
  uv_pipe_t pipe;
  REQUIRE(uv_pipe_init(&loop, &pipe, 0) == 0);
  REQUIRE(uv_pipe_open(&pipe, closed_peer()) == 0);
  char data[] = "PING\r\n";
  uv_buf_t buf = uv_buf_init(data, sizeof data - 1);
  CHECK(redsync::detail::try_write_nosignal(reinterpret_cast<uv_stream_t*>(&pipe), &buf, 1) == UV_EPIPE);
  CHECK_FALSE(sigpipe_in(0));
  uv_close(reinterpret_cast<uv_handle_t*>(&pipe), nullptr);
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(uv_loop_close(&loop) == 0);
}

TEST_CASE("a borrower shielded for a queued write takes the SIGPIPE it raised and gets its mask back") {
  default_sigpipe dfl;
  event_loop loop(nullptr);
  std::optional<event_loop::borrow> lent;
  redsync::test::take_loop(loop, lent);
  REQUIRE(lent.has_value());
  CHECK(loop.on_loop_thread());
  CHECK_FALSE(sigpipe_in(1));

  redsync::detail::queued_write_started();  // as before a uv_write
  CHECK(sigpipe_in(1));                     // shielded
  const int fd = closed_peer();
  CHECK(::write(fd, "x", 1) == -1);  // raises SIGPIPE, held back by the mask
  CHECK(errno == EPIPE);
  CHECK(sigpipe_in(0));
  redsync::detail::queued_write_finished();
  ::close(fd);

  lent.reset();  // gives the loop back: a SIGPIPE left pending would now end us
  CHECK_FALSE(loop.on_loop_thread());
  CHECK_FALSE(sigpipe_in(0));
  CHECK_FALSE(sigpipe_in(1));
}
