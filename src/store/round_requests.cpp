#include "store/round_requests.hpp"

#include "comm/wire.hpp"
#include "common/error.hpp"

namespace strata::store {

void append_requests(const data::Batch& batch, int trainers, std::vector<OwnerRequests*>& by_owner) {
  for (size_t t = 0; t < batch.tables.size(); ++t) {
    const auto table = static_cast<uint32_t>(t);
    for (uint64_t key : batch.tables[t].unique_keys) {
      OwnerRequests* owner = by_owner[owner_of(table, key, trainers)];
      if (owner) owner->ids.push_back({table, key});
    }
  }
}

RoundExchange::RoundExchange(int producer, int producers, int trainers, MPI_Comm producers_comm)
    : producer_(producer), producers_(producers), trainers_(trainers), comm_(producers_comm) {}

bool RoundExchange::exchange(bool ok, bool lagging, const std::vector<data::Batch>& batches,
                             std::vector<OwnerRequests>& per_owner, bool& any_lagging,
                             const comm::Service& service) {
  const size_t local_owners = batches.size();
  per_owner.resize(local_owners);
  for (auto& o : per_owner) {
    o.ids.clear();
    o.offsets.assign(1, 0);
  }
  std::vector<OwnerRequests*> by_owner(trainers_, nullptr);
  if (producers_ == 1) {
    // Every owner is fed here: the requests go straight to their lists, requesters in rank order.
    any_lagging = lagging;
    if (!ok) return false;
    for (int o = 0; o < trainers_; ++o) by_owner[o] = &per_owner[o];
    for (const data::Batch& batch : batches) {
      append_requests(batch, trainers_, by_owner);
      for (auto& o : per_owner) o.offsets.push_back(static_cast<int32_t>(o.ids.size()));
    }
    return true;
  }
  // To producer q: flag, then for each of this producer's trainers the rows of
  // q's owners it asks for (q splits them by owner again).
  outgoing_.resize(producers_);
  std::vector<OwnerRequests> split(producers_);
  for (int q = 0; q < producers_; ++q) {
    outgoing_[q].clear();
    comm::ByteWriter writer(outgoing_[q]);
    writer.put<int32_t>((ok ? 1 : 0) | (lagging ? 2 : 0));
  }
  if (ok) {
    for (int o = 0; o < trainers_; ++o) by_owner[o] = &split[o % producers_];
    for (const data::Batch& batch : batches) {
      for (auto& s : split) s.ids.clear();
      append_requests(batch, trainers_, by_owner);
      for (int q = 0; q < producers_; ++q) comm::ByteWriter(outgoing_[q]).put_vector(split[q].ids);
    }
  }
  send_.clear();
  send_bytes_.assign(producers_, 0);
  for (int q = 0; q < producers_; ++q) {
    comm::ByteWriter(send_).align(8);  // each part starts 8-aligned in the receiver's buffer too
    const size_t at = send_.size();
    send_.insert(send_.end(), outgoing_[q].begin(), outgoing_[q].end());
    comm::ByteWriter(send_).align(8);
    send_bytes_[q] = static_cast<int>(send_.size() - at);
  }
  comm::alltoallv_sized_here(send_, send_bytes_, receive_, receive_bytes_, comm_, service);
  // Requester t's list comes from producer t % producers, as its (t / producers)-th.
  bool all_ok = true;
  any_lagging = false;
  std::vector<std::vector<comm::Span<RowId>>> lists(producers_);
  size_t at = 0;
  for (int q = 0; q < producers_; ++q) {
    comm::ByteReader reader(receive_.data() + at, static_cast<size_t>(receive_bytes_[q]), "round requests");
    at += static_cast<size_t>(receive_bytes_[q]);
    const auto flag = reader.get<int32_t>();
    all_ok = all_ok && (flag & 1) != 0;
    any_lagging = any_lagging || (flag & 2) != 0;
    while (reader.remaining() >= sizeof(uint64_t)) lists[q].push_back(reader.view_array<RowId>());
  }
  if (!all_ok) return false;
  for (int o = 0; o < trainers_; ++o) by_owner[o] = o % producers_ == producer_ ? &per_owner[o / producers_] : nullptr;
  for (int t = 0; t < trainers_; ++t) {
    const auto& from = lists[t % producers_];
    if (static_cast<size_t>(t / producers_) >= from.size()) {
      throw Error("round requests: no list for trainer " + std::to_string(t) + " (protocol bug)");
    }
    for (const RowId& id : from[t / producers_]) {
      OwnerRequests* owner = by_owner[owner_of(id.table, id.key, trainers_)];
      if (!owner) throw Error("round requests: a row sent to a producer that does not feed its owner (protocol bug)");
      owner->ids.push_back(id);
    }
    for (auto& o : per_owner) o.offsets.push_back(static_cast<int32_t>(o.ids.size()));
  }
  return true;
}

}  // namespace strata::store
