#include "wakeups.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <system_error>

namespace redsync::cli {
namespace {

constexpr int handled[] = {SIGCHLD, SIGINT,   SIGTERM, SIGHUP,  SIGQUIT, SIGUSR1, SIGUSR2,
                           SIGALRM, SIGWINCH, SIGCONT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU};

sigset_t handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : handled) sigaddset(&set, sig);
  return set;
}

}  // namespace

signal_role role_of(int sig) noexcept {
  switch (sig) {
    case SIGCHLD: return signal_role::child;
    case SIGWINCH:
    case SIGCONT: return signal_role::forward;
    case SIGPIPE:
    case SIGTSTP:
    case SIGTTIN:
    case SIGTTOU: return signal_role::ignore;
    default: return signal_role::forward_or_interrupt;
  }
}

signal_channel::signal_channel() {
  const sigset_t set = handled_signals();
  if (int rc = pthread_sigmask(SIG_BLOCK, &set, nullptr); rc != 0) {
    throw std::system_error(rc, std::generic_category(), "pthread_sigmask");
  }
  fd_ = ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "signalfd");
}

signal_channel::~signal_channel() {
  if (fd_ >= 0) ::close(fd_);
}

std::optional<received_signal> signal_channel::read() const noexcept {
  signalfd_siginfo info{};
  ssize_t n;
  do {
    n = ::read(fd_, &info, sizeof info);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof info)) return std::nullopt;
  return received_signal{static_cast<int>(info.ssi_signo)};
}

notifier::notifier() {
  fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
}

notifier::~notifier() {
  if (fd_ >= 0) ::close(fd_);
}

void notifier::notify() const noexcept {
  const std::uint64_t one = 1;
  ssize_t n;
  do {
    n = ::write(fd_, &one, sizeof one);
  } while (n < 0 && errno == EINTR);
}

void notifier::drain() const noexcept {
  std::uint64_t count = 0;
  ssize_t n;
  do {
    n = ::read(fd_, &count, sizeof count);
  } while (n < 0 && errno == EINTR);
}

readiness wait_readable(int a, int b, std::optional<std::chrono::milliseconds> timeout) {
  pollfd fds[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
  const int ms = timeout ? static_cast<int>(std::max<std::int64_t>(0, timeout->count())) : -1;
  int rc;
  do {
    rc = ::poll(fds, 2, ms);
  } while (rc < 0 && errno == EINTR);
  readiness r;
  if (rc > 0) {
    r.a = a >= 0 && (fds[0].revents & (POLLIN | POLLERR | POLLHUP)) != 0;
    r.b = b >= 0 && (fds[1].revents & (POLLIN | POLLERR | POLLHUP)) != 0;
  }
  return r;
}

}  // namespace redsync::cli
