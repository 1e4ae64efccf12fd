#include "member_probe.hpp"

#include "cluster_map.hpp"
#include "node_list.hpp"

#include "redlock/scripts/cluster_keys.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

namespace redsync::cli {

std::vector<probe_result> probe_name(const std::vector<std::string>& uris, const std::string& name,
                                     const commands_for_keys& commands_for, std::chrono::milliseconds timeout,
                                     std::vector<std::string>* shards) {
  const std::uint16_t slot = detail::cluster_name_slot(name);
  const name_keys cluster_keys{detail::cluster_lock_key(name), detail::cluster_record_key(slot), true};
  std::vector<probe_result> out(uris.size());
  if (shards) shards->assign(uris.size(), {});
  std::vector<std::string> standalone;
  {
    std::vector<std::jthread> threads;
    for (std::size_t i = 0; i < uris.size(); ++i) {
      if (!is_cluster_member_uri(uris[i])) {
        standalone.push_back(uris[i]);
        continue;
      }
      threads.emplace_back([&, i] {
        const cluster_view view = discover_cluster(uris[i], timeout);
        out[i] = probe_slot(view, slot, commands_for(cluster_keys), timeout);
        if (shards && view.map) (*shards)[i] = shard_lines(*view.map, slot);
      });
    }
    auto results = probe_all(standalone, commands_for({name, "redsync:node"}), timeout);
    for (std::size_t i = 0, k = 0; i < uris.size(); ++i)
      if (!is_cluster_member_uri(uris[i])) out[i] = std::move(results[k++]);
  }  // jthreads join here
  return out;
}

std::string shard_lines(const detail::slot_map& map, std::uint16_t slot) {
  std::vector<std::size_t> order;
  for (std::size_t k = 0; k < map.masters.size(); ++k)
    if (!map.masters[k].slots.empty()) order.push_back(k);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return map.masters[a].slots.front().first < map.masters[b].slots.front().first;
  });
  std::string out;
  for (const std::size_t k : order) {
    const detail::cluster_master& m = map.masters[k];
    const bool serves = map.owner[slot] == static_cast<std::int32_t>(k);
    out += fmt::format("  shard {}: slots {}{}\n", node_options{.host = m.host, .port = m.port}.address(),
                       ranges_text(slot_ranges(m.slots.begin(), m.slots.end())),
                       serves ? fmt::format(", serves slot {}", slot) : std::string());
  }
  return out;
}

}  // namespace redsync::cli
