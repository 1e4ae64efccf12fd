#pragma once

// Validation of the option structs, done once when a Redsync or Mutex is
// built. Each check throws config_error whose message names the field and
// the bad value (never a password), e.g.
// `mutex_options.tries = 0: must be at least 1`.

#include <redsync/options.hpp>
#include <redsync/semaphore.hpp>

#include <string_view>

namespace redsync::detail {

/// Port in 1..65535, db >= 0, a host or a unix_path, and a password whenever
/// a username is given.
void check_node_options(const node_options& node);

/// pool_size in 1..1024, connect_timeout > 0, 0 < backoff min <= backoff max,
/// script_mode one of the enum's values.
void check_redsync_options(const redsync_options& options);

/// Non-empty name; expiry in (0, max_expiry]; tries >= 1; a fixed
/// retry_delay in [0, 24 h]; drift_factor in
/// [0, 1); timeout_factor in (0, 1); a fixed value non-empty and not combined
/// with value_generator; auto_extend_interval in [0, expiry), max_hold and
/// max_extensions not negative; and expiry > drift + per-node command timeout,
/// so an acquisition that waits for the slowest node can still leave some
/// validity; durable_replicas in 0..1000, durable_wait_timeout only with
/// durable_replicas > 0, >= 0 and below the per-node command timeout (or 0,
/// which needs a per-node timeout of at least 2 ms).
void check_mutex_options(std::string_view name, const mutex_options& options);

/// Non-empty name; expiry, tries, retry_delay, drift_factor, timeout_factor and the
/// auto-extension fields as for a mutex. (The permits and the quorum: checked_semaphore_quorum.)
void check_semaphore_options(std::string_view name, const semaphore_options& options);

}  // namespace redsync::detail
