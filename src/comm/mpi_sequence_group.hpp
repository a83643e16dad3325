// MpiSequenceGroup: model::SequenceGroup over a trainer's ParallelGroups: the
// all-to-all and the point-to-point passes run on the sequence-parallel communicator. Counts the bytes it moves
// to other trainers for the summary.
#pragma once

#include <cstdint>

#include "comm/parallel_groups.hpp"
#include "model/sequence_group.hpp"

namespace strata::comm {

class MpiSequenceGroup final : public model::SequenceGroup {
 public:
  explicit MpiSequenceGroup(const ParallelGroups& groups) : groups_(groups) {}

  int size() const override { return groups_.layout().sp; }
  int rank() const override { return groups_.sp_rank(); }

  void exchange(const std::vector<char>& send, const std::vector<int>& send_bytes, std::vector<char>& receive,
                std::vector<int>& receive_bytes) override;
  void pass(const std::vector<char>& send, const std::vector<int>& send_bytes, std::vector<char>& receive,
            const std::vector<int>& receive_bytes) override;

  // Bytes this trainer sent to the other members: lengths, attention inputs and results.
  uint64_t bytes_exchanged() const { return bytes_exchanged_; }

 private:
  const ParallelGroups& groups_;
  uint64_t bytes_exchanged_ = 0;
};

}  // namespace strata::comm
