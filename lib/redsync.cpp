// redsync::Redsync: validates the options, owns the engine, makes mutexes.

#include "redlock/engine/engine.hpp"
#include "redlock/mutex/mutex_state.hpp"
#include "redlock/options_check.hpp"
#include "redlock/scripts/cluster_keys.hpp"
#include "redlock/semaphore/semaphore_quorum.hpp"
#include "redlock/semaphore/semaphore_state.hpp"

#include <redsync/redsync.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <string_view>

namespace redsync {

namespace {

// Each URI is a node, or a whole Redis Cluster (docs/cluster.md).
std::vector<detail::member_spec> parse_all(const std::vector<std::string>& uris) {
  std::vector<detail::member_spec> members;
  members.reserve(uris.size());
  for (const auto& u : uris) {
    member_options member = member_options::parse(u);
    if (member.cluster)
      members.push_back({{}, std::move(member.seeds)});
    else
      members.push_back({std::move(member.seeds.front()), {}});
  }
  return members;
}

}  // namespace

Redsync::Redsync(const std::vector<std::string>& node_uris, redsync_options options)
    : engine_(std::make_shared<detail::engine>(parse_all(node_uris), options)) {}

Redsync::Redsync(std::initializer_list<std::string_view> node_uris, redsync_options options)
    : Redsync(std::vector<std::string>(node_uris.begin(), node_uris.end()), std::move(options)) {}

Redsync::Redsync(std::vector<node_options> nodes, redsync_options options)
    : engine_(std::make_shared<detail::engine>(std::move(nodes), options)) {}

Redsync::~Redsync() {
  detail::engine::destroy(std::move(engine_));
}

Mutex Redsync::new_mutex(std::string name, mutex_options options) {
  detail::check_mutex_options(name, options);
  engine_->note_expiry(options.expiry);
  std::vector<std::string> names;
  names.push_back(std::move(name));
  return Mutex(std::make_shared<detail::mutex_state>(*engine_, std::move(names), std::move(options)));
}

RWMutex Redsync::new_rw_mutex(std::string name, mutex_options options) {
  detail::check_mutex_options(name, options);
  engine_->note_expiry(options.expiry);
  std::vector<std::string> names{std::move(name)};
  Mutex writer(std::make_shared<detail::mutex_state>(*engine_, names, options));
  Mutex reader(std::make_shared<detail::mutex_state>(*engine_, std::move(names), std::move(options),
                                                     detail::hold_kind::shared));
  return RWMutex(std::move(writer), std::move(reader));
}

Mutex Redsync::new_multi_mutex(std::vector<std::string> names, mutex_options options) {
  if (names.empty()) throw config_error("new_multi_mutex: names is empty; give at least one name");
  std::set<std::string_view> seen;
  for (const auto& n : names) {
    detail::check_mutex_options(n, options);
    if (!seen.insert(n).second)
      throw config_error(fmt::format("new_multi_mutex: name \"{}\" is given twice", n));
  }
  if (engine_->has_cluster_members()) {
    // On a cluster member `a` and `{a}` are one key (docs/cluster.md): the
    // lock would SET it twice in one call and never win there.
    std::map<std::string, std::string_view> by_key;
    for (const auto& n : names) {
      const auto [it, fresh] = by_key.emplace(detail::cluster_lock_key(n), n);
      if (!fresh)
        throw config_error(
            fmt::format("new_multi_mutex: names \"{}\" and \"{}\" are the same key \"{}\" on a cluster "
                        "member; give one of them",
                        it->second, n, it->first));
    }
  }
  engine_->note_expiry(options.expiry);
  // One lock whatever order the names come in: {a, b} and {b, a} must take
  // the same keys, lines and connection in the same order.
  std::sort(names.begin(), names.end());
  return Mutex(std::make_shared<detail::mutex_state>(*engine_, std::move(names), std::move(options)));
}

Semaphore Redsync::new_semaphore(std::string name, int permits, semaphore_options options) {
  detail::check_semaphore_options(name, options);
  const std::size_t q = detail::checked_semaphore_quorum(engine_->size(), permits, options.quorum);
  // The restart guard's window and the repair delay cover the permits' expiry too.
  engine_->note_expiry(options.expiry);
  return Semaphore(
      std::make_shared<detail::semaphore_state>(*engine_, std::move(name), permits, q, std::move(options)));
}

std::size_t Redsync::node_count() const noexcept {
  return engine_->size();
}
std::size_t Redsync::quorum() const noexcept {
  return engine_->quorum();
}
std::vector<std::string> Redsync::addresses() const {
  return engine_->addresses();
}
stats_snapshot Redsync::stats() const {
  return engine_->telemetry().snapshot();
}

}  // namespace redsync
