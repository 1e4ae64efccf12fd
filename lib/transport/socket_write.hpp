#pragma once

// Writing to a connected libuv stream from whichever thread runs the loop.
//
// Since a caller thread may run the loop (loop_owner.hpp), a write to a
// socket whose peer has closed must not raise SIGPIPE there: application
// threads do not block it, and its default action ends the process. So the
// immediate write is a sendmsg with MSG_NOSIGNAL (in place of uv_try_write,
// with the same contract), and a write libuv must finish later (uv_write,
// when the kernel did not take everything) first shields the calling
// thread (shield_sigpipe).

#include <uv.h>

namespace redsync::detail {

// As uv_try_write: the bytes the kernel took (possibly fewer than given),
// UV_EAGAIN when it took none or earlier uv_writes are still queued on the
// stream (order), or a negative libuv error. Never raises SIGPIPE.
int try_write_nosignal(uv_stream_t* stream, const uv_buf_t* bufs, unsigned int nbufs);

// Around each uv_write: libuv may write from this thread at once, or from
// whichever thread runs a later turn of the loop, until its callback. While
// any such write is pending (in any loop of the process: a cheap,
// conservative count), a borrowing caller blocks SIGPIPE for its turn
// (loop_owner takes a pending one before restoring its mask); the loop's
// own thread blocks every signal already.
void queued_write_started();
void queued_write_finished();
bool queued_writes_pending();

}  // namespace redsync::detail
