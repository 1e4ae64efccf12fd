#include "server_cpu.hpp"

#include "transport.hpp"

#include <sys/resource.h>

#include <string>

namespace bench {

double self_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const auto s = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return s(u.ru_utime) + s(u.ru_stime);
}

double precise_cpu::nodes_seconds() {
  double sum = 0;
  for (std::size_t i = 0; i < admin_.size(); ++i) {
    for (const char* field : {"used_cpu_sys", "used_cpu_user"}) {
      const std::string v = admin_.info_field(i, "cpu", field);
      if (!v.empty()) sum += std::stod(v);
    }
  }
  return sum;
}

void precise_cpu::start() {
  nodes0_ = nodes_seconds();
  self0_ = self_cpu_seconds();
}

json precise_cpu::stop(std::size_t ops) {
  const double self = self_cpu_seconds() - self0_;
  const double nodes = nodes_seconds() - nodes0_;
  const double n = ops == 0 ? 1.0 : static_cast<double>(ops);
  json j;
  j.num("client_cpu_us_per_op", self * 1e6 / n).num("nodes_cpu_us_per_op", nodes * 1e6 / n);
  return j;
}

}  // namespace bench
