// The keys of a lock name on a cluster member, its node records per slot,
// and the grouping of a multi-name lock by slot (cluster_keys.hpp).

#include "redlock/scripts/cluster_keys.hpp"

#include "util/cluster_slot.hpp"

#include <algorithm>

namespace redsync::detail {

std::string cluster_lock_key(std::string_view name) {
  if (has_hash_tag(name)) return std::string(name);
  // "{" + name + "}" would have an empty tag, so Redis would hash each key
  // whole and the name's keys would scatter.
  if (name.empty() || name.front() == '}') return "{~}" + std::string(name);
  std::string key;
  key.reserve(name.size() + 2);
  key += '{';
  key += name;
  key += '}';
  return key;
}

std::uint16_t cluster_name_slot(std::string_view name) {
  return key_slot(cluster_lock_key(name));
}

std::string cluster_record_key(std::uint16_t slot) {
  std::string key = "redsync:node:{";
  key += slot_tag(slot);
  key += '}';
  return key;
}

std::vector<slot_group> group_by_slot(const std::vector<std::string>& names) {
  std::vector<slot_group> groups;
  for (const std::string& name : names) {
    const std::uint16_t slot = cluster_name_slot(name);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const slot_group& g) { return g.slot == slot; });
    if (it == groups.end()) it = groups.insert(groups.end(), slot_group{slot, {}});
    it->names.push_back(name);
  }
  std::stable_sort(groups.begin(), groups.end(),
                   [](const slot_group& a, const slot_group& b) { return a.slot < b.slot; });
  return groups;
}

}  // namespace redsync::detail
