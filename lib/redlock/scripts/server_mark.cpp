// The server mark (server_mark.hpp).

#include "redlock/scripts/server_mark.hpp"

#include "redlock/scripts/cluster_keys.hpp"
#include "util/sha1.hpp"

namespace redsync::detail {

std::string server_mark(std::string_view identity) {
  return sha1_hex(identity);
}

std::string cluster_server_mark_key(std::uint16_t slot) {
  return cluster_record_key(slot) + ":server";
}

}  // namespace redsync::detail
