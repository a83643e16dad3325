// GroupParts: packing one exchange's parts and finding each member's in what came back.
#include "model/sequence_group.hpp"

#include <algorithm>

namespace strata::model {

namespace {

// A part or packed send buffer larger than this is given back after its send: a long
// history's payload would otherwise stay resident twice (the parts and their packed
// copy) between steps, on top of what the step holds. Smaller ones keep their
// capacity, so steady steps allocate nothing.
constexpr size_t kRetainedBytes = size_t(1) << 20;

void clear_or_release(std::vector<char>& buffer) {
  if (buffer.capacity() > kRetainedBytes) {
    std::vector<char>().swap(buffer);
  } else {
    buffer.clear();
  }
}

}  // namespace

std::vector<char>& GroupParts::to(int member) {
  if (parts_.size() <= size_t(member)) parts_.resize(size_t(member) + 1);
  return parts_[size_t(member)];
}

void GroupParts::send(SequenceGroup& group, const std::vector<int>* expected) {
  const int k = group.size();
  parts_.resize(std::max(parts_.size(), size_t(k)));
  send_.clear();
  send_bytes_.assign(size_t(k), 0);
  for (int m = 0; m < k; ++m) {
    send_bytes_[size_t(m)] = int(parts_[size_t(m)].size());
    send_.insert(send_.end(), parts_[size_t(m)].begin(), parts_[size_t(m)].end());
    clear_or_release(parts_[size_t(m)]);
  }
  if (expected != nullptr) {
    receive_bytes_ = *expected;
    group.pass(send_, send_bytes_, receive_, receive_bytes_);
  } else {
    group.exchange(send_, send_bytes_, receive_, receive_bytes_);
  }
  clear_or_release(send_);  // the exchange is complete: only what arrived is read
  received_at_.assign(size_t(k), nullptr);
  const char* at = receive_.data();
  for (int m = 0; m < k; ++m) {
    received_at_[size_t(m)] = at;
    at += receive_bytes_[size_t(m)];
  }
}

double GroupParts::bytes_to_others(int me) const {
  double sum = 0;
  for (int m = 0; m < int(send_bytes_.size()); ++m)
    if (m != me) sum += send_bytes_[size_t(m)];
  return sum;
}

}  // namespace strata::model
