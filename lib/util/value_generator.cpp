// Lock values from the OS CSPRNG.

#include "util/value_generator.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <system_error>

namespace redsync::detail {
namespace {

[[noreturn]] void throw_errno(int err, const char* what) {
  throw std::system_error(err, std::generic_category(), what);
}

// Set once getrandom(2) has failed with something other than EINTR (ENOSYS
// on kernels before 3.17, EPERM under some seccomp filters), so later calls
// go straight to the fallback instead of failing a syscall every time.
std::atomic<bool> getrandom_unusable{false};

// Tries getrandom(2); false (with nothing promised about `out`) when it
// cannot be used.
bool fill_from_getrandom(std::span<unsigned char> out) {
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::getrandom(out.data() + done, out.size() - done, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

struct opened_file {
  int fd = -1;
  int error = 0;  // errno of the failed open, when fd < 0
};

// The /dev/urandom descriptor, opened on first use and deliberately never
// closed: closing it in a static destructor would race with threads still
// making values during exit.
const opened_file& urandom() {
  static const opened_file file = [] {
    const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    return opened_file{fd, fd < 0 ? errno : 0};
  }();
  return file;
}

}  // namespace

void fill_from_urandom(std::span<unsigned char> out) {
  const opened_file& file = urandom();
  if (file.fd < 0) throw_errno(file.error, "cannot open /dev/urandom");
  const int fd = file.fd;
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, "cannot read /dev/urandom");
    }
    if (n == 0) throw_errno(EIO, "unexpected end of /dev/urandom");
    done += static_cast<std::size_t>(n);
  }
}

void fill_random(std::span<unsigned char> out) {
  if (!getrandom_unusable.load(std::memory_order_relaxed)) {
    if (fill_from_getrandom(out)) return;
    getrandom_unusable.store(true, std::memory_order_relaxed);
  }
  fill_from_urandom(out);
}

std::string random_value() {
  std::array<unsigned char, 16> bytes{};
  fill_random(bytes);
  return base64_encode(bytes);
}

std::string base64_encode(std::span<const unsigned char> bytes) {
  static constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const unsigned group = unsigned{bytes[i]} << 16 | unsigned{bytes[i + 1]} << 8 | unsigned{bytes[i + 2]};
    out += alphabet[group >> 18 & 0x3F];
    out += alphabet[group >> 12 & 0x3F];
    out += alphabet[group >> 6 & 0x3F];
    out += alphabet[group & 0x3F];
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    const unsigned group = unsigned{bytes[i]} << 16 | (rest == 2 ? unsigned{bytes[i + 1]} << 8 : 0U);
    out += alphabet[group >> 18 & 0x3F];
    out += alphabet[group >> 12 & 0x3F];
    out += rest == 2 ? alphabet[group >> 6 & 0x3F] : '=';
    out += '=';
  }
  return out;
}

}  // namespace redsync::detail
