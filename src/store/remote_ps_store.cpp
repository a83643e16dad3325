#include "store/remote_ps_store.hpp"

#include <algorithm>
#include <cstring>

#include "comm/link_model.hpp"
#include "comm/mpi_channel.hpp"
#include "comm/wire.hpp"
#include "store/server_protocol.hpp"

namespace strata::store {

RemotePsStore::RemotePsStore(MPI_Comm world, std::vector<int> server_ranks, int trainer_index, int dim,
                             int num_tables)
    : world_(world),
      server_ranks_(std::move(server_ranks)),
      trainer_index_(trainer_index),
      dim_(dim),
      num_tables_(num_tables),
      requests_(server_ranks_.size()) {}

RemotePsStore::~RemotePsStore() {
  // Outstanding sends must complete before their buffers go away.
  for (auto& request : pending_sends_) {
    if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);
  }
}

void RemotePsStore::finish_pending_sends() { comm::wait_all_politely(pending_sends_); }

void RemotePsStore::pull(const data::Batch& batch, std::vector<std::vector<float>>& rows, bool for_training) {
  finish_pending_sends();
  const int servers = static_cast<int>(server_ranks_.size());
  for (auto& r : requests_) {
    r.counts.assign(num_tables_, 0);
    r.keys.clear();
    r.tables.clear();
    r.unique_index.clear();
  }
  rows.resize(num_tables_);
  for (int t = 0; t < num_tables_; ++t) {
    const auto& unique = batch.tables[t].unique_keys;
    rows[t].resize(unique.size() * dim_);
    for (size_t u = 0; u < unique.size(); ++u) {
      ServerRequest& r = requests_[server_of(t, unique[u], servers)];
      r.counts[t] += 1;
      r.keys.push_back(unique[u]);
      r.tables.push_back(t);
      r.unique_index.push_back(static_cast<uint32_t>(u));
    }
  }
  const ServerOp op = for_training ? ServerOp::kPullTrain : ServerOp::kPullEval;
  for (int s = 0; s < servers; ++s) {
    ServerRequest& r = requests_[s];
    r.send_buffer.clear();
    comm::ByteWriter writer(r.send_buffer);
    writer.put(RequestHeader{op, static_cast<uint32_t>(num_tables_), step_});
    writer.put_vector(r.counts);
    writer.put_vector(r.keys);
    traffic_.bytes_requested += r.send_buffer.size();
    pending_sends_.push_back(comm::send_bytes(world_, server_ranks_[s], comm::kTagServerRequest, r.send_buffer));
  }
  for (int s = 0; s < servers; ++s) {
    ServerRequest& r = requests_[s];
    double waited = 0;
    comm::receive_bytes(world_, server_ranks_[s], comm::kTagServerReply, r.reply_buffer, &waited);
    traffic_.pull_wait_s += waited;
    const size_t n = r.keys.size();
    if (r.reply_buffer.size() != n * dim_ * sizeof(float)) {
      throw Error("server " + std::to_string(s) + " answered " + std::to_string(r.reply_buffer.size()) +
                      " bytes for " + std::to_string(n) + " rows of dim " + std::to_string(dim_),
                  "every rank must run the same build and deck");
    }
    const float* values = reinterpret_cast<const float*>(r.reply_buffer.data());
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(rows[r.tables[i]].data() + static_cast<size_t>(r.unique_index[i]) * dim_, values + i * dim_,
                  sizeof(float) * dim_);
    }
    traffic_.rows_pulled += n;
    traffic_.bytes_pulled += r.reply_buffer.size();
    comm::LinkModel::transfer(comm::Link::kNetwork, r.send_buffer.size() + r.reply_buffer.size());
  }
  finish_pending_sends();
}

