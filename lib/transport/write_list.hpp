#pragma once

// The connections of one libuv loop that have commands queued since their
// last write. The event loop writes them all at the end of each batch of
// posted tasks and right before it polls, so a fan-out posted from a
// caller's thread goes out in the same wake-up (connection::send lists its
// connection here; its idle handle is the fallback).
//
// One list per loop, not per thread: an application may run its loop from
// one thread and later another, and a list that belonged to the first
// thread would keep connections the second one closed. Connections find
// their loop's list when they are made, and share its ownership with the
// event_loop, so neither outlives the other's use of it. Only the thread
// running the loop touches a list's contents.

#include <memory>
#include <vector>

struct uv_loop_s;

namespace redsync::detail {

class connection;

class write_list {
 public:
  // The list for `loop`, made and registered for it (by its event_loop);
  // unregistered when the last owner lets go.
  static std::shared_ptr<write_list> create(uv_loop_s* loop);
  // The registered list for `loop`, or null (connections then write from
  // their idle handle only).
  static std::shared_ptr<write_list> find(uv_loop_s* loop);

  explicit write_list(uv_loop_s* loop) : loop_(loop) {}
  ~write_list();
  write_list(const write_list&) = delete;
  write_list& operator=(const write_list&) = delete;

  void add(connection* c) { items_.push_back(c); }
  void remove(connection* c);
  // Writes every listed connection's queued commands. A write may run
  // callbacks (a dropped connection fails its commands) that send more: they
  // are listed anew. Every connection listed stays alive meanwhile (it is
  // freed only from its handles' close callbacks, on a later turn of the
  // loop), and one that was closed took itself off the list.
  void write_all();

 private:
  uv_loop_s* const loop_;
  std::vector<connection*> items_;
  std::vector<connection*> spare_;  // write_all's scratch, kept for its capacity
};

}  // namespace redsync::detail
