// MpiExpertGroup: model::ExpertGroup over a trainer's ParallelGroups: the
// all-to-all runs on the expert-parallel communicator, the chain of replicas on
// the data-parallel one (the trainers holding the same experts in other groups).
// Counts the bytes it moves for the summary.
#pragma once

#include <cstdint>

#include "comm/parallel_groups.hpp"
#include "model/expert_group.hpp"

namespace strata::comm {

class MpiExpertGroup final : public model::ExpertGroup {
 public:
  explicit MpiExpertGroup(const ParallelGroups& groups) : groups_(groups) {}

  int size() const override { return groups_.layout().ep; }
  int rank() const override { return groups_.ep_rank(); }
  int replicas() const override { return groups_.layout().dp; }
  int replica() const override { return groups_.dp_rank(); }

  void exchange(const std::vector<char>& send, const std::vector<int>& send_bytes, std::vector<char>& receive,
                std::vector<int>& receive_bytes) override;
  void receive_from_previous_replica(float* data, size_t n) override;
  void send_to_next_replica(const float* data, size_t n) override;

  // Bytes this trainer sent to other trainers: tokens and their gradients, and the chain.
  uint64_t bytes_exchanged() const { return bytes_exchanged_; }
  uint64_t bytes_chained() const { return bytes_chained_; }

 private:
  const ParallelGroups& groups_;
  uint64_t bytes_exchanged_ = 0;
  uint64_t bytes_chained_ = 0;
};

}  // namespace strata::comm
