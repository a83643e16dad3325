// SequenceGroup: what a sequence model needs from the trainers it shares its attention
// with (layout.sp of them, config/parallel_layout.hpp). The model stays free of MPI:
// comm/mpi_sequence_group.hpp implements this over the sequence-parallel communicator.
#pragma once

#include <cstddef>
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

// One member's side of a group's exchanges: a part per member to fill, sent together,
// and what every member sent this one. Buffers are reused from exchange to exchange
// (a part or packed copy over 1 MiB is given back after its send).
class GroupParts {
 public:
  std::vector<char>& to(int member);  // the part for member, appended to until the next send
  // Sends every part (then empties them) by all-to-all, or point to point when the
  // bytes each member sends this one are `expected` (SequenceGroup::pass).
  void send(SequenceGroup& group, const std::vector<int>* expected = nullptr);
  const char* from(int member) const { return received_at_[std::size_t(member)]; }  // valid until the next send
  double bytes_to_others(int me) const;  // of the last send

 private:
  std::vector<std::vector<char>> parts_;
  std::vector<char> send_, receive_;
  std::vector<int> send_bytes_, receive_bytes_;
  std::vector<const char*> received_at_;
};

}  // namespace strata::model
