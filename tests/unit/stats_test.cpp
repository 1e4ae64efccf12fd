// The counters' helpers and their Prometheus text exposition (lib/stats.cpp).

#include <redsync/stats.hpp>

#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

using namespace std::chrono_literals;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool has_line(const std::string& text, const std::string& line) {
  for (const auto& l : lines_of(text)) {
    if (l == line) return true;
  }
  return false;
}

redsync::stats_snapshot sample() {
  redsync::stats_snapshot s;
  s.acquisitions.ok = 7;
  s.acquisitions.failed[static_cast<std::size_t>(redsync::errc::busy)] = 2;
  s.releases.ok = 6;
  s.extensions.failed[static_cast<std::size_t>(redsync::errc::expired)] = 1;
  s.lost_locks = 1;
  s.observer_errors = 3;
  redsync::node_stats n;
  n.address = "127.0.0.1:7001";
  n.connected = true;
  n.reconnects = 2;
  n.unreachable = 1;
  n.answers[static_cast<std::size_t>(redsync::node_status::ok)] = 13;
  n.answers[static_cast<std::size_t>(redsync::node_status::timeout)] = 1;
  n.script_loads = 4;
  n.script_reloads = 1;
  n.latency.counts[0] = 3;                                           // <= 50 us
  n.latency.counts[4] = 10;                                          // (500 us, 1 ms]
  n.latency.counts[redsync::latency_histogram::finite_buckets] = 1;  // above 5 s
  n.latency.sum = 1'234'000us;
  s.nodes.push_back(n);
  redsync::node_stats odd;
  odd.address = "unix:/tmp/a \"b\"\\c\nd";
  odd.excluded = true;
  s.nodes.push_back(odd);
  return s;
}

}  // namespace

TEST_CASE("latency buckets are fixed, log-scale, and include their upper bound") {
  using h = redsync::latency_histogram;
  CHECK(h::bucket_of(0us) == 0);
  CHECK(h::bucket_of(50us) == 0);
  CHECK(h::bucket_of(51us) == 1);
  CHECK(h::bucket_of(1ms) == 4);
  CHECK(h::bucket_of(1001us) == 5);
  CHECK(h::bucket_of(5s) == h::finite_buckets - 1);
  CHECK(h::bucket_of(5001ms) == h::finite_buckets);
  CHECK(h::bucket_of(std::chrono::hours(1)) == h::finite_buckets);
}

TEST_CASE("call and node counters add up their parts") {
  const auto s = sample();
  CHECK(s.acquisitions.failures(redsync::errc::busy) == 2);
  CHECK(s.acquisitions.failures(redsync::errc::no_quorum) == 0);
  CHECK(s.acquisitions.total_failures() == 2);
  CHECK(s.nodes[0].latency.count() == 14);
  CHECK(s.nodes[0].answers_with(redsync::node_status::ok) == 13);
  CHECK(s.nodes[0].errors() == 1);
}

