#pragma once

/// \file
/// `redsync::semaphore_options`: how a `Semaphore` (semaphore.hpp) acquires,
/// extends and releases its permits.

#include <redsync/error.hpp>
#include <redsync/retries.hpp>

#include <chrono>
#include <cstddef>
#include <functional>

namespace redsync {

/// How a `Semaphore` acquires, extends and releases its permits. Every
/// option, its type, default and meaning: docs/options.md.
///
/// Designated initializers must name the fields in the order they are
/// declared here (GCC refuses any other order, Clang warns):
/// `expiry`, `tries`, `retry_delay`, `drift_factor`, `timeout_factor`,
/// `quorum`, `auto_extend`, `auto_extend_interval`, `max_hold`,
/// `max_extensions`, `on_lost`.
struct semaphore_options {
  /// Permit lifetime on each node. Default 8 s. Must exceed drift + per-node
  /// command timeout.
  std::chrono::milliseconds expiry = std::chrono::seconds{8};
  /// Acquisition tries made by `acquire`, >= 1. Default 32. A try is
  /// counted once per retry delay: attempts made early on a wake-up are free.
  /// `redsync::unlimited_tries`: `acquire` waits until it gets a permit, or
  /// its context ends it. `try_acquire` makes 1.
  int tries = 32;
  /// Delay before try `try_number + 1` (from 1): a duration (`100ms`, in
  /// [0, 24 h]) or a callable `int try_number -> std::chrono::milliseconds`
  /// (`retry_delay_option`, retries.hpp). Default: uniformly random in
  /// [50 ms, 250 ms).
  retry_delay_option retry_delay{};
  /// drift = expiry * drift_factor + 2 ms. In [0, 1). Default 0.01.
  double drift_factor = 0.01;
  /// Per-node command timeout = expiry * timeout_factor. In (0, 1). Default 0.05.
  double timeout_factor = 0.05;
  /// Nodes that must grant a permit. Default 0 = the least safe quorum,
  /// floor(k*N/(k+1)) + 1 (see `Semaphore::quorum`). A value below it would
  /// allow more than k holders and is refused (`config_error` naming the
  /// value and the bound), as is one above N.
  std::size_t quorum = 0;

  // -- holding safely (as `mutex_options`) -----------------------------------

  /// Extend each permit automatically on the loop while it is held (a
  /// watchdog per permit). Default false. If an extension misses its quorum
  /// it is retried while the local validity leaves room for one; if none can
  /// land before `permit::until()`, or so many nodes say the permit is gone
  /// that no quorum of nodes can still hold it, the permit is lost:
  /// `on_lost` runs once and `permit::lost()` turns true. Stops when the
  /// permit's release starts.
  bool auto_extend = false;
  /// Time between automatic extensions. Default 0 = expiry / 3. Must be
  /// less than `expiry`.
  std::chrono::milliseconds auto_extend_interval = std::chrono::milliseconds{0};
  /// Stop auto-extending once a permit has been held this long since it was
  /// granted (it then expires and is reported lost). Default 0 = no cap.
  std::chrono::milliseconds max_hold = std::chrono::milliseconds{0};
  /// Stop auto-extending a permit after this many extensions. Default 0 =
  /// no cap.
  int max_extensions = 0;
  /// Called once per lost permit, on the loop thread, when a held permit is
  /// lost under auto-extension. Its `result::reason` says why. Must not
  /// block. Shared by every permit of the semaphore: to know which one was
  /// lost, watch each permit's `lost_token()`, or an observer's
  /// `on_permit_lost` (it names the permit).
  std::function<void(const result&)> on_lost{};
};

}  // namespace redsync
