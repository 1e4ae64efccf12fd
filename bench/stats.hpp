#pragma once

// Latency samples with nearest-rank percentiles, and a tiny ordered JSON
// object writer (the bench prints one JSON document per run).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bench {

// An ordered JSON object whose values are serialized as they are added.
class json {
 public:
  json& num(std::string_view key, double v);
  json& integer(std::string_view key, std::int64_t v);
  json& text(std::string_view key, std::string_view v);
  json& flag(std::string_view key, bool v);
  json& object(std::string_view key, const json& v);
  json& array(std::string_view key, const std::vector<json>& v);
  json& numbers(std::string_view key, const std::vector<double>& v);

  std::string str() const;
  bool empty() const noexcept { return fields_.empty(); }

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

// Durations in microseconds. Percentiles are nearest-rank on the sorted data.
class samples {
 public:
  void reserve(std::size_t n) { us_.reserve(n); }
  void add(std::chrono::nanoseconds d) { add_us(static_cast<double>(d.count()) / 1000.0); }
  void add_us(double us) {
    us_.push_back(us);
    sorted_ = false;
  }
  void append(const samples& other) {
    us_.insert(us_.end(), other.us_.begin(), other.us_.end());
    sorted_ = false;
  }
  std::size_t size() const noexcept { return us_.size(); }

  // p in [0, 1]; 0 when empty.
  double percentile(double p) const;
  double median() const { return percentile(0.5); }
  double p99() const { return percentile(0.99); }
  double max() const { return percentile(1.0); }
  double mean() const;

  // {"n", "median_us", "p99_us", "max_us", "mean_us", "min_us"}
  json summary() const;

 private:
  mutable std::vector<double> us_;
  mutable bool sorted_ = false;
  void sort() const;
};

}  // namespace bench
