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
  return out;
}

}  // namespace redsync::detail
