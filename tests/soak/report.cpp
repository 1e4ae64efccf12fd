#include "report.hpp"

#include "json.hpp"

#include <redsync/error.hpp>

#include <fmt/format.h>

#include <cstdio>
#include <stdexcept>
#include <string_view>

namespace redsync::soak {

namespace {

using redsync::cli::json_string;

std::string_view errc_name(int v) {
  return to_string(static_cast<errc>(v));
}

double mib(long long bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

std::uint64_t sum(const std::map<int, std::uint64_t>& m) {
  std::uint64_t n = 0;
  for (const auto& [k, v] : m) n += v;
  return n;
}

std::string counts(const std::map<int, std::uint64_t>& m) {
  std::string out;
  for (const auto& [k, v] : m) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", errc_name(k), v);
  return out.empty() ? "none" : out;
}

template <class Map>
std::string json_counts(const Map& m, auto key_name) {
  std::string out = "{";
  for (const auto& [k, v] : m)
    out += fmt::format("{}{}: {}", out.size() > 1 ? ", " : "", json_string(key_name(k)), v);
  return out + "}";
}

std::string json_sample(const sample& s) {
  return fmt::format(
      "{{\"cycle\": {}, \"phase\": {}, \"seconds\": {:.3f}, \"fds\": {}, \"sockets\": {}, \"handles\": {}, "
      "\"handles_by_type\": {}, \"connections\": {}, \"rss_bytes\": {}, \"heap_bytes\": {}, \"ok\": {}, "
      "\"failed\": {}}}",
      s.cycle, json_string(s.phase), s.seconds, s.fds.total, s.fds.sockets, s.handles.total,
      json_counts(s.handles.by_type, [](const std::string& k) { return k; }), s.handles.connections, s.rss,
      s.heap, s.ok, s.failed);
}

}  // namespace

void run_report::evaluate() {
  checks.clear();
  if (!baseline || !final) {
    problems.push_back("no baseline or no final sample");
    return;
  }
  const sample& b = *baseline;
  const sample& f = *final;
  checks.push_back({"open fds", b.fds.total, f.fds.total, b.fds.total + fd_slack});
  checks.push_back({"libuv handles", b.handles.total, f.handles.total, b.handles.total + handle_slack});
  checks.push_back({"RSS (bytes)", static_cast<long long>(b.rss), static_cast<long long>(f.rss),
                    static_cast<long long>(b.rss + rss_slack)});
  checks.push_back({"heap in use (bytes)", static_cast<long long>(b.heap), static_cast<long long>(f.heap),
                    static_cast<long long>(b.heap + heap_slack)});
  // Every connection is re-established before both samples: exactly the
  // expected number, no more (a leaked one) and no fewer (a node never
  // reconnected).
  if (b.handles.connections != expected_connections || f.handles.connections != expected_connections) {
    problems.push_back(fmt::format("live connections: baseline {}, final {}, expected {} at both",
                                   b.handles.connections, f.handles.connections, expected_connections));
  }
  const auto needed = static_cast<std::uint64_t>(min_success * static_cast<double>(cycles));
  if (ok < needed) {
    problems.push_back(fmt::format("successful cycles: {} of {} ({:.2f}%), below the {:.0f}% required", ok,
                                   cycles, 100.0 * static_cast<double>(ok) / static_cast<double>(cycles),
                                   100.0 * min_success));
  }
}

bool run_report::passed() const {
  if (!problems.empty() || checks.empty()) return false;
  for (const auto& c : checks)
    if (!c.ok()) return false;
  return true;
}

std::string run_report::summary() const {
  std::string faults_text;
  for (const auto& [k, v] : faults)
    faults_text += fmt::format("{}{} {}", faults_text.empty() ? "" : ", ", k, v);
  std::string answers_text;
  for (const auto& [k, v] : node_answers) {
    answers_text += fmt::format("{}{} {}", answers_text.empty() ? "" : ", ", k, v);
  }
  if (answers_text.empty()) answers_text = "none";
  std::string out = fmt::format(
      "soak: {}: {} cycles in {:.1f} s ({:.0f}/s): {} ok ({:.2f}%); failed lock: {}; failed unlock: {}; "
      "faults: {}; lock retries {}; node answers not ok: {}",
      passed() ? "PASS" : "FAIL", cycles, seconds, seconds > 0 ? static_cast<double>(cycles) / seconds : 0.0,
      ok, cycles ? 100.0 * static_cast<double>(ok) / static_cast<double>(cycles) : 0.0, counts(lock_failed),
      counts(unlock_failed), faults_text, retries, answers_text);
  if (baseline && final) {
    out += fmt::format(
        "; fds {} -> {} (bound {}); libuv handles {} -> {} (bound {}); RSS {:.1f} -> {:.1f} MiB (bound "
        "{:.1f}); "
        "heap {:.2f} -> {:.2f} MiB (bound {:.2f}); connections {} -> {}",
        baseline->fds.total, final->fds.total, baseline->fds.total + fd_slack, baseline->handles.total,
        final->handles.total, baseline->handles.total + handle_slack,
        mib(static_cast<long long>(baseline->rss)), mib(static_cast<long long>(final->rss)),
        mib(static_cast<long long>(baseline->rss + rss_slack)), mib(static_cast<long long>(baseline->heap)),
        mib(static_cast<long long>(final->heap)), mib(static_cast<long long>(baseline->heap + heap_slack)),
        baseline->handles.connections, final->handles.connections);
  }
  for (const auto& c : checks) {
    if (c.ok()) continue;
    out += fmt::format("\nsoak: FAIL: {} grew: baseline {}, final {}, bound {}", c.resource, c.baseline,
                       c.final_value, c.bound);
    if (c.resource == "libuv handles" && baseline && final) {
      for (const auto& [type, n] : final->handles.by_type) {
        auto it = baseline->handles.by_type.find(type);
        const int before = it == baseline->handles.by_type.end() ? 0 : it->second;
        if (n != before) out += fmt::format(" ({} {} -> {})", type, before, n);
      }
    }
  }
  // A run that breaks tends to break the same way many times: the first few
  // say what happened, the JSON has them all.
  constexpr std::size_t shown = 5;
  for (std::size_t i = 0; i < problems.size() && i < shown; ++i) out += "\nsoak: FAIL: " + problems[i];
  if (problems.size() > shown) out += fmt::format("\nsoak: FAIL: ... and {} more", problems.size() - shown);
  for (std::size_t i = 0; i < fault_errors.size() && i < shown; ++i) {
    out += "\nsoak: note: a fault could not be injected: " + fault_errors[i];
  }
  if (fault_errors.size() > shown) {
    out += fmt::format("\nsoak: note: ... and {} more faults could not be injected",
                       fault_errors.size() - shown);
  }
  return out;
}

void run_report::write_json(const std::string& path) const {
  std::string out = "{\n";
  out += fmt::format("  \"passed\": {},\n  \"cycles\": {},\n  \"seconds\": {:.3f},\n  \"ok\": {},\n",
                     passed() ? "true" : "false", cycles, seconds, ok);
  out += fmt::format("  \"lock_failed\": {},\n  \"unlock_failed\": {},\n",
                     json_counts(lock_failed, errc_name), json_counts(unlock_failed, errc_name));
  out += fmt::format("  \"failed\": {},\n", sum(lock_failed) + sum(unlock_failed));
  out += fmt::format("  \"faults\": {},\n", json_counts(faults, [](const std::string& k) { return k; }));
  out += fmt::format("  \"lock_retries\": {},\n", retries);
  out += fmt::format("  \"node_answers_not_ok\": {},\n",
                     json_counts(node_answers, [](const std::string& k) { return k; }));
  out += "  \"fault_errors\": [";
  for (std::size_t i = 0; i < fault_errors.size(); ++i) out += (i ? ", " : "") + json_string(fault_errors[i]);
  out += "],\n";
  out += fmt::format("  \"min_success\": {},\n", min_success);
  out += "  \"bounds\": [";
  for (std::size_t i = 0; i < checks.size(); ++i) {
    const auto& c = checks[i];
    out += fmt::format(
        "{}\n    {{\"resource\": {}, \"baseline\": {}, \"final\": {}, \"bound\": {}, \"ok\": {}}}",
        i ? "," : "", json_string(c.resource), c.baseline, c.final_value, c.bound, c.ok() ? "true" : "false");
  }
  out += "\n  ],\n  \"problems\": [";
  for (std::size_t i = 0; i < problems.size(); ++i) out += (i ? ", " : "") + json_string(problems[i]);
  out += "],\n  \"handles_after_destruction\": " + std::to_string(handles_after_destruction) + ",\n";
  out += "  \"samples\": [";
  for (std::size_t i = 0; i < samples.size(); ++i)
    out += (i ? ",\n    " : "\n    ") + json_sample(samples[i]);
  out += "\n  ]\n}\n";

  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) throw std::runtime_error("cannot write " + path);
  const bool written = std::fwrite(out.data(), 1, out.size(), f) == out.size();
  if (std::fclose(f) != 0 || !written) throw std::runtime_error("cannot write " + path);
}

}  // namespace redsync::soak
