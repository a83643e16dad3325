// ExpertGroup: what a mixture-of-experts model needs from the trainers it shares its
// experts with (layout.ep of them, config/parallel_layout.hpp). The model stays free
// of MPI: comm/mpi_expert_group.hpp implements this over the expert-parallel and
// data-parallel communicators.
//
// Member g of a group of G owns experts [g E / G, (g + 1) E / G). The replicas of a
// member are the trainers holding the same experts in the other groups (layout.dp);
// they form a chain in replica order through which the expert gradients are folded
// in global trainer order.
#pragma once

#include <cstddef>
#include <vector>

namespace strata::model {

class ExpertGroup {
 public:
  virtual ~ExpertGroup() = default;

  virtual int size() const = 0;      // members (layout.ep)
  virtual int rank() const = 0;      // this trainer's place among them
  virtual int replicas() const = 0;  // groups (layout.dp)
  virtual int replica() const = 0;   // this trainer's group

  // All-to-all within the group: send holds one part per member back to back
  // (send_bytes[m] for member m); receive gets every member's part for this one,
  // back to back in member order, and receive_bytes their sizes.
  virtual void exchange(const std::vector<char>& send, const std::vector<int>& send_bytes, std::vector<char>& receive,
                        std::vector<int>& receive_bytes) = 0;

  // The chain of replicas: receive n floats from the previous replica (replica() > 0)
  // and send n floats to the next one (replica() + 1 < replicas()).
  virtual void receive_from_previous_replica(float* data, size_t n) = 0;
  virtual void send_to_next_replica(const float* data, size_t n) = 0;
};

}  // namespace strata::model
