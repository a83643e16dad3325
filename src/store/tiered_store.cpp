#include "store/tiered_store.hpp"

#include <algorithm>
#include <cstring>

#include "comm/collectives.hpp"
#include "comm/link_model.hpp"
#include "comm/mpi_channel.hpp"
#include "comm/wire.hpp"
#include "common/error.hpp"
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
  request_table_.resize(trainers_);
  request_index_.resize(trainers_);
  send_bytes_.resize(trainers_);
  receive_bytes_.resize(trainers_);
}

void TieredStore::stage(const char* staging, size_t bytes, double batch_wait_s) {
  const StagingView message = read_staging(staging, bytes);
  std::copy(message.stats, message.stats + kProducerStats, producer_stats_);
  if (reports_producer_ && !message.note.empty()) notes_.push_back(message.note);
  if (message.switch_to_ps) {
    // Scheme A from this step on: every dirty row goes down to the servers,
    // which then serve pulls and apply pushes exactly as in ps mode.
    flush();
    fell_back_ = true;
    return;
  }
  write_back_.clear();
  l1_.apply(message, write_back_);
  if (!message.serve_offsets.empty() && message.serve_offsets.size != static_cast<size_t>(trainers_) + 1) {
    throw Error("staging plan serves " + std::to_string(message.serve_offsets.size - 1) + " trainers, there are " +
                std::to_string(trainers_) + " (protocol bug)");
  }
  serve_offsets_.assign(message.serve_offsets.begin(), message.serve_offsets.end());
  if (serve_offsets_.empty()) serve_offsets_.assign(trainers_ + 1, 0);
  serve_slots_.assign(message.serve_slots.begin(), message.serve_slots.end());
  staged_round_ = message.round;
  counters_.l1_evictions += message.evict_slots.size;
  counters_.l1_write_backs += write_back_.size();
  counters_.bytes_staged += message.insert_values.size * sizeof(float);
  counters_.bytes_written_back += write_back_.values.size() * sizeof(float);
  comm::LinkModel::transfer(comm::Link::kHostToDevice, message.insert_values.size * sizeof(float));
  if (write_back_.size()) {
    comm::LinkModel::transfer(comm::Link::kHostToDevice, write_back_.values.size() * sizeof(float));
  }
  // Every staged round is answered, even with no rows, so the producer knows
  // the evicted rows of that round are safe to serve again. Sent without
  // waiting: the producer collects write-backs inside all its waits.
  std::vector<char> buffer;
  comm::ByteWriter writer(buffer);
  writer.put(WriteBackHeader{WriteBackKind::kRound, message.round, batch_wait_s});
  append_row_block(write_back_, buffer);
  send_write_back(std::move(buffer));
}

void TieredStore::send_write_back(std::vector<char>&& buffer) {
  while (!write_backs_.empty() && comm::completed(write_backs_.front().request)) write_backs_.pop_front();
  write_backs_.push_back({MPI_REQUEST_NULL, std::move(buffer)});
  write_backs_.back().request = comm::send_bytes(world_, producer_rank_, comm::kTagWriteBack, write_backs_.back().bytes);
}

size_t TieredStore::served_rows(int requester) const {
  return static_cast<size_t>(serve_offsets_[requester + 1] - serve_offsets_[requester]);
}

void TieredStore::build_requests(const data::Batch& batch) {
  for (int o = 0; o < trainers_; ++o) request_table_[o].clear(), request_index_[o].clear();
  for (int t = 0; t < num_tables_; ++t) {
    const auto& unique = batch.tables[t].unique_keys;
    for (size_t u = 0; u < unique.size(); ++u) {
      const int o = owner_of(t, unique[u], trainers_);
      request_table_[o].push_back(t);
      request_index_[o].push_back(static_cast<uint32_t>(u));
    }
  }
}

void TieredStore::pull(const data::Batch& batch, std::vector<std::vector<float>>& rows, bool for_training) {
  if (!for_training || fell_back_) {
    servers_.pull(batch, rows, for_training);
    traffic_ = servers_.traffic();
    return;
  }
  rows.resize(num_tables_);
  size_t total = 0;
  for (int t = 0; t < num_tables_; ++t) {
    rows[t].resize(batch.tables[t].unique_keys.size() * dim_);
    total += batch.tables[t].unique_keys.size();
  }
  if (trainers_ == 1) {
    // Every row is this trainer's own, planned in table-then-key order.
    if (served_rows(0) != total) {
      throw Error("staging plan of round " + std::to_string(staged_round_) + " serves " +
                  std::to_string(served_rows(0)) + " rows, the batch has " + std::to_string(total) + " (protocol bug)");
    }
    size_t at = 0;
    for (int t = 0; t < num_tables_; ++t) {
      const size_t n = batch.tables[t].unique_keys.size();
      l1_.gather(serve_slots_.data() + at, n, rows[t].data());
      at += n;
    }
    return;
  }
  // Owners gather every requester's rows (one run of slots, requesters in rank
  // order) and send them; each requester scatters what comes back.
  build_requests(batch);
  const size_t row_bytes = sizeof(float) * dim_;
  send_values_.resize(serve_slots_.size() * dim_);
  l1_.gather(serve_slots_.data(), serve_slots_.size(), send_values_.data());
  size_t requested = 0;
  for (int r = 0; r < trainers_; ++r) {
    send_bytes_[r] = static_cast<int>(served_rows(r) * row_bytes);
    receive_bytes_[r] = static_cast<int>(request_table_[r].size() * row_bytes);
    requested += request_table_[r].size();
  }
  receive_values_.resize(requested * dim_);
  comm::alltoallv(send_values_.data(), send_bytes_, receive_values_.data(), receive_bytes_, trainers_comm_);
  counters_.bytes_all_to_all += serve_slots_.size() * row_bytes;
  const float* at = receive_values_.data();
  for (int o = 0; o < trainers_; ++o) {
    for (size_t i = 0; i < request_table_[o].size(); ++i, at += dim_) {
      std::memcpy(rows[request_table_[o][i]].data() + static_cast<size_t>(request_index_[o][i]) * dim_, at, row_bytes);
    }
  }
}

