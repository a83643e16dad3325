// GroupParts: packing one exchange's parts and finding each member's in what came back.
#include "model/sequence_group.hpp"

#include <algorithm>

namespace strata::model {

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
    parts_[size_t(m)].clear();
  }
  if (expected != nullptr) {
    receive_bytes_ = *expected;
    group.pass(send_, send_bytes_, receive_, receive_bytes_);
  } else {
    group.exchange(send_, send_bytes_, receive_, receive_bytes_);
  }
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
