#include "runtime/server_role.hpp"

#include <spdlog/spdlog.h>

#include <cstring>
#include <string>
#include <vector>

#include "comm/collectives.hpp"
#include "comm/mpi_channel.hpp"
#include "comm/stall_watchdog.hpp"
#include "comm/wire.hpp"
#include "common/error.hpp"
#include "io/checkpoint_file.hpp"
#include "model/optimizers.hpp"
#include "runtime/checkpointing.hpp"
#include "runtime/preemption.hpp"
#include "runtime/shared_tables.hpp"
#include "store/server_protocol.hpp"
#include "store/server_shard.hpp"
#include "store/staging_message.hpp"
#include "store/tiered_protocol.hpp"

namespace strata::runtime {
namespace {

using store::RequestHeader;
using store::ServerOp;

struct Request {
  RequestHeader header{};
  std::vector<char> bytes;
};

// Who sends this server one request per round: its model's trainers and, for a
// model whose tables others share ([models] share_tables), their trainers after them.
struct Requester {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;             // in comm
  bool takes_dump = false;  // its model's trainer 0: the final dump goes to it
  std::string name;         // for the stall report
};

std::vector<Requester> requesters_of(const RankContext& context) {
  const RoleLayout& layout = context.layout;
  std::vector<Requester> out;
  for (int t = 0; t < layout.trainers(); ++t) {
    const int rank = layout.world_rank(Role::kTrainer, t);
    out.push_back({context.job, rank, t == 0, comm::StallWatchdog::name_rank(rank)});
  }
  if (const SharedTablesPlan* tables = shared_tables()) {
    for (size_t g = 0; g < tables->guest_trainers.size(); ++g) {
      out.push_back({tables->world, tables->guest_trainers[g], tables->guest_takes_dump[g],
                     "the trainer at co-training rank " + std::to_string(tables->guest_trainers[g]) +
                         " (a model sharing this model's tables)"});
    }
  }
  return out;
}

// Receives this round's request from every trainer. A trainer's later request
// stays queued in MPI (same source, same tag: non-overtaking) until the next round.
// Answers every producer request (tiered mode) that has arrived; true if any did.
bool serve_producers(MPI_Comm job, store::ServerShard& shard, std::vector<char>& buffer, std::vector<char>& reply) {
  bool any = false;
  while (true) {
    MPI_Message message;
    MPI_Status status;
    if (!comm::probe_politely(job, MPI_ANY_SOURCE, comm::kTagProducerRequest, message, status, false)) {
      return any;
    }
    any = true;
    comm::receive_matched(message, status, buffer);
    comm::ByteReader reader(buffer.data(), buffer.size(), "producer request");
    const auto op = reader.get<store::ProducerOp>();
    reply.clear();
    if (op == store::ProducerOp::kFetch) {
      store::RowBlock rows;
      rows.width = shard.rows().width();
      reader.get_vector(rows.ids);
      reader.expect_end();
      rows.values.resize(rows.ids.size() * rows.width);
      shard.fetch_full(rows.ids.data(), rows.ids.size(), rows.values.data());
      store::append_row_block(rows, reply);
    } else if (op == store::ProducerOp::kWriteBack || op == store::ProducerOp::kWriteBackSync) {
      reader.skip_padding(8);
      const size_t used = buffer.size() - reader.remaining();
      store::RowBlock rows = store::read_row_block(buffer.data() + used, reader.remaining());
      if (rows.size() && rows.width != shard.rows().width()) throw Error("write-back of rows with the wrong width");
      shard.store_full(rows.ids.data(), rows.size(), rows.values.data());
    } else {
      throw Error("server got unknown producer op " + std::to_string(static_cast<uint32_t>(op)));
    }
    if (op == store::ProducerOp::kWriteBack) continue;  // asynchronous: no acknowledgement
    // Replies and acknowledgements: sent before the next request is read keeps
    // the order simple (a polite wait, watched like every other).
    const int producer = status.MPI_SOURCE;
    comm::WaitingFor waiting([producer] { return comm::StallWatchdog::name_rank(producer) + " to take its rows"; });
    MPI_Request sent = comm::send_bytes(job, producer, comm::kTagProducerReply, reply);
    comm::wait_politely(sent);
  }
}

constexpr comm::Pace kTieredIdlePace{3, 5, 1000};

// `idle_pace`: how to poll until the first trainer request of the round
// arrives (after it, the others are waited for promptly).
void receive_round(MPI_Comm job, const std::vector<Requester>& from, std::vector<Request>& requests,
                   store::ServerShard& shard, const comm::Pace& idle_pace) {
  std::vector<char> producer_buffer, producer_reply;
  const int trainers = static_cast<int>(from.size());
  std::vector<bool> received(trainers, false);
  int remaining = trainers;
  comm::WaitingFor waiting([&] {
    std::string missing;
    for (int t = 0; t < trainers; ++t) {
      if (!received[t]) missing += (missing.empty() ? "" : ", ") + from[t].name;
    }
    return "the requests of the round from " + missing;
  });
  comm::Backoff backoff(idle_pace);
  while (remaining > 0) {
    bool progressed = false;
    for (int t = 0; t < trainers; ++t) {
      if (received[t]) continue;
      MPI_Message message;
      MPI_Status status;
      if (!comm::probe_politely(from[t].comm, from[t].rank, comm::kTagServerRequest, message, status,
                                /*block=*/false)) {
        continue;
      }
      comm::receive_matched(message, status, requests[t].bytes);
      comm::ByteReader reader(requests[t].bytes.data(), requests[t].bytes.size(), "server request");
      requests[t].header = reader.get<RequestHeader>();
      received[t] = true;
      --remaining;
      progressed = true;
      if (remaining + 1 == trainers) backoff.set_pace({});
    }
    if (serve_producers(job, shard, producer_buffer, producer_reply)) progressed = true;
    if (progressed) {
      backoff.reset();
    } else {
      backoff.pause();
    }
  }
}

}  // namespace

// This server's part of a checkpoint: every row it holds, in its own order.
void write_checkpoint_rows(MPI_Comm job, const RunOptions& options, const store::ServerShard& shard, const CheckpointStamp& stamp) {
  const store::RowTable& rows = shard.rows();
  io::SparseRows mine;
  mine.width = rows.width();
  mine.ids.reserve(rows.size());
  mine.counts.reserve(rows.size());
  mine.values.resize(rows.size() * rows.width());
  for (size_t slot = 0; slot < rows.size(); ++slot) {
    mine.ids.push_back(rows.id(static_cast<int64_t>(slot)));
    mine.counts.push_back(rows.access_count(static_cast<int64_t>(slot)));
    std::copy(rows.row(static_cast<int64_t>(slot)), rows.row(static_cast<int64_t>(slot)) + rows.width(),
              mine.values.data() + slot * rows.width());
  }
  io::CheckpointWriter writer(job, checkpoint_temporary(options, stamp.step),
                              checkpoint_header(options, stamp));
  writer.write_dense({}, {}, {}, false);
  writer.write_trainer_state(io::TrainerState{}, false);
  writer.write_rows(mine);
  writer.write_producers(nullptr, nullptr);
  writer.close();
}

// Resume: the servers read the file's rows in equal slices and send each row
// to the server that owns it under this run's layout (server_of), so any
// number of servers can continue any checkpoint.
void restore_rows(const RankContext& context, const ResumePoint& resume, store::ServerShard& shard) {
  io::CheckpointReader reader(MPI_COMM_SELF, resume.path);
  const int servers = context.layout.servers();
  const int64_t total = reader.num_rows();
  const int64_t begin = total * context.index / servers, end = total * (context.index + 1) / servers;
  const io::SparseRows slice = reader.read_rows(begin, end);
  const int width = shard.rows().width();
  if (slice.ids.size() && slice.width != width) {
    throw Error(resume.path + ": rows of width " + std::to_string(slice.width) + ", this run's rows have " +
                    std::to_string(width),
                "resume with the embedding_dim and sparse optimizer the checkpoint was written with");
  }
  // Per destination: [id, count, values] records.
  const size_t record = sizeof(store::RowId) + sizeof(uint64_t) + sizeof(float) * width;
  std::vector<std::vector<char>> outgoing(servers);
  for (size_t i = 0; i < slice.ids.size(); ++i) {
    auto& out = outgoing[store::server_of(slice.ids[i].table, slice.ids[i].key, servers)];
    comm::ByteWriter writer(out);
    writer.put(slice.ids[i]);
    writer.put(slice.counts[i]);
    writer.append(slice.values.data() + i * width, sizeof(float) * width);
  }
  std::vector<int> send_counts(servers), receive_counts;
  std::vector<char> send, receive;
  for (int s = 0; s < servers; ++s) {
    send_counts[s] = static_cast<int>(outgoing[s].size());
    send.insert(send.end(), outgoing[s].begin(), outgoing[s].end());
  }
  comm::alltoallv_sized_here(send, send_counts, receive, receive_counts, context.role_comm);
  const size_t n = receive.size() / record;
  std::vector<store::RowId> ids(n);
  std::vector<uint64_t> counts(n);
  std::vector<float> values(n * width);
  for (size_t i = 0; i < n; ++i) {
    const char* p = receive.data() + i * record;
    std::memcpy(&ids[i], p, sizeof(store::RowId));
    std::memcpy(&counts[i], p + sizeof(store::RowId), sizeof(uint64_t));
    std::memcpy(values.data() + i * width, p + sizeof(store::RowId) + sizeof(uint64_t), sizeof(float) * width);
  }
  shard.restore_rows(ids.data(), n, values.data(), counts.data());
  spdlog::debug("server {}: restored {} rows from {}", context.index, n, resume.path);
}

ServerReport run_server(const RunOptions& options, const RankContext& context, const ResumePoint& resume) {
  store::ServerShardOptions shard_options;
  shard_options.dim = options.model.embedding_dim;
  shard_options.seed = options.train.seed;
  shard_options.row_init_scale = options.model.row_init_scale;
  store::ServerShard shard(shard_options, model::make_sparse_optimizer(options.optim));
  const int dim = shard.dim();
  if (resume.active()) restore_rows(context, resume, shard);

  const std::vector<Requester> from = requesters_of(context);
  const int requesters = static_cast<int>(from.size());
  std::vector<Request> requests(requesters);
  std::vector<std::vector<char>> replies(requesters);
  std::vector<MPI_Request> pending;
  std::vector<uint32_t> tables;
  ServerReport report;

  start_stall_watchdog(options, context);
  if (const SharedTablesPlan* tables = shared_tables(); tables != nullptr && tables->idle_server) stop_stall_watchdog();
  const CpuTimes cpu_start = process_cpu_times();
  bool training = true;
  while (true) {
    comm::StallWatchdog::set_step("request round", report.rounds + 1);
    // Tiered training asks this rank only for its producers' L3 fetches and
    // write-backs, which the look-ahead issues rounds early: until a trainer's
    // request comes (evaluation, the dump, a fallback to Scheme A) it polls at
    // 1 ms, leaving the cores to the producer and trainers.
    receive_round(context.job, from, requests, shard,
                  options.store.mode == "tiered" && report.rounds == 0 ? kTieredIdlePace : comm::Pace{});
    {
      comm::WaitingFor waiting([] { return std::string("the trainers to take its replies"); });
      comm::wait_all_politely(pending);  // reply buffers are reused below
    }
    const ServerOp op = requests[0].header.op;
    for (const auto& r : requests) {
      if (r.header.op != op) {
        throw Error("server " + std::to_string(context.index) + " got different requests in one round",
                    "trainers fell out of step; this is a protocol bug");
      }
    }
    ++report.rounds;
    if (training && (op == ServerOp::kPullEval || op == ServerOp::kDump || op == ServerOp::kStop)) {
      training = false;
      report.train_cpu = process_cpu_times() - cpu_start;
      report.training_rss_mib = process_peak_rss_mib();
    }
    if (op == ServerOp::kDump || op == ServerOp::kStop) stop_stall_watchdog();  // the final dump is not watched
    if (op == ServerOp::kStop) break;

    if (op == ServerOp::kPullTrain || op == ServerOp::kPullEval) {
      for (int t = 0; t < requesters; ++t) {
        comm::ByteReader reader(requests[t].bytes.data(), requests[t].bytes.size(), "pull request");
        reader.get<RequestHeader>();
        const comm::Span<uint32_t> count_view = reader.view_array<uint32_t>();
        const comm::Span<uint64_t> key_view = reader.view_array<uint64_t>();
        const uint32_t* counts = count_view.data;
        const uint64_t* keys = key_view.data;
        const uint64_t num_counts = count_view.size, num_keys = key_view.size;
        reader.expect_end();
        tables.clear();
        for (uint64_t table = 0; table < num_counts; ++table) tables.insert(tables.end(), counts[table], table);
        if (tables.size() != num_keys) throw Error("pull request: table counts do not add up to the key count");
        replies[t].resize(num_keys * dim * sizeof(float));
        float* values = reinterpret_cast<float*>(replies[t].data());
        if (op == ServerOp::kPullTrain) {
          shard.pull_for_training(t, tables.data(), keys, num_keys, values);
        } else {
          shard.pull_read_only(tables.data(), keys, num_keys, values);
        }
        pending.push_back(comm::send_bytes(from[t].comm, from[t].rank, comm::kTagServerReply, replies[t]));
      }
    } else if (op == ServerOp::kPush) {
      for (int t = 0; t < requesters; ++t) {  // rank order (then the sharing models'): the sums' fixed order
        comm::ByteReader reader(requests[t].bytes.data(), requests[t].bytes.size(), "push request");
        reader.get<RequestHeader>();
        const comm::Span<float> grad_view = reader.view_array<float>();
        const float* grads = grad_view.data;
        const uint64_t count = grad_view.size;
        reader.expect_end();
        shard.add_gradients(t, grads, count / dim);
      }
      shard.apply_step();
    } else if (op == ServerOp::kDump) {
      const store::RowTable& rows = shard.rows();
      std::vector<store::RowId> ids;
      std::vector<uint64_t> counts;
      std::vector<float> values;
      for (int64_t slot : rows.sorted_slots()) {
        ids.push_back(rows.id(slot));
        counts.push_back(rows.access_count(slot));
        values.insert(values.end(), rows.row(slot), rows.row(slot) + rows.width());
      }
      replies[0].clear();
      comm::ByteWriter writer(replies[0]);
      writer.put<int32_t>(rows.width());
      writer.put_vector(ids);
      writer.put_vector(counts);
      writer.put_vector(values);
      for (const Requester& to : from) {  // one buffer for every model's trainer 0
        if (to.takes_dump) pending.push_back(comm::send_bytes(to.comm, to.rank, comm::kTagServerReply, replies[0]));
      }
    } else if (op == ServerOp::kCheckpoint) {
      comm::ByteReader reader(requests[0].bytes.data(), requests[0].bytes.size(), "checkpoint request");
      reader.get<RequestHeader>();
      const auto stamp = reader.get<CheckpointStamp>();
      reader.expect_end();
      write_checkpoint_rows(context.job, options, shard, stamp);
      if (stamp.preempted) {
        spdlog::debug("server {}: checkpoint for a preemption written", context.index);
      }
    } else {
      throw Error("server got unknown op " + std::to_string(static_cast<uint32_t>(op)));
    }
  }
  comm::wait_all_politely(pending);
  report.rows = static_cast<int64_t>(shard.rows().size());
  report.memory_bytes = shard.rows().memory_bytes();
  spdlog::debug("server {} done: {} rounds, {} rows, {:.1f} MiB", context.index, report.rounds, report.rows,
                report.memory_bytes / 1048576.0);
  return report;
}

}  // namespace strata::runtime
