// A lock's keys on a standalone or a cluster member.

#include "redlock/scripts/lock_keys.hpp"

#include "redlock/scripts/cluster_keys.hpp"
#include "redlock/scripts/scripts.hpp"
#include "redlock/scripts/server_mark.hpp"

namespace redsync::detail {

namespace {

std::vector<std::string> lock_names(const std::vector<std::string>& names, bool cluster) {
  if (!cluster) return names;
  std::vector<std::string> out;
  out.reserve(names.size());
  for (const auto& n : names) out.push_back(cluster_lock_key(n));
  return out;
}

std::vector<std::string> derive(const std::vector<std::string>& names, std::string (*key)(std::string_view)) {
  std::vector<std::string> out;
  out.reserve(names.size());
  for (const auto& n : names) out.push_back(key(n));
  return out;
}

std::vector<std::string_view> concat(std::initializer_list<const std::vector<std::string>*> parts,
                                     const std::string* record_after_first = nullptr,
                                     const std::string* last = nullptr) {
  std::vector<std::string_view> out;
  bool first = true;
  for (const auto* p : parts) {
    out.insert(out.end(), p->begin(), p->end());
    if (first && record_after_first) out.push_back(*record_after_first);
    first = false;
  }
  if (last && !last->empty()) out.push_back(*last);
  return out;
}

}  // namespace

lock_keys::lock_keys(const std::vector<std::string>& n, bool cluster, hold_kind kind)
    : names(lock_names(n, cluster)),
      line_keys(derive(names, line_key)),
      lease_keys(derive(names, lease_key)),
      channels(derive(names, release_channel)),
      readers_keys(kind == hold_kind::shared ? derive(names, readers_key) : std::vector<std::string>{}),
      record(cluster ? cluster_record_key(cluster_name_slot(n.front())) : std::string(record_key)),
      server_mark(cluster ? cluster_server_mark_key(cluster_name_slot(n.front())) : std::string()),
      keys(concat({&names, &readers_keys})),
      acquire_keys(concat({&names, &line_keys, &lease_keys, &readers_keys}, &record, &server_mark)),
      release_keys(concat({&names, &line_keys, &lease_keys, &readers_keys})),
      fence_keys{readers_keys.empty() ? names.front() : readers_keys.front(), record} {}

cluster_layout make_cluster_layout(const std::vector<std::string>& names, hold_kind kind) {
  cluster_layout out;
  for (const auto& g : group_by_slot(names)) {
    out.slots.push_back(g.slot);
    out.groups.push_back(std::make_unique<const lock_keys>(g.names, true, kind));
  }
  return out;
}

script_call make_lock_call(const lua_script& s, const lock_keys& plain,
                           const std::vector<std::unique_ptr<const lock_keys>>& groups, lock_keys_of which,
                           const std::vector<std::string_view>& args, bool channels) {
  const auto with_channels = [&](const lock_keys& k) {
    std::vector<std::string_view> a = args;
    if (channels) a.insert(a.end(), k.channels.begin(), k.channels.end());
    return a;
  };
  script_call call = make_script_call(s, plain.*which, with_channels(plain));
  if (groups.size() == 1) add_cluster_form(call, groups[0].get()->*which, with_channels(*groups[0]));
  if (groups.size() > 1)
    for (const auto& g : groups) add_cluster_group(call, g.get()->*which, with_channels(*g));
  return call;
}

}  // namespace redsync::detail
