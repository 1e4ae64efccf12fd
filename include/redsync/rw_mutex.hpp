#pragma once

/// \file
/// `redsync::RWMutex`: a read-write lock over the nodes of a `Redsync`:
/// any number of readers of a name at once, or one writer.

#include <redsync/export.hpp>
#include <redsync/mutex.hpp>

#include <string>
#include <utility>

namespace redsync {

/// A read-write lock of `name()`: shared holds (readers) exclude exclusive
/// ones (writers), writers exclude each other. Made by
/// `Redsync::new_rw_mutex`; movable, not copyable. The `Redsync` must
/// outlive it.
///
/// It is two holders of one name, each a full `Mutex` with its own value,
/// token and auto-extension: `writer()` takes the name exclusively,
/// `reader()` takes a shared hold. Every `Mutex` call works on either
/// (context and result, async, futures, `guard`, Asio completion tokens,
/// `auto_extend` with its lost signal). The standard *SharedLockable*
/// members forward to them, so `std::unique_lock<RWMutex>` writes and
/// `std::shared_lock<RWMutex>` reads (`lock()` and `lock_shared()` throw
/// `lock_error` when the tries run out, as `Mutex::lock()` does).
///
/// How it holds (docs/api.md, "Read-write locks", has the argument and its
/// assumptions): each node grants a reader while no writer holds the name
/// there and no writer waits ahead of it in the name's waiting line, and a
/// writer while no live reader and no other writer holds it there; each
/// needs a majority of the nodes, so a reader's majority and a writer's
/// share a node, which granted only one of them. Readers and writers wait
/// in one line, served in arrival order, consecutive readers together:
/// neither starves the other.
///
/// Fencing: every grant takes the next value of the node's counter, so a
/// writer's token is greater than every token granted before it (readers'
/// included), and a reader's token is greater than every writer's before
/// it and less than every writer's after it: a resource that keeps the
/// highest writer token it saw can refuse a reader that came before it.
///
/// A `Mutex` of the same name (`new_mutex`) is a writer too: it and the
/// writers exclude each other and the readers. A `Semaphore` of the name
/// clashes with both (`errc::kind_clash`).
///
/// One `RWMutex` holds at most one shared hold at a time; give each
/// thread that reads its own (they are cheap), as for `Mutex`.
class REDSYNC_API RWMutex {
 public:
  RWMutex(RWMutex&& other) noexcept = default;
  /// Releases what this one holds (as the destructor does), then takes
  /// over `other`'s holders.
  RWMutex& operator=(RWMutex&& other) noexcept = default;
  RWMutex(const RWMutex&) = delete;
  RWMutex& operator=(const RWMutex&) = delete;
  /// Releases both holders in the background, as `Mutex`'s destructor.
  ~RWMutex() = default;

  /// The lock's name.
  const std::string& name() const noexcept { return writer_.name(); }

  /// The exclusive holder.
  Mutex& writer() noexcept { return writer_; }
  /// The shared holder.
  Mutex& reader() noexcept { return reader_; }

  // -- std::shared_mutex's names (SharedLockable) ------------------------------

  /// `writer().lock()`.
  void lock() { writer_.lock(); }
  /// `writer().try_lock()`.
  bool try_lock() { return writer_.try_lock(); }
  /// `writer().unlock()`.
  void unlock() noexcept { writer_.unlock(); }
  /// `reader().lock()`.
  void lock_shared() { reader_.lock(); }
  /// `reader().try_lock()`.
  bool try_lock_shared() { return reader_.try_lock(); }
  /// `reader().unlock()`.
  void unlock_shared() noexcept { reader_.unlock(); }

 private:
  friend class Redsync;
  RWMutex(Mutex writer, Mutex reader) noexcept : writer_(std::move(writer)), reader_(std::move(reader)) {}

  Mutex writer_;
  Mutex reader_;
};

}  // namespace redsync
