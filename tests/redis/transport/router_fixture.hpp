// Test fixture: a cluster_router on an owned event_loop; calls are made on
// the loop thread and waited for with a bound.
#pragma once

#include "transport/cluster_router.hpp"
#include "transport/event_loop.hpp"
#include "util/cluster_slot.hpp"
#include "util/cluster_uri.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace redsync::test {

class router_fixture {
 public:
  explicit router_fixture(const std::string& uri)
      : router_(std::make_unique<detail::cluster_router>(loop_.loop(), detail::parse_cluster_uri(uri),
                                                         redsync_options{})) {
    loop_.run_sync([this] {
      router_->on_server_info([this](const std::string& address, const detail::reply& info) {
        const std::string_view text = info.str;
        const auto at = text.find("run_id:");
        if (at == std::string_view::npos) return;
        const auto end = text.find_first_of("\r\n", at);
        run_ids_[address] = std::string(text.substr(at + 7, end - at - 7));
      });
      router_->on_master_event([this](const std::string& address, detail::pool_event e, std::string_view) {
        events_.emplace_back(address, e);
      });
    });
  }
  ~router_fixture() {
    std::promise<void> done;
    loop_.run_sync([&] { router_->close([&] { done.set_value(); }); });
    REQUIRE(done.get_future().wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  }
  router_fixture(const router_fixture&) = delete;
  router_fixture& operator=(const router_fixture&) = delete;

  // Sends `wire` (every key in `slot`) and waits for the result.
  detail::command_result send(std::uint16_t slot, detail::wire_command wire,
                              std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) {
    auto promise = std::make_shared<std::promise<detail::command_result>>();
    auto future = promise->get_future();
    loop_.post([this, wire, timeout, slot, promise] {
      router_->send(slot, 0, wire, timeout,
                    [promise](detail::command_result&& r) { promise->set_value(std::move(r)); });
    });
    REQUIRE(future.wait_for(timeout + std::chrono::seconds(5)) == std::future_status::ready);
    return future.get();
  }

  // As call(), and `inside_send` tells whether the callback ran inside
  // the router's send() (which its contract forbids).
  detail::command_result call_checked(std::vector<std::string> argv, std::chrono::milliseconds timeout,
                                      bool& inside_send) {
    auto promise = std::make_shared<std::promise<detail::command_result>>();
    auto future = promise->get_future();
    std::vector<std::string_view> views(argv.begin(), argv.end());
    const auto wire = detail::encode_command(views);
    const std::uint16_t slot = detail::key_slot(argv.at(1));
    auto sending = std::make_shared<bool>(false);
    loop_.run_sync([&] {
      *sending = true;
      router_->send(slot, 0, wire, timeout, [promise, sending, &inside_send](detail::command_result&& r) {
        inside_send = *sending;
        promise->set_value(std::move(r));
      });
      *sending = false;
    });
    REQUIRE(future.wait_for(timeout + std::chrono::seconds(5)) == std::future_status::ready);
    return future.get();
  }

  // argv[1] is the key that decides the slot.
  detail::command_result call(std::vector<std::string> argv,
                              std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) {
    std::vector<std::string_view> views(argv.begin(), argv.end());
    return send(detail::key_slot(argv.at(1)), detail::encode_command(views), timeout);
  }

  // The run_id each master's last handshake INFO showed, by host:port
  // (cluster_router::on_server_info), copied on the loop thread.
  std::map<std::string, std::string> run_ids() {
    std::map<std::string, std::string> m;
    loop_.run_sync([&] { m = run_ids_; });
    return m;
  }

  // Sends argv (argv[1] decides the slot) without waiting: the result
  // arrives in the future.
  std::future<detail::command_result> call_async(std::vector<std::string> argv,
                                                 std::chrono::milliseconds timeout) {
    auto promise = std::make_shared<std::promise<detail::command_result>>();
    auto future = promise->get_future();
    std::vector<std::string_view> views(argv.begin(), argv.end());
    const auto wire = detail::encode_command(views);
    const std::uint16_t slot = detail::key_slot(argv.at(1));
    loop_.post([this, wire, timeout, slot, promise] {
      router_->send(slot, 0, wire, timeout,
                    [promise](detail::command_result&& r) { promise->set_value(std::move(r)); });
    });
    return future;
  }

  // Reads the map (cluster_router::refresh) and waits: "" or why not.
  std::string refresh(std::chrono::milliseconds timeout = std::chrono::milliseconds(1000)) {
    auto promise = std::make_shared<std::promise<std::string>>();
    auto future = promise->get_future();
    loop_.post([this, timeout, promise] {
      router_->refresh(timeout, [promise](const std::string& error) { promise->set_value(error); });
    });
    REQUIRE(future.wait_for(timeout + std::chrono::seconds(5)) == std::future_status::ready);
    return future.get();
  }

  // The router's pools not closed yet (live, retiring), read on the loop thread.
  detail::cluster_router::pool_count pools() {
    detail::cluster_router::pool_count n;
    loop_.run_sync([&] { n = router_->pools(); });
    return n;
  }

  // The pool events the router reported (on_master_event), by host:port.
  std::vector<std::pair<std::string, detail::pool_event>> master_events() {
    std::vector<std::pair<std::string, detail::pool_event>> v;
    loop_.run_sync([&] { v = events_; });
    return v;
  }

  // The router's map, copied on the loop thread.
  detail::slot_map map() {
    detail::slot_map m;
    loop_.run_sync([&] { m = router_->map(); });
    return m;
  }

 private:
  detail::event_loop loop_{nullptr};
  std::unique_ptr<detail::cluster_router> router_;
  std::map<std::string, std::string> run_ids_;                      // loop thread
  std::vector<std::pair<std::string, detail::pool_event>> events_;  // loop thread
};

}  // namespace redsync::test
