// SequenceGroup: what a sequence model needs from the trainers it shares its attention
// with (layout.sp of them, config/parallel_layout.hpp). The model stays free of MPI:
// comm/mpi_sequence_group.hpp implements this over the sequence-parallel communicator.
#pragma once

#include <vector>

namespace strata::model {

class SequenceGroup {
 public:
  virtual ~SequenceGroup() = default;

  virtual int size() const = 0;  // members (layout.sp)
  virtual int rank() const = 0;  // this trainer's place among them

  // All-to-all within the group: send holds one part per member back to back
  // (send_bytes[m] for member m); receive gets every member's part for this one,
  // back to back in member order, and receive_bytes their sizes.
  virtual void exchange(const std::vector<char>& send, const std::vector<int>& send_bytes, std::vector<char>& receive,
                        std::vector<int>& receive_bytes) = 0;

  // Point to point within the group, sizes known to both sides: send as above;
  // receive_bytes[m] says what member m sends this one (both sides derive it from
  // the same plan), and only the non-empty parts travel. receive gets them back to
  // back in member order.
  virtual void pass(const std::vector<char>& send, const std::vector<int>& send_bytes, std::vector<char>& receive,
                    const std::vector<int>& receive_bytes) = 0;
};

}  // namespace strata::model
