// LinkModel: makes a single machine behave like a cluster's links. Each
// transfer over a modelled link waits latency + bytes / bandwidth, so the time
// a run spends on the network (L3 <-> L2, server <-> trainer) and on the host-to-
// device link (L2 -> L1) shows up as it would on real hardware. Off by default;
// every output says when it was on.
#pragma once

#include <cstddef>
#include <string>

namespace strata::comm {

struct LinkOptions {
  double network_gbps = 0;        // 0 = not modelled; e.g. 100 for 100 Gb/s Ethernet/IB
  double network_latency_us = 0;  // per message
  double h2d_gbps = 0;            // 0 = not modelled; e.g. 512 for PCIe Gen5 x16 (64 GB/s)
  double h2d_latency_us = 0;      // per transfer
  bool enabled() const { return network_gbps > 0 || h2d_gbps > 0; }
  std::string describe() const;
};

enum class Link { kNetwork, kHostToDevice };

class LinkModel {
 public:
  static void configure(const LinkOptions& options);
  static const LinkOptions& options();
  // Waits as long as `bytes` take on `link` (returns at once when the link is not modelled).
  static void transfer(Link link, size_t bytes);
  static double modelled_seconds();  // total delay this rank has spent in the model
};

}  // namespace strata::comm
