// The shared, fenced resource of the chaos clients (see the header).
#include "shared_resource.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace redsync::chaos {

namespace {

constexpr std::size_t header_size = 64;

std::uint64_t token_of(std::uint64_t state) {
  return state >> 32;
}
std::uint64_t counter_of(std::uint64_t state) {
  return state & 0xffff'ffffU;
}
std::uint64_t pack(std::uint64_t token, std::uint64_t counter) {
  return (token << 32) | (counter & 0xffff'ffffU);
}

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error("resource file " + path + ": " + what);
}

}  // namespace

shared_resource::shared_resource(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) fail(path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < header_size) {
    ::close(fd);
    fail(path, "too small for the header");
  }
  map_size_ = static_cast<std::size_t>(st.st_size);
  map_ = ::mmap(nullptr, map_size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    fail(path, std::string("mmap: ") + std::strerror(errno));
  }
  std::uint64_t header[3];
  std::memcpy(header, map_, sizeof header);
  if (header[0] != magic) fail(path, "not a chaos resource file (bad magic)");
  slots_ = static_cast<std::size_t>(header[1]);
  enforce_ = header[2] != 0;
  if (header_size + slots_ * sizeof(slot) > map_size_) fail(path, "shorter than its slot count says");
}

shared_resource::~shared_resource() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

shared_resource::slot& shared_resource::at(std::size_t i) {
  if (i >= slots_)
    throw std::out_of_range("resource slot " + std::to_string(i) + " of " + std::to_string(slots_));
  return static_cast<slot*>(static_cast<void*>(static_cast<char*>(map_) + header_size))[i];
}

shared_resource::previous_occupant shared_resource::enter(std::size_t i, std::uint64_t marker,
                                                          std::uint64_t pid) {
  previous_occupant previous;
  previous.pid = at(i).occupant_pid.exchange(pid);
  previous.marker = at(i).occupant.exchange(marker);
  return previous;
}

bool shared_resource::leave(std::size_t i, std::uint64_t marker) {
  return at(i).occupant.compare_exchange_strong(marker, 0);
}

shared_resource::touch_result shared_resource::touch(std::size_t i, std::uint64_t token) {
  auto& state = at(i).state;
  std::uint64_t seen = state.load();
  for (;;) {
    touch_result r;
    r.highest = token_of(seen);
    r.counter = counter_of(seen);
    r.stale = token <= r.highest;
    r.accepted = !r.stale || !enforce_;
    if (!r.accepted) return r;
    const std::uint64_t next = pack(r.stale ? r.highest : token, r.counter);
    if (next == seen || state.compare_exchange_weak(seen, next)) return r;
  }
}

shared_resource::write_result shared_resource::write(std::size_t i, std::uint64_t token,
                                                     std::uint64_t read_value) {
  auto& state = at(i).state;
  std::uint64_t seen = state.load();
  for (;;) {
    write_result r;
    r.highest = token_of(seen);
    r.counter_before = counter_of(seen);
    r.stale = token < r.highest;
    r.accepted = !r.stale || !enforce_;
    if (!r.accepted) return r;
    r.overwrote = r.counter_before != (read_value & 0xffff'ffffU);
    if (state.compare_exchange_weak(seen, pack(r.highest, read_value + 1))) return r;
  }
}

}  // namespace redsync::chaos