TEST_CASE("prometheus_text writes HELP and TYPE once per metric and one sample per label set") {
  const std::string text = redsync::prometheus_text(sample());
  CHECK(has_line(text, "# HELP redsync_acquisitions_total Lock acquisitions (lock, try_lock) by result."));
  CHECK(has_line(text, "# TYPE redsync_acquisitions_total counter"));
  CHECK(has_line(text, "redsync_acquisitions_total{result=\"ok\"} 7"));
  CHECK(has_line(text, "redsync_acquisitions_total{result=\"busy\"} 2"));
  CHECK(has_line(text, "redsync_acquisitions_total{result=\"no_quorum\"} 0"));
  CHECK(has_line(text, "redsync_releases_total{result=\"ok\"} 6"));
  CHECK(has_line(text, "redsync_extensions_total{result=\"expired\"} 1"));
  CHECK(has_line(text, "redsync_lost_locks_total 1"));
  // A semaphore's calls, apart from the mutex's.
  CHECK(has_line(text, "# TYPE redsync_permit_acquisitions_total counter"));
  CHECK(has_line(text, "redsync_permit_acquisitions_total{result=\"ok\"} 0"));
  CHECK(has_line(text, "redsync_permit_acquisitions_total{result=\"permits_mismatch\"} 0"));
  CHECK(has_line(text, "redsync_permit_releases_total{result=\"lost\"} 0"));
  CHECK(has_line(text, "redsync_permit_extensions_total{result=\"expired\"} 0"));
  CHECK(has_line(text, "redsync_lost_permits_total 0"));
  CHECK(has_line(text, "redsync_observer_errors_total 3"));
  CHECK(has_line(text, "redsync_node_connected{node=\"127.0.0.1:7001\"} 1"));
  CHECK(has_line(text, "redsync_node_reconnects_total{node=\"127.0.0.1:7001\"} 2"));
  CHECK(has_line(text, "redsync_node_unreachable_total{node=\"127.0.0.1:7001\"} 1"));
  CHECK(has_line(text, "redsync_node_answers_total{node=\"127.0.0.1:7001\",status=\"ok\"} 13"));
  CHECK(has_line(text, "redsync_node_answers_total{node=\"127.0.0.1:7001\",status=\"timeout\"} 1"));
  CHECK(has_line(text, "redsync_node_answers_total{node=\"127.0.0.1:7001\",status=\"excluded\"} 0"));
  CHECK(text.find("status=\"not_awaited\"") == std::string::npos);
  CHECK(has_line(text, "redsync_node_script_loads_total{node=\"127.0.0.1:7001\"} 4"));
  CHECK(has_line(text, "redsync_node_script_reloads_total{node=\"127.0.0.1:7001\"} 1"));
  CHECK(has_line(text, "# TYPE redsync_node_latency_seconds histogram"));
  // Every line is a comment or "name{labels} value" / "name value".
  int types = 0;
  for (const auto& l : lines_of(text)) {
    CAPTURE(l);
    CHECK_FALSE(l.empty());
    if (l.rfind("# TYPE ", 0) == 0) ++types;
    if (l[0] == '#') continue;
    CHECK(l.rfind("redsync_", 0) == 0);
    CHECK(l.find(' ') != std::string::npos);
  }
  CHECK(types == 17);
  CHECK(text.back() == '\n');
}

TEST_CASE("prometheus_text gives each call family only the results it can end with, and any counted one") {
  redsync::stats_snapshot s = sample();
  // Impossible, but counted: shown all the same, never hidden.
  s.releases.failed[static_cast<std::size_t>(redsync::errc::already_held)] = 1;
  const std::string text = redsync::prometheus_text(s);
  CHECK(has_line(text, "redsync_acquisitions_total{result=\"already_held\"} 0"));
  CHECK(has_line(text, "redsync_acquisitions_total{result=\"validity_elapsed\"} 0"));
  CHECK(text.find("redsync_acquisitions_total{result=\"lost\"}") == std::string::npos);
  CHECK(text.find("redsync_acquisitions_total{result=\"not_held\"}") == std::string::npos);
  CHECK(text.find("redsync_acquisitions_total{result=\"expired\"}") == std::string::npos);
  CHECK(has_line(text, "redsync_releases_total{result=\"taken\"} 0"));
  CHECK(has_line(text, "redsync_releases_total{result=\"lost\"} 0"));
  CHECK(text.find("redsync_releases_total{result=\"busy\"}") == std::string::npos);
  CHECK(text.find("redsync_releases_total{result=\"validity_elapsed\"}") == std::string::npos);
  CHECK(has_line(text, "redsync_releases_total{result=\"already_held\"} 1"));
  CHECK(has_line(text, "redsync_extensions_total{result=\"validity_elapsed\"} 0"));
  CHECK(text.find("redsync_extensions_total{result=\"busy\"}") == std::string::npos);
  CHECK(text.find("redsync_extensions_total{result=\"already_held\"}") == std::string::npos);
  for (const char* family : {"acquisitions", "releases", "extensions"}) {
    CAPTURE(family);
    CHECK(text.find(std::string("redsync_") + family + "_total{result=\"would_deadlock\"}") ==
          std::string::npos);
  }
}

TEST_CASE("prometheus_text histogram buckets are cumulative and end with +Inf, _sum in seconds, _count") {
  const std::string text = redsync::prometheus_text(sample());
  const std::string node = "node=\"127.0.0.1:7001\"";
  CHECK(has_line(text, "redsync_node_latency_seconds_bucket{" + node + ",le=\"5e-05\"} 3"));
  CHECK(has_line(text, "redsync_node_latency_seconds_bucket{" + node + ",le=\"0.0005\"} 3"));
  CHECK(has_line(text, "redsync_node_latency_seconds_bucket{" + node + ",le=\"0.001\"} 13"));
  CHECK(has_line(text, "redsync_node_latency_seconds_bucket{" + node + ",le=\"5\"} 13"));
  CHECK(has_line(text, "redsync_node_latency_seconds_bucket{" + node + ",le=\"+Inf\"} 14"));
  CHECK(has_line(text, "redsync_node_latency_seconds_sum{" + node + "} 1.234"));
  CHECK(has_line(text, "redsync_node_latency_seconds_count{" + node + "} 14"));
}

