// Lock values from the OS CSPRNG.

#include "util/value_generator.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
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

namespace {

// Random bytes drawn from the OS a page at a time, so a lock value costs a
// system call once in 250 values rather than each time. The page is the
// thread's own and is marked MADV_WIPEONFORK: a forked child finds it
// zeroed, that is empty, and draws fresh bytes instead of repeating its
// parent's values. Where the kernel cannot wipe on fork (before Linux
// 4.14), nothing is buffered. Bytes are zeroed as they are handed out.
//
// Set when the thread's pool is destroyed: a value made after that (by a
// thread_local destroyed later, or on the main thread by a static destructor
// or an atexit handler, which run after its thread_locals) is drawn
// straight from the OS. Trivially destructible, so readable all along.
thread_local bool pool_destroyed = false;

class random_pool {
 public:
  random_pool() {
    void* p = ::mmap(nullptr, page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    if (::madvise(p, page_size, MADV_WIPEONFORK) != 0) {
      ::munmap(p, page_size);
      return;
    }
    page_ = static_cast<page*>(p);
  }
  ~random_pool() {
    pool_destroyed = true;
    if (page_ != nullptr) ::munmap(page_, page_size);
  }
  random_pool(const random_pool&) = delete;
  random_pool& operator=(const random_pool&) = delete;

  void take(std::span<unsigned char> out) {
    if (page_ == nullptr || out.size() > sizeof page_->bytes) return fill_random(out);
    if (page_->left < out.size()) {
      fill_random(page_->bytes);
      page_->left = sizeof page_->bytes;
    }
    unsigned char* from = page_->bytes + (sizeof page_->bytes - page_->left);
    std::memcpy(out.data(), from, out.size());
    std::memset(from, 0, out.size());
    page_->left -= out.size();
  }

 private:
  static constexpr std::size_t page_size = 4096;
  struct page {
    std::size_t left;  // unused bytes at the end of `bytes`; 0 (empty) after a fork
    unsigned char bytes[page_size - sizeof(std::size_t)];
  };
  static_assert(sizeof(page) == page_size);
  page* page_ = nullptr;
};

}  // namespace

std::string random_value() {
  std::array<unsigned char, 16> bytes{};
  if (pool_destroyed) {
    fill_random(bytes);
  } else {
    thread_local random_pool pool;
    pool.take(bytes);
  }
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
