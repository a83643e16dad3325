#include "comm/link_model.hpp"

#include <chrono>
#include <cstdio>
#include <thread>

namespace strata::comm {
namespace {
LinkOptions g_options;
double g_modelled_s = 0;
}  // namespace

std::string LinkOptions::describe() const {
  if (!enabled()) return "off";
  char text[160];
  std::snprintf(text, sizeof(text), "network %.1f Gb/s + %.1f us, host-to-device %.1f Gb/s + %.1f us", network_gbps,
                network_latency_us, h2d_gbps, h2d_latency_us);
  return text;
}

void LinkModel::configure(const LinkOptions& options) { g_options = options; }
const LinkOptions& LinkModel::options() { return g_options; }
double LinkModel::modelled_seconds() { return g_modelled_s; }

void LinkModel::transfer(Link link, size_t bytes) {
  const bool network = link == Link::kNetwork;
  const double gbps = network ? g_options.network_gbps : g_options.h2d_gbps;
  if (gbps <= 0) return;
  const double latency_s = (network ? g_options.network_latency_us : g_options.h2d_latency_us) * 1e-6;
  const double seconds = latency_s + double(bytes) * 8.0 / (gbps * 1e9);
  g_modelled_s += seconds;
  // Sleep for the bulk, spin for the tail: sleeps overshoot by tens of microseconds.
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  if (seconds > 200e-6) std::this_thread::sleep_for(std::chrono::duration<double>(seconds - 100e-6));
  while (std::chrono::steady_clock::now() < until) {
  }
}

}  // namespace strata::comm
