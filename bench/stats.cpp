#include "stats.hpp"

#include "json.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace bench {

namespace {

std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  // Three decimals are below every resolution we measure; shortest form.
  return fmt::format("{}", std::round(v * 1000.0) / 1000.0);
}

}  // namespace

json& json::num(std::string_view key, double v) {
  fields_.emplace_back(key, number(v));
  return *this;
}
json& json::integer(std::string_view key, std::int64_t v) {
  fields_.emplace_back(key, fmt::format("{}", v));
  return *this;
}
json& json::text(std::string_view key, std::string_view v) {
  fields_.emplace_back(key, redsync::cli::json_string(v));
  return *this;
}
json& json::flag(std::string_view key, bool v) {
  fields_.emplace_back(key, v ? "true" : "false");
  return *this;
}
json& json::object(std::string_view key, const json& v) {
  fields_.emplace_back(key, v.str());
  return *this;
}
json& json::array(std::string_view key, const std::vector<json>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    // Appends, never "literal" + std::string: GCC 12 -O3 flags that with a
    // false -Wrestrict.
    if (i) s += ',';
    s += v[i].str();
  }
  s += ']';
  fields_.emplace_back(key, std::move(s));
  return *this;
}
json& json::numbers(std::string_view key, const std::vector<double>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += number(v[i]);
  }
  s += ']';
  fields_.emplace_back(key, std::move(s));
  return *this;
}

std::string json::str() const {
  std::string s = "{";
  for (std::size_t i = 0; i < fields_.size(); ++i) {
    if (i) s += ",";
    s += redsync::cli::json_string(fields_[i].first);
    s += ':';
    s += fields_[i].second;
  }
  s += '}';
  return s;
}

void samples::sort() const {
  if (!sorted_) std::sort(us_.begin(), us_.end());
  sorted_ = true;
}

double samples::percentile(double p) const {
  if (us_.empty()) return 0.0;
  sort();
  const auto n = static_cast<double>(us_.size());
  const auto rank = static_cast<std::size_t>(std::max(1.0, std::ceil(p * n)));
  return us_[std::min(rank, us_.size()) - 1];
}

double samples::mean() const {
  if (us_.empty()) return 0.0;
  return std::accumulate(us_.begin(), us_.end(), 0.0) / static_cast<double>(us_.size());
}

json samples::summary() const {
  json j;
  j.integer("n", static_cast<std::int64_t>(us_.size()))
      .num("median_us", median())
      .num("p99_us", p99())
      .num("max_us", max())
      .num("mean_us", mean())
      .num("min_us", percentile(0.0));
  return j;
}

}  // namespace bench
