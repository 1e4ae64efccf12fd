#include "member_probe.hpp"

#include "cluster_map.hpp"
#include "node_list.hpp"

#include "redlock/cluster_keys.hpp"

#include <thread>

namespace redsync::cli {

std::vector<probe_result> probe_name(const std::vector<std::string>& uris, const std::string& name,
                                     const commands_for_keys& commands_for,
                                     std::chrono::milliseconds timeout) {
  const std::uint16_t slot = detail::cluster_name_slot(name);
  const name_keys cluster_keys{detail::cluster_lock_key(name), detail::cluster_record_key(slot)};
  std::vector<probe_result> out(uris.size());
  std::vector<std::string> standalone;
  {
    std::vector<std::jthread> threads;
    for (std::size_t i = 0; i < uris.size(); ++i) {
      if (!is_cluster_member_uri(uris[i])) {
        standalone.push_back(uris[i]);
        continue;
      }
      threads.emplace_back([&, i] {
        out[i] = probe_slot(discover_cluster(uris[i], timeout), slot, commands_for(cluster_keys), timeout);
      });
    }
    auto results = probe_all(standalone, commands_for({name, "redsync:node"}), timeout);
    for (std::size_t i = 0, k = 0; i < uris.size(); ++i)
      if (!is_cluster_member_uri(uris[i])) out[i] = std::move(results[k++]);
  }  // jthreads join here
  return out;
}

}  // namespace redsync::cli
