#include "transport.hpp"

#include "util/cluster_uri.hpp"

#include <redsync/options.hpp>

#include <future>
#include <sstream>

namespace bench {

transport::transport(const std::vector<std::string>& uris) : loop_(nullptr) {
  const redsync::redsync_options opts{};
  for (const auto& uri : uris) {
    if (rd::is_cluster_uri(uri)) {
      members_.push_back(std::make_unique<rd::member>(
          std::make_unique<rd::cluster_router>(loop_.loop(), rd::parse_cluster_uri(uri), opts)));
    } else {
      members_.push_back(std::make_unique<rd::member>(
          std::make_unique<rd::node_pool>(loop_.loop(), redsync::node_options::parse(uri), opts)));
    }
  }
}

transport::~transport() {
  // A pool must not be destroyed inside its own close callback: the last
  // callback posts the destruction, which runs on a later loop iteration.
  std::promise<void> closed;
  loop_.post([this, &closed] {
    auto left = std::make_shared<std::size_t>(members_.size());
    if (*left == 0) return closed.set_value();
    for (auto& p : members_) {
      p->close([this, left, &closed] {
        if (--*left == 0) {
          loop_.post([this, &closed] {
            members_.clear();
            closed.set_value();
          });
        }
      });
    }
  });
  closed.get_future().wait();
}

rd::command_result transport::command(std::size_t i, const std::vector<std::string_view>& argv,
                                      std::chrono::milliseconds timeout) {
  auto cmd = rd::encode_command(argv);
  std::promise<rd::command_result> done;
  loop_.post([this, i, cmd, timeout, &done] {
    node(i).send(0, cmd, timeout, [&done](rd::command_result&& r) { done.set_value(std::move(r)); });
  });
  return done.get_future().get();
}

std::string transport::info_field(std::size_t i, std::string_view section, std::string_view field) {
  const auto r = command(i, {"INFO", section});
  if (r.status != rd::transport_status::ok || r.value.is_error()) return {};
  std::istringstream in(r.value.str);
  std::string line;
  const std::string prefix = std::string(field) + ":";
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
  }
  return {};
}

}  // namespace bench