void TieredStore::push(const data::Batch& batch, const std::vector<std::vector<float>>& grads) {
  if (fell_back_) {
    servers_.push(batch, grads);
    traffic_ = servers_.traffic();
    return;
  }
  // Every served slot may receive a gradient: sized once, not doubled.
  l1_.reserve_gradients(serve_slots_.size());
  if (trainers_ == 1) {
    size_t at = 0;
    for (int t = 0; t < num_tables_; ++t) {
      const size_t n = batch.tables[t].unique_keys.size();
      l1_.add_gradients(serve_slots_.data() + at, n, grads[t].data());
      at += n;
    }
    l1_.apply_step();
    return;
  }
  const size_t row_bytes = sizeof(float) * dim_;
  size_t requested = 0;
  for (int o = 0; o < trainers_; ++o) requested += request_table_[o].size();
  send_values_.resize(requested * dim_);
  float* out = send_values_.data();
  for (int o = 0; o < trainers_; ++o) {
    for (size_t i = 0; i < request_table_[o].size(); ++i, out += dim_) {
      std::memcpy(out, grads[request_table_[o][i]].data() + size_t(request_index_[o][i]) * dim_, row_bytes);
    }
    send_bytes_[o] = static_cast<int>(request_table_[o].size() * row_bytes);
    receive_bytes_[o] = static_cast<int>(served_rows(o) * row_bytes);
  }
  receive_values_.resize(serve_slots_.size() * dim_);
  comm::alltoallv(send_values_.data(), send_bytes_, receive_values_.data(), receive_bytes_, trainers_comm_);
  counters_.bytes_all_to_all += requested * row_bytes;
  // Requester segments arrive in rank order, as the serve slots list them:
  // the same summation order as the servers'.
  l1_.add_gradients(serve_slots_.data(), serve_slots_.size(), receive_values_.data());
  l1_.apply_step();
}

void TieredStore::flush() {
  if (flushed_) return;
  write_down(WriteBackKind::kFlush, -1);
  while (!write_backs_.empty()) {
    comm::wait(write_backs_.front().request);
    write_backs_.pop_front();
  }
  int done = 0;
  MPI_Request request = comm::receive_value(done, producer_rank_, comm::kTagFlushDone, world_);
  comm::wait(request);
  // Every producer has written its L2 down once every trainer has heard from its own.
  comm::barrier(trainers_comm_);
  flushed_ = true;
}

void TieredStore::prepare_checkpoint(int64_t step) {
  if (flushed_) return;  // after a switch to Scheme A the servers hold everything
  write_down(WriteBackKind::kCheckpoint, step);  // marked clean: the rows stay in L1
}

void TieredStore::write_down(WriteBackKind last_kind, int64_t round) {
  // Parts of 4 MiB of rows, at most four in flight: an L1 of any size never
  // becomes one message (MPI counts are int), the buffers are reused instead
  // of touching fresh memory for the whole L1, and wide rows (dim 64 with
  // Adam: 512 bytes) do not make the parts wider than the bound.
  constexpr size_t kPartBytes = size_t(4) << 20, kPartsInFlight = 4;
  const size_t part_rows = std::max<size_t>(1, kPartBytes / (size_t(l1_.width()) * sizeof(float)));
  std::vector<char> spare;
  l1_.collect_dirty(part_rows, [&](const RowBlock& part, bool last) {
    counters_.bytes_written_back += part.values.size() * sizeof(float);
    while (write_backs_.size() >= kPartsInFlight) {
      comm::wait(write_backs_.front().request);
      spare = std::move(write_backs_.front().bytes);
      write_backs_.pop_front();
    }
    spare.clear();
    comm::ByteWriter writer(spare);
    writer.put(WriteBackHeader{last ? last_kind : WriteBackKind::kWriteDownPart, round});
    append_row_block(part, spare);
    write_backs_.push_back({MPI_REQUEST_NULL, std::move(spare)});
    write_backs_.back().request =
        comm::send_bytes(world_, producer_rank_, comm::kTagWriteBack, write_backs_.back().bytes);
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