void RemotePsStore::push(const data::Batch& /*batch*/, const std::vector<std::vector<float>>& grads) {
  const int servers = static_cast<int>(server_ranks_.size());
  for (int s = 0; s < servers; ++s) {
    ServerRequest& r = requests_[s];
    const size_t n = r.keys.size();
    r.send_buffer.clear();
    comm::ByteWriter writer(r.send_buffer);
    writer.put(RequestHeader{ServerOp::kPush, static_cast<uint32_t>(num_tables_), step_});
    writer.put<uint64_t>(n * dim_);
    size_t at = r.send_buffer.size();
    r.send_buffer.resize(at + n * dim_ * sizeof(float));
    float* out = reinterpret_cast<float*>(r.send_buffer.data() + at);
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(out + i * dim_, grads[r.tables[i]].data() + static_cast<size_t>(r.unique_index[i]) * dim_,
                  sizeof(float) * dim_);
    }
    traffic_.rows_pushed += n;
    traffic_.bytes_pushed += r.send_buffer.size();
    comm::LinkModel::transfer(comm::Link::kNetwork, r.send_buffer.size());
    pending_sends_.push_back(comm::send_bytes(world_, server_ranks_[s], comm::kTagServerRequest, r.send_buffer));
  }
  ++step_;
  // The sends complete in the background; the next pull waits for them first.
}

void RemotePsStore::send_header_only(ServerOp op, const void* payload, size_t bytes) {
  finish_pending_sends();
  std::vector<std::vector<char>> buffers(server_ranks_.size());
  for (size_t s = 0; s < server_ranks_.size(); ++s) {
    comm::ByteWriter writer(buffers[s]);
    writer.put(RequestHeader{op, static_cast<uint32_t>(num_tables_), step_});
    if (bytes) writer.append(payload, bytes);
    pending_sends_.push_back(comm::send_bytes(world_, server_ranks_[s], comm::kTagServerRequest, buffers[s]));
  }
  finish_pending_sends();
}

RowDump RemotePsStore::dump_rows() {
  send_header_only(ServerOp::kDump);
  if (trainer_index_ != 0) return {};
  std::vector<RowDump> shards(server_ranks_.size());
  std::vector<char> buffer;
  for (size_t s = 0; s < server_ranks_.size(); ++s) {
    comm::receive_bytes(world_, server_ranks_[s], comm::kTagServerReply, buffer);
    comm::ByteReader reader(buffer.data(), buffer.size(), "row dump");
    shards[s].width = reader.get<int32_t>();
    reader.get_vector(shards[s].ids);
    reader.get_vector(shards[s].counts);
    reader.get_vector(shards[s].values);
    reader.expect_end();
  }
  if (shards.size() == 1) return std::move(shards[0]);
  // Each shard is sorted by (table, key): merge them into the global order.
  RowDump merged;
  merged.width = shards[0].width;
  size_t total = 0;
  for (const RowDump& shard : shards) total += shard.ids.size();
  merged.ids.reserve(total);
  merged.counts.reserve(total);
  merged.values.reserve(total * merged.width);
  std::vector<size_t> next(shards.size(), 0);
  for (size_t n = 0; n < total; ++n) {
    size_t from = shards.size();
    for (size_t s = 0; s < shards.size(); ++s) {
      if (next[s] < shards[s].ids.size() && (from == shards.size() || shards[s].ids[next[s]] < shards[from].ids[next[from]])) {
        from = s;
      }
    }
    const size_t i = next[from]++;
    merged.ids.push_back(shards[from].ids[i]);
    merged.counts.push_back(shards[from].counts[i]);
    const float* row = shards[from].values.data() + i * merged.width;
    merged.values.insert(merged.values.end(), row, row + merged.width);
  }
  return merged;
}

void RemotePsStore::shutdown() { send_header_only(ServerOp::kStop); }

void RemotePsStore::checkpoint_servers(const void* stamp, size_t bytes) {
  send_header_only(ServerOp::kCheckpoint, stamp, bytes);
}

}  // namespace strata::store
