// Node trust: who each node is (its INFO, a cluster master's server mark)
// and whether two nodes are one server (node_trust.hpp).

#include "redlock/trust/node_trust.hpp"

#include "redlock/scripts/script_answers.hpp"
#include "redlock/scripts/server_mark.hpp"
#include "redlock/trust/trust_host.hpp"

#include <fmt/format.h>

#include <optional>

namespace redsync::detail {

namespace {

std::string short_run_id(std::string_view identity) {
  return std::string(identity.substr(0, 8));
}

}  // namespace

void node_trust::copy_identity(std::size_t i, const node_trust& other) {
  nodes_[i].identity = other.nodes_[i].identity;
  nodes_[i].problem = other.nodes_[i].problem;
  nodes_[i].run_id = other.nodes_[i].run_id;
}

void node_trust::adopt_master(std::size_t i, std::string_view served_by) {
  // Standalone results name no master; after shutdown began the members are gone.
  if (served_by.empty() || !eng_.can_send() || !eng_.node(i).is_cluster()) return;
  server_identity id = eng_.cluster_identity(i, std::string(served_by));
  node& n = nodes_[i];
  if (id.identity != n.identity || n.identity_mark.empty())
    n.identity_mark = id.identity.empty() ? std::string() : server_mark(id.identity);
  n.identity = std::move(id.identity);
  n.problem = std::move(id.problem);
  n.run_id = std::move(id.run_id);
  n.served_by.assign(served_by);
}

void node_trust::on_server_info(std::size_t i, const reply& info) {
  server_identity id = identify_server(info, eng_.script_mode());
  nodes_[i].identity = std::move(id.identity);
  nodes_[i].problem = std::move(id.problem);
  nodes_[i].run_id = std::move(id.run_id);
}

std::string node_trust::same_server(std::size_t i, const std::vector<node_result>& round) const {
  const std::string& run_id = nodes_[i].run_id;
  if (run_id.empty()) return {};
  for (std::size_t j = 0; j < nodes_.size(); ++j) {
    if (j == i) continue;
    const bool earlier_name = j < i && nodes_[j].run_id == run_id;
    const bool counted_here =
        j < round.size() && round[j].status == node_status::ok && nodes_[j].voted_run_id == run_id;
    if (!earlier_name && !counted_here) continue;
    return fmt::format(
        "node {} ({}) is the same server as node {} ({}) (run_id {}): one server must not vote twice, so "
        "this node never votes; list each server once",
        i + 1, eng_.uri(i), j + 1, eng_.uri(j), short_run_id(run_id));
  }
  return {};
}

std::vector<std::string> node_trust::later_names() const {
  std::vector<std::string> out;
  const std::vector<node_result> none;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (first_of_its_server(i)) continue;
    out.resize(nodes_.size());
    out[i] = same_server(i, none);
  }
  return out;
}

bool node_trust::first_of_its_server(std::size_t i) const {
  for (std::size_t j = 0; j < i; ++j)
    if (!nodes_[i].run_id.empty() && nodes_[j].run_id == nodes_[i].run_id) return false;
  return true;
}

bool node_trust::answered_by_known_server(std::size_t i, const reply& r, std::string& why) {
  node& n = nodes_[i];
  // The identity of the server that ran the script, read in the script
  // (server_mark.hpp): it must be the one this client holds for that
  // master, or the vote rests on an identity the server no longer has.
  const std::optional<acquire_vote> vote = read_acquire_vote(r);
  if (!vote || vote->server_mark.empty()) {
    why = "unexpected reply to the acquisition (no server mark)";
    return false;
  }
  if (vote->server_mark != n.identity_mark) {
    if (eng_.can_send()) eng_.read_identity(i, n.served_by);
    // A master whose INFO showed why it can never vote says that (its
    // identity is unknown, so no mark matches; the read above sees a fix).
    if (!n.problem.empty()) {
      why = n.problem;
      return false;
    }
    why = fmt::format(
        "{} is no longer the server this client identified at that address (run_id {}): it was promoted, "
        "resynchronised or reloaded since (server_mark.hpp); its identity is read again, and a later vote "
        "counts once its record is verified for it",
        n.served_by, n.identity.empty() ? std::string("unknown") : short_run_id(n.identity));
    return false;
  }
  return true;
}

}  // namespace redsync::detail
