#include "store/tiered_store.hpp"

#include <algorithm>
#include <cstring>

#include "comm/link_model.hpp"
#include "comm/mpi_channel.hpp"
#include "comm/wire.hpp"
#include "store/tiered_protocol.hpp"

namespace strata::store {

TieredStore::TieredStore(MPI_Comm world, MPI_Comm trainers, int producer_rank, std::vector<int> server_ranks,
                         int trainer_index, int dim, int num_tables, int64_t l1_rows,
                         std::unique_ptr<model::SparseOptimizer> optimizer, bool reports_producer)
    : world_(world),
      trainers_comm_(trainers),
      producer_rank_(producer_rank),
      trainer_index_(trainer_index),
      dim_(dim),
      num_tables_(num_tables),
      l1_(l1_rows, dim, std::move(optimizer)),
      servers_(world, std::move(server_ranks), trainer_index, dim, num_tables),
      reports_producer_(reports_producer) {
  MPI_Comm_size(trainers, &trainers_);
  table_of_request_.resize(trainers_);
  index_of_request_.resize(trainers_);
}

void TieredStore::stage(const char* staging, size_t bytes) {
  StagingMessage message = read_staging(staging, bytes);
  std::copy(message.stats, message.stats + kProducerStats, producer_stats_);
  if (reports_producer_ && !message.note.empty()) notes_.push_back(message.note);
  if (message.switch_to_ps) {
    // Scheme A from this step on: every dirty row goes down to the servers,
    // which then serve pulls and apply pushes exactly as in ps mode.
    flush();
    fell_back_ = true;
    return;
  }
  RowBlock write_back;
  l1_.apply(message, write_back);
  counters_.l1_evictions += message.evict.size();
  counters_.l1_write_backs += write_back.size();
  counters_.bytes_staged += message.insert.values.size() * sizeof(float);
  counters_.bytes_written_back += write_back.values.size() * sizeof(float);
  comm::LinkModel::transfer(comm::Link::kHostToDevice, message.insert.values.size() * sizeof(float));
  if (write_back.size()) comm::LinkModel::transfer(comm::Link::kHostToDevice, write_back.values.size() * sizeof(float));
  // Every staged round is answered, even with no rows, so the producer knows
  // the evicted rows of that round are safe to serve again.
  // Sent without waiting: the producer collects write-backs inside all its waits.
  while (!write_backs_.empty()) {
    int done = 0;
    comm::check_mpi(MPI_Test(&write_backs_.front().request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (!done) break;
    write_backs_.pop_front();
  }
  write_backs_.push_back({MPI_REQUEST_NULL, {}});
  std::vector<char>& buffer = write_backs_.back().bytes;
  comm::ByteWriter writer(buffer);
  writer.put(WriteBackHeader{WriteBackKind::kRound, message.round});
  append_row_block(write_back, buffer);
  write_backs_.back().request = comm::send_bytes(world_, producer_rank_, comm::kTagWriteBack, buffer);
}

void TieredStore::exchange(const std::vector<char>& send, const std::vector<int>& send_counts,
                           std::vector<char>& receive, std::vector<int>& receive_counts) {
  receive_counts.assign(trainers_, 0);
  comm::check_mpi(MPI_Alltoall(send_counts.data(), 1, MPI_INT, receive_counts.data(), 1, MPI_INT, trainers_comm_),
                  "MPI_Alltoall");
  exchange_sized(send, send_counts, receive, receive_counts);
}

void TieredStore::exchange_sized(const std::vector<char>& send, const std::vector<int>& send_counts,
                                 std::vector<char>& receive, const std::vector<int>& receive_counts) {
  std::vector<int> send_offsets(trainers_, 0), receive_offsets(trainers_, 0);
  int total = 0;
  for (int r = 0; r < trainers_; ++r) receive_offsets[r] = total, total += receive_counts[r];
  int at = 0;
  for (int r = 0; r < trainers_; ++r) send_offsets[r] = at, at += send_counts[r];
  receive.resize(total);
  comm::check_mpi(MPI_Alltoallv(send.data(), send_counts.data(), send_offsets.data(), MPI_BYTE, receive.data(),
                                receive_counts.data(), receive_offsets.data(), MPI_BYTE, trainers_comm_),
                  "MPI_Alltoallv");
  counters_.bytes_all_to_all += send.size();
}

void TieredStore::pull(const data::Batch& batch, std::vector<std::vector<float>>& rows, bool for_training) {
  if (!for_training || fell_back_) {
    servers_.pull(batch, rows, for_training);
    traffic_ = servers_.traffic();
    return;
  }
  // 1. Ask each owner for the rows of this batch it owns.
  std::vector<std::vector<RowId>> ids_per_owner(trainers_);
  for (int o = 0; o < trainers_; ++o) table_of_request_[o].clear(), index_of_request_[o].clear();
  rows.resize(num_tables_);
  for (int t = 0; t < num_tables_; ++t) {
    const auto& unique = batch.tables[t].unique_keys;
    rows[t].resize(unique.size() * dim_);
    for (size_t u = 0; u < unique.size(); ++u) {
      const int o = owner_of(t, unique[u], trainers_);
      ids_per_owner[o].push_back({static_cast<uint32_t>(t), unique[u]});
      table_of_request_[o].push_back(t);
      index_of_request_[o].push_back(static_cast<uint32_t>(u));
    }
  }
  std::vector<char> send, receive;
  std::vector<int> send_counts(trainers_), receive_counts;
  for (int o = 0; o < trainers_; ++o) {
    const size_t bytes = ids_per_owner[o].size() * sizeof(RowId);
    send_counts[o] = static_cast<int>(bytes);
    const size_t at = send.size();
    send.resize(at + bytes);
    if (bytes) std::memcpy(send.data() + at, ids_per_owner[o].data(), bytes);
  }
  exchange(send, send_counts, receive, receive_counts);
  received_ids_.resize(receive.size() / sizeof(RowId));
  if (!receive.empty()) std::memcpy(received_ids_.data(), receive.data(), receive.size());
  received_counts_.resize(trainers_);
  for (int r = 0; r < trainers_; ++r) received_counts_[r] = receive_counts[r] / static_cast<int>(sizeof(RowId));

  // 2. Serve them from L1 and send the values back.
  std::vector<char> values(received_ids_.size() * dim_ * sizeof(float));
  l1_.gather(received_ids_.data(), received_ids_.size(), reinterpret_cast<float*>(values.data()));
  // Both sides know the sizes: each answer is as long as its request.
  for (int r = 0; r < trainers_; ++r) send_counts[r] = received_counts_[r] * dim_ * static_cast<int>(sizeof(float));
  for (int o = 0; o < trainers_; ++o) {
    receive_counts[o] = static_cast<int>(ids_per_owner[o].size()) * dim_ * static_cast<int>(sizeof(float));
  }
  std::vector<char> answers;
  exchange_sized(values, send_counts, answers, receive_counts);

  // 3. Scatter into the batch's row buffers.
  const float* at = reinterpret_cast<const float*>(answers.data());
  for (int o = 0; o < trainers_; ++o) {
    for (size_t i = 0; i < table_of_request_[o].size(); ++i, at += dim_) {
      std::memcpy(rows[table_of_request_[o][i]].data() + static_cast<size_t>(index_of_request_[o][i]) * dim_, at,
                  sizeof(float) * dim_);
    }
  }
}

void TieredStore::push(const data::Batch& batch, const std::vector<std::vector<float>>& grads) {
  if (fell_back_) {
    servers_.push(batch, grads);
    traffic_ = servers_.traffic();
    return;
  }
  std::vector<char> send;
  std::vector<int> send_counts(trainers_), receive_counts;
  for (int o = 0; o < trainers_; ++o) {
    const size_t n = table_of_request_[o].size();
    const size_t at = send.size();
    send.resize(at + n * dim_ * sizeof(float));
    float* out = reinterpret_cast<float*>(send.data() + at);
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(out + i * dim_, grads[table_of_request_[o][i]].data() + size_t(index_of_request_[o][i]) * dim_,
                  sizeof(float) * dim_);
    }
    send_counts[o] = static_cast<int>(n * dim_ * sizeof(float));
  }
  receive_counts.resize(trainers_);
  for (int r = 0; r < trainers_; ++r) receive_counts[r] = received_counts_[r] * dim_ * static_cast<int>(sizeof(float));
  std::vector<char> receive;
  exchange_sized(send, send_counts, receive, receive_counts);
  // Requester segments arrive in rank order: the same summation order as the servers'.
  const float* g = reinterpret_cast<const float*>(receive.data());
  size_t first = 0;  // the gradients answer the rows pull() gathered, in the same order
  for (int r = 0; r < trainers_; ++r) {
    l1_.add_gradients_of_gathered(first, received_counts_[r], g);
    first += received_counts_[r];
    g += static_cast<size_t>(received_counts_[r]) * dim_;
  }
  l1_.apply_step();
}

void TieredStore::flush() {
  if (flushed_) return;
  write_down(WriteBackKind::kFlush, -1);
  while (!write_backs_.empty()) {
    comm::wait_politely(write_backs_.front().request);
    write_backs_.pop_front();
  }
  int done = 0;
  MPI_Request request;
  comm::check_mpi(MPI_Irecv(&done, 1, MPI_INT, producer_rank_, comm::kTagFlushDone, world_, &request), "MPI_Irecv");
  comm::wait_politely(request);
  // Every producer has written its L2 down once every trainer has heard from its own.
  comm::check_mpi(MPI_Barrier(trainers_comm_), "MPI_Barrier");
  flushed_ = true;
}

void TieredStore::prepare_checkpoint(int64_t step) {
  if (flushed_) return;  // after a switch to Scheme A the servers hold everything
  write_down(WriteBackKind::kCheckpoint, step);  // marked clean: the rows stay in L1
}

void TieredStore::write_down(WriteBackKind last_kind, int64_t round) {
  // Parts of 32768 rows (4 MiB at dim 16 with Adagrad), at most four in flight:
  // an L1 of any size never becomes one message (MPI counts are int), and the
  // buffers are reused instead of touching fresh memory for the whole L1.
  constexpr size_t kPartRows = 32768, kPartsInFlight = 4;
  std::vector<char> spare;
  l1_.collect_dirty(kPartRows, [&](const RowBlock& part, bool last) {
    counters_.bytes_written_back += part.values.size() * sizeof(float);
    while (write_backs_.size() >= kPartsInFlight) {
      comm::wait_politely(write_backs_.front().request);
      spare = std::move(write_backs_.front().bytes);
      write_backs_.pop_front();
    }
    spare.clear();
    write_backs_.push_back({MPI_REQUEST_NULL, std::move(spare)});
    std::vector<char>& buffer = write_backs_.back().bytes;
    comm::ByteWriter writer(buffer);
    writer.put(WriteBackHeader{last ? last_kind : WriteBackKind::kWriteDownPart, round});
    append_row_block(part, buffer);
    write_backs_.back().request = comm::send_bytes(world_, producer_rank_, comm::kTagWriteBack, buffer);
  });
}

std::vector<std::pair<const char*, double>> TieredStore::level_stats() const {
  std::vector<std::pair<const char*, double>> stats;
  for (int s = 0; s < kProducerStats; ++s) {
    stats.emplace_back(producer_stat_name(s), reports_producer_ ? producer_stats_[s] : 0.0);
  }
  stats.emplace_back("bytes_l2_to_l1", double(counters_.bytes_staged));
  stats.emplace_back("bytes_l1_to_l2", double(counters_.bytes_written_back));
  stats.emplace_back("bytes_all_to_all", double(counters_.bytes_all_to_all));
  return stats;
}

RowDump TieredStore::dump_rows() {
  flush();
  return servers_.dump_rows();
}

void TieredStore::shutdown() { servers_.shutdown(); }

}  // namespace strata::store
