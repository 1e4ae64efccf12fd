// The failovers between a cluster member's slot maps (master_changes.hpp).

#include "transport/master_changes.hpp"

#include <redsync/options.hpp>

#include <algorithm>

namespace redsync::detail {

std::vector<std::pair<std::string, std::string>> master_changes::adopt(const slot_map& m) {
  std::vector<std::string> now(m.masters.size());
  std::vector<std::int32_t> name_of(m.masters.size(), -1);
  for (std::size_t k = 0; k < m.masters.size(); ++k)
    now[k] = node_options{.host = m.masters[k].host, .port = m.masters[k].port}.address();
  std::vector<bool> serves(m.masters.size(), false);
  for (const std::int32_t o : m.owner)
    if (o != slot_map::no_master) serves[static_cast<std::size_t>(o)] = true;
  std::vector<std::string> serving;
  for (std::size_t k = 0; k < now.size(); ++k) {
    if (!serves[k]) continue;
    serving.push_back(now[k]);
    auto it = std::find(names_.begin(), names_.end(), now[k]);
    if (it == names_.end()) it = names_.insert(names_.end(), now[k]);
    name_of[k] = static_cast<std::int32_t>(it - names_.begin());
  }
  const auto has = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  std::vector<std::pair<std::string, std::string>> out;
  for (std::size_t s = 0; s < m.owner.size(); ++s) {
    const std::int32_t o = m.owner[s];
    if (o == slot_map::no_master) continue;
    const std::int32_t now_name = name_of[static_cast<std::size_t>(o)];
    const std::int32_t last = last_[s];
    last_[s] = now_name;
    if (last < 0 || last == now_name) continue;
    std::pair<std::string, std::string> change{names_[static_cast<std::size_t>(last)],
                                               names_[static_cast<std::size_t>(now_name)]};
    if (has(serving, change.first) || has(masters_, change.second) ||
        std::find(out.begin(), out.end(), change) != out.end())
      continue;
    out.push_back(std::move(change));
  }
  masters_ = std::move(serving);
  forget_unused_names();
  return out;
}

void master_changes::forget_unused_names() {
  // A name stays while some slot was last served by it: the current masters
  // and the last masters of slots nobody serves now. The others (masters
  // that left long ago, at addresses that may never come back) go, so a
  // long-lived router over masters that keep changing addresses keeps only
  // what it can still report a failover from.
  std::vector<std::int32_t> renamed(names_.size(), -1);
  for (const std::int32_t n : last_)
    if (n >= 0) renamed[static_cast<std::size_t>(n)] = 0;
  if (std::find(renamed.begin(), renamed.end(), -1) == renamed.end()) return;
  std::vector<std::string> kept;
  for (std::size_t k = 0; k < names_.size(); ++k) {
    if (renamed[k] < 0) continue;
    renamed[k] = static_cast<std::int32_t>(kept.size());
    kept.push_back(std::move(names_[k]));
  }
  for (std::int32_t& n : last_)
    if (n >= 0) n = renamed[static_cast<std::size_t>(n)];
  names_ = std::move(kept);
}

}  // namespace redsync::detail