TEST_CASE("prometheus_text escapes backslash, double quote and newline in label values") {
  const std::string text = redsync::prometheus_text(sample());
  CHECK(has_line(text, "redsync_node_excluded{node=\"unix:/tmp/a \\\"b\\\"\\\\c\\nd\"} 1"));
}

TEST_CASE("prometheus_text takes another prefix and rejects one that is not a metric name") {
  const std::string text = redsync::prometheus_text(sample(), "app_locks");
  CHECK(has_line(text, "app_locks_lost_locks_total 1"));
  CHECK(text.find("redsync_") == std::string::npos);
  CHECK_THROWS_WITH_AS(redsync::prometheus_text(sample(), "1bad"),
                       "prometheus_text: prefix \"1bad\" is not a valid metric name", redsync::config_error);
  CHECK_THROWS_AS(redsync::prometheus_text(sample(), ""), redsync::config_error);
  CHECK_THROWS_AS(redsync::prometheus_text(sample(), "a-b"), redsync::config_error);
}

TEST_CASE("prometheus_text has shard and router metrics only with a cluster member, labelled by master") {
  CHECK(redsync::prometheus_text(sample()).find("_shard_") == std::string::npos);
  CHECK(redsync::prometheus_text(sample()).find("_cluster_") == std::string::npos);
  redsync::stats_snapshot s = sample();
  redsync::node_stats c;
  c.address = "cluster 127.0.0.1:7000";
  c.cluster = true;
  c.router.map_reads = 4;
  c.router.map_read_failures = 1;
  c.router.moved = 2;
  c.router.tryagain = 3;
  c.router.failovers = 1;
  c.router.masters = 2;
  redsync::shard_stats a;
  a.address = "127.0.0.1:7000";
  a.connected = true;
  a.answers[static_cast<std::size_t>(redsync::node_status::ok)] = 5;
  a.latency.counts[0] = 5;
  redsync::shard_stats b;
  b.address = "127.0.0.1:7004";
  b.excluded = true;
  c.shards = {a, b};
  s.nodes.push_back(c);
  const std::string text = redsync::prometheus_text(s);
  const std::string both = R"(node="cluster 127.0.0.1:7000",shard="127.0.0.1:7000")";
  CHECK(has_line(text, "redsync_shard_connected{" + both + "} 1"));
  CHECK(has_line(text, R"(redsync_shard_excluded{node="cluster 127.0.0.1:7000",shard="127.0.0.1:7004"} 1)"));
  CHECK(has_line(text, "redsync_shard_answers_total{" + both + ",status=\"ok\"} 5"));
  CHECK(has_line(text, "redsync_shard_latency_seconds_bucket{" + both + ",le=\"+Inf\"} 5"));
  CHECK(has_line(text, "redsync_shard_latency_seconds_count{" + both + "} 5"));
  CHECK(has_line(text, R"(redsync_cluster_map_reads_total{node="cluster 127.0.0.1:7000",result="ok"} 4)"));
  CHECK(
      has_line(text, R"(redsync_cluster_map_reads_total{node="cluster 127.0.0.1:7000",result="failed"} 1)"));
  CHECK(has_line(text, R"(redsync_cluster_redirects_total{node="cluster 127.0.0.1:7000",kind="moved"} 2)"));
  CHECK(has_line(text, R"(redsync_cluster_errors_total{node="cluster 127.0.0.1:7000",kind="tryagain"} 3)"));
  CHECK(has_line(text, R"(redsync_cluster_failovers_total{node="cluster 127.0.0.1:7000"} 1)"));
  CHECK(has_line(text, R"(redsync_cluster_masters{node="cluster 127.0.0.1:7000"} 2)"));
  // A standalone node gets no router series.
  CHECK(text.find(R"(redsync_cluster_masters{node="127.0.0.1:7001"})") == std::string::npos);
  CHECK(has_line(text, "# TYPE redsync_shard_latency_seconds histogram"));
}
