// Writes that never raise SIGPIPE on a caller thread (socket_write.hpp).

#include "transport/socket_write.hpp"

#include "transport/loop_owner.hpp"

#include <atomic>
#include <cerrno>
#include <climits>

#include <sys/socket.h>
#include <sys/uio.h>

namespace redsync::detail {

// libuv documents uv_buf_t as laid out like struct iovec on Unix.
static_assert(sizeof(uv_buf_t) == sizeof(iovec));

int try_write_nosignal(uv_stream_t* stream, const uv_buf_t* bufs, unsigned int nbufs) {
  if (uv_stream_get_write_queue_size(stream) > 0) return UV_EAGAIN;  // keep the order
  uv_os_fd_t fd = -1;
  if (int rc = uv_fileno(reinterpret_cast<uv_handle_t*>(stream), &fd); rc != 0) return rc;
  msghdr msg{};
  msg.msg_iov = reinterpret_cast<iovec*>(const_cast<uv_buf_t*>(bufs));
  msg.msg_iovlen = nbufs < IOV_MAX ? nbufs : IOV_MAX;  // the rest: a partial write
  ssize_t n = 0;
  do {
    n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n >= 0) return static_cast<int>(n);
  return errno == EAGAIN || errno == EWOULDBLOCK ? UV_EAGAIN : -errno;
}

namespace {
std::atomic<int> queued_writes{0};
}  // namespace

void queued_write_started() {
  queued_writes.fetch_add(1, std::memory_order_relaxed);
  loop_owner::shield_borrower_from_sigpipe();
}

void queued_write_finished() {
  queued_writes.fetch_sub(1, std::memory_order_relaxed);
}

bool queued_writes_pending() {
  return queued_writes.load(std::memory_order_relaxed) > 0;
}

}  // namespace redsync::detail
