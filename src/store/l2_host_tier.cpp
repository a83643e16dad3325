#include "store/l2_host_tier.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <new>

#include "comm/link_model.hpp"
#include "comm/mpi_channel.hpp"
#include "comm/wire.hpp"
#include "common/error.hpp"
#include "store/tiered_protocol.hpp"

namespace strata::store {
namespace {
constexpr size_t kAhead = 8;  // rows in flight in each loop's prefetch
// The known-rows filter: 16 bits per cached row keeps it below 1 % false
// positives while the servers hold up to 2x the rows it caches (more rows there
// only cost fetches of rows the servers then create); 64 KiB at least, the
// fixed part outside store.l2_mb.
constexpr uint64_t kFilterBitsPerRow = 16;
constexpr uint64_t kFilterMinBits = uint64_t(1) << 19;
uint64_t filter_bits(int64_t rows) { return std::max<uint64_t>(kFilterMinBits, kFilterBitsPerRow * uint64_t(std::max<int64_t>(rows, 0))); }
// Bytes of write-backs in flight at once while L2 is written down whole.
constexpr size_t kFlushBytesInFlight = size_t(16) << 20;
}  // namespace

size_t L2HostTier::bytes_for(int64_t rows, int width) {
  if (rows <= 0) return 0;
  return RowCache::bytes_for(rows, width) + size_t(rows) * sizeof(RowUsage) + EvictionQueue::bytes_for(rows) +
         size_t(rows) * kFilterBitsPerRow / 8;
}

int64_t L2HostTier::rows_for_budget(double megabytes, int width) {
  const double budget = megabytes * 1048576.0;
  // bytes_for grows with rows (in steps, from the index): the largest count that fits.
  int64_t lo = 0, hi = static_cast<int64_t>(budget / (double(width) * sizeof(float))) + 1;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (double(bytes_for(mid, width)) <= budget) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

size_t L2HostTier::memory_bytes() const {
  if (!cache_) return on_servers_.bytes();
  return cache_->memory_bytes() + usage_.capacity() * sizeof(RowUsage) + EvictionQueue::bytes_for(cache_->arena_rows()) +
         on_servers_.bytes();
}

L2HostTier::L2HostTier(int64_t capacity_rows, int64_t arena_rows, int width, const EvictionPolicy& policy, MPI_Comm world,
                       std::vector<int> server_ranks, std::function<void()> service,
                       std::function<void(const RowId&, float*)> new_row,
                       std::function<int64_t(const RowId&)> next_use, const AccessHistory* history,
                       bool servers_may_hold_rows)
    : width_(width),
      policy_(policy),
      world_(world),
      server_ranks_(std::move(server_ranks)),
      service_(std::move(service)),
      queue_(policy),
      new_row_(std::move(new_row)),
      next_use_(std::move(next_use)),
      history_(history),
      on_servers_(filter_bits(std::max(capacity_rows, arena_rows))),
      servers_may_hold_rows_(servers_may_hold_rows) {
  if (capacity_rows > 0 || arena_rows > 0) {
    try {
      cache_ = std::make_unique<RowCache>(std::max(capacity_rows, arena_rows), width);
      cache_->set_limit(capacity_rows);
      usage_.reserve(static_cast<size_t>(cache_->arena_rows()));
      queue_.reserve(cache_->arena_rows());

    } catch (const std::bad_alloc&) {
      spdlog::warn("L2: cannot allocate {} rows ({:.1f} MiB); falling back to Scheme A for L2 traffic",
                   capacity_rows, capacity_rows * width * 4.0 / 1048576.0);
      cache_.reset();
    }
  }
}

void L2HostTier::set_refusing(bool refusing) {
  if (refusing != refusing_) {
    spdlog::info("L2: {} (store.fault_l2_every)", refusing ? "refusing new rows, serving misses from the servers (Scheme A)"
                                                          : "taking rows again");
  }
  refusing_ = refusing;
}

void L2HostTier::touch(int64_t slot, int64_t round, int64_t next_use, bool next_use_exact) {
  if (static_cast<size_t>(slot) >= usage_.size()) usage_.resize(slot + 1);
  policy_.record_access(usage_[slot], round);
  usage_[slot].next_use = next_use != INT64_MAX || next_use_exact ? next_use : next_use_(cache_->id(slot));
  queue_.update(slot, usage_[slot]);
}

void L2HostTier::set_capacity(int64_t rows) {
  if (!cache_) return;
  RowBlock spill;
  spill.width = width_;
  cache_->set_limit(std::max<int64_t>(rows, 0));
  while (cache_->size() > cache_->capacity()) {
    const int64_t victim = queue_.peek_victim();
    if (victim < 0) break;
    if (cache_->dirty(victim)) {
      spill.append(cache_->id(victim), cache_->row(victim));
      counters_.write_backs_to_l3 += 1;
    }
    if (ghosts_) ghosts_->evicted(cache_->id(victim));
    remove(victim);
    counters_.evictions += 1;
  }
  if (spill.size()) write_to_servers(spill, /*wait=*/false);
}

void L2HostTier::note_future_use(const std::vector<RowId>& ids, int64_t round) {
  if (!cache_) return;
  const size_t n = ids.size();
  for (size_t i = 0; i < n; ++i) {
    if (i + 2 * kAhead < n) cache_->prefetch(ids[i + 2 * kAhead]);
    if (i + kAhead < n) prefetch_usage(cache_->find(ids[i + kAhead]));
    const int64_t slot = cache_->find(ids[i]);
    if (slot < 0 || usage_[slot].next_use <= round) continue;
    usage_[slot].next_use = round;
    queue_.update(slot, usage_[slot]);
  }
}

void L2HostTier::prefetch_slot(int64_t slot) const {
  if (slot < 0) return;
  __builtin_prefetch(cache_->row(slot));
  prefetch_usage(slot);
}

void L2HostTier::prefetch_usage(int64_t slot) const {
  if (slot < 0) return;
  if (static_cast<size_t>(slot) < usage_.size()) __builtin_prefetch(&usage_[slot]);
  queue_.prefetch(slot);
}

void L2HostTier::remove(int64_t slot) { remove(slot, cache_->id(slot)); }

void L2HostTier::remove(int64_t slot, const RowId& id) {
  queue_.erase(slot);
  cache_->erase(slot, id);
  usage_[slot] = RowUsage{};
}

void L2HostTier::make_room(RowBlock& spill) {
  while (cache_->full()) {
    const int64_t victim = queue_.peek_victim();
    if (cache_->dirty(victim)) {
      spill.append(cache_->id(victim), cache_->row(victim));
      counters_.write_backs_to_l3 += 1;
    }
    if (ghosts_) ghosts_->evicted(cache_->id(victim));
    remove(victim);
    counters_.evictions += 1;
  }
}

void L2HostTier::read(const std::vector<RowId>& ids, int64_t round, float* values, uint8_t* dirty) {
  std::fill(dirty, dirty + ids.size(), uint8_t{0});
  queue_.set_now(round);
  if (!cache_) {
    counters_.fallback_rows += ids.size();
    counters_.misses += ids.size();
    fetch_from_servers(ids, nullptr, values);
    return;
  }
  missing_.clear();
  missing_at_.clear();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i + 2 * kAhead < ids.size()) cache_->prefetch(ids[i + 2 * kAhead]);
    if (i + kAhead < ids.size()) prefetch_slot(cache_->find(ids[i + kAhead]));
    const int64_t slot = cache_->find(ids[i]);
    if (slot < 0) {
      missing_.push_back(ids[i]);
      missing_at_.push_back(i);
      continue;
    }
    std::copy(cache_->row(slot), cache_->row(slot) + width_, values + i * width_);
    dirty[i] = cache_->dirty(slot) ? 1 : 0;
    remove(slot, ids[i]);  // promoted: L1 holds it now
  }
  counters_.misses += missing_.size();
  counters_.hits += ids.size() - missing_.size();
  if (ghosts_) {
    for (const RowId& id : missing_) ghosts_->missed(id);
  }
  if (!missing_.empty()) fetch_from_servers(missing_, &missing_at_, values);
}

void L2HostTier::write_back(const RowBlock& rows, int64_t round, const int64_t* next_use, bool next_use_exact) {
  if (rows.size() == 0) return;
  if (!cache_ || cache_->capacity() == 0) {
    counters_.fallback_rows += rows.size();
    write_to_servers(rows, /*wait=*/false);
    counters_.write_backs_to_l3 += rows.size();
    return;
  }
  RowBlock spill;
  spill.width = width_;
  const size_t n = rows.size();
  for (size_t i = 0; i < n; ++i) {
    // Two stages ahead: the row's bucket, then (bucket loaded) its slot's row and bookkeeping.
    if (i + 2 * kAhead < n) cache_->prefetch(rows.ids[i + 2 * kAhead]);
    if (i + kAhead < n) {
      prefetch_slot(cache_->find(rows.ids[i + kAhead]));
      // A row new to this tier is admitted with its access history.
      if (history_) history_->prefetch(rows.ids[i + kAhead].table, rows.ids[i + kAhead].key);
    }
    int64_t slot = cache_->find(rows.ids[i]);
    if (slot >= 0) {
      std::copy(rows.row(i), rows.row(i) + width_, cache_->row(slot));
      cache_->set_dirty(slot, true);
    } else if (refusing_) {
      spill.append(rows.ids[i], rows.row(i));  // newer than L3: goes straight down
      counters_.fallback_rows += 1;
      continue;
    } else {
      make_room(spill);
      slot = cache_->insert(rows.ids[i], rows.row(i), /*dirty=*/true);
      if (static_cast<size_t>(slot) >= usage_.size()) usage_.resize(slot + 1);
      if (history_) policy_.admit(usage_[slot], history_->frequency(rows.ids[i].table, rows.ids[i].key));
    }
    touch(slot, round, next_use ? next_use[i] : INT64_MAX, next_use && next_use_exact);
  }
  if (spill.size()) write_to_servers(spill, /*wait=*/false);
}

void L2HostTier::write_down(const RowBlock& rows) {
  if (rows.size() == 0) return;
  RowBlock direct;
  direct.width = width_;
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t slot = cache_ ? cache_->find(rows.ids[i]) : -1;
    if (slot >= 0) {
      std::copy(rows.row(i), rows.row(i) + width_, cache_->row(slot));
      cache_->set_dirty(slot, true);
    } else {
      direct.append(rows.ids[i], rows.row(i));
    }
  }
  counters_.write_backs_to_l3 += direct.size();
  write_to_servers(direct, /*wait=*/false);
}

void L2HostTier::flush() {
  if (cache_) {
    // In parts, as an L1 writes down: no message over MPI's int count, and no
    // second copy of the whole L2 in fresh memory.
    constexpr size_t kPartRows = 32768;
    RowBlock part;
    part.width = width_;
    auto send_part = [&] {
      // Bounded: no second copy of the whole L2 in send buffers either.
      size_t in_flight = 0;
      for (const PendingSend& p : pending_sends_) in_flight += p.bytes.size();
      if (in_flight >= kFlushBytesInFlight) complete_sends(/*all=*/true);
      write_to_servers(part, /*wait=*/false);
      counters_.write_backs_to_l3 += part.size();
      part.ids.clear();
      part.values.clear();
    };
    cache_->for_each([&](const RowId& id, int64_t slot) {
      if (!cache_->dirty(slot)) return;
      part.append(id, cache_->row(slot));
      cache_->set_dirty(slot, false);
      if (part.size() >= kPartRows) send_part();
    });
    if (part.size()) send_part();
  }
  RowBlock none;
  none.width = width_;
  write_to_servers(none, /*wait=*/true);  // acknowledged once every earlier write is on the servers
}

void L2HostTier::fetch_from_servers(const std::vector<RowId>& ids, const std::vector<size_t>* at, float* values) {
  const int servers = static_cast<int>(server_ranks_.size());
  std::vector<std::vector<RowId>> per_server(servers);
  std::vector<std::vector<size_t>> position(servers);
  auto row_of = [&](size_t i) { return values + (at ? (*at)[i] : i) * width_; };
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i + kAhead < ids.size()) on_servers_.prefetch(ids[i + kAhead]);
    if (!servers_may_hold_rows_ && !on_servers_.may_contain(ids[i])) {  // never written down: the servers lack it
      new_row_(ids[i], row_of(i));
      counters_.rows_created += 1;
      continue;
    }
    const int s = server_of(ids[i].table, ids[i].key, servers);
    per_server[s].push_back(ids[i]);
    position[s].push_back(i);
  }
  std::vector<std::vector<char>> requests(servers);
  std::vector<MPI_Request> sends;
  for (int s = 0; s < servers; ++s) {
    if (per_server[s].empty()) continue;
    comm::ByteWriter writer(requests[s]);
    writer.put(ProducerOp::kFetch);
    writer.put_vector(per_server[s]);
    sends.push_back(comm::send_bytes(world_, server_ranks_[s], comm::kTagProducerRequest, requests[s]));
  }
  auto start = std::chrono::steady_clock::now();
  std::vector<char> reply;
  for (int s = 0; s < servers; ++s) {
    if (per_server[s].empty()) continue;
    MPI_Message message;
    MPI_Status status;
    comm::Backoff backoff;
    while (!comm::probe_politely(world_, server_ranks_[s], comm::kTagProducerReply, message, status, false)) {
      service_();
      backoff.pause();
    }
    comm::receive_matched(message, status, reply);
    RowBlock rows = read_row_block(reply.data(), reply.size());
    if (rows.size() != per_server[s].size() || rows.width != width_) {
      throw Error("server " + std::to_string(s) + " answered a fetch of " + std::to_string(per_server[s].size()) +
                  " rows with " + std::to_string(rows.size()));
    }
    counters_.bytes_from_l3 += rows.values.size() * sizeof(float);
    comm::LinkModel::transfer(comm::Link::kNetwork, requests[s].size() + reply.size());
    for (size_t i = 0; i < rows.size(); ++i) std::copy(rows.row(i), rows.row(i) + width_, row_of(position[s][i]));
  }
  counters_.fetch_wait_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (auto& r : sends) comm::wait_politely(r);
}

void L2HostTier::complete_sends(bool all) {
  size_t kept = 0;
  for (size_t i = 0; i < pending_sends_.size(); ++i) {
    PendingSend& send = pending_sends_[i];
    bool done = true;
    if (all) {
      comm::wait_politely(send.request);
    } else {
      done = comm::completed(send.request);
    }
    if (done) continue;
    if (kept != i) pending_sends_[kept] = std::move(send);  // never self-move: it would free a live buffer
    ++kept;
  }
  pending_sends_.resize(kept);
}

void L2HostTier::write_to_servers(const RowBlock& rows, bool wait) {
  complete_sends(/*all=*/false);
  const int servers = static_cast<int>(server_ranks_.size());
  std::vector<RowBlock> per_server(servers);
  for (auto& b : per_server) b.width = width_;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i + kAhead < rows.size()) on_servers_.prefetch(rows.ids[i + kAhead]);
    per_server[server_of(rows.ids[i].table, rows.ids[i].key, servers)].append(rows.ids[i], rows.row(i));
    on_servers_.insert(rows.ids[i]);
  }
  const ProducerOp op = wait ? ProducerOp::kWriteBackSync : ProducerOp::kWriteBack;
  for (int s = 0; s < servers; ++s) {
    // A synchronous write goes to every server, so each acknowledges all earlier ones.
    if (per_server[s].size() == 0 && !wait) continue;
    PendingSend send{MPI_REQUEST_NULL, {}};
    comm::ByteWriter writer(send.bytes);
    writer.put(op);
    append_row_block(per_server[s], send.bytes);
    counters_.bytes_to_l3 += per_server[s].values.size() * sizeof(float);
    comm::LinkModel::transfer(comm::Link::kNetwork, send.bytes.size());
    pending_sends_.push_back(std::move(send));
    pending_sends_.back().request =
        comm::send_bytes(world_, server_ranks_[s], comm::kTagProducerRequest, pending_sends_.back().bytes);
  }
  if (!wait) return;
  // The final flush must be on the servers before the trainers read them.
  std::vector<char> ack;
  for (int s = 0; s < servers; ++s) {
    MPI_Message message;
    MPI_Status status;
    comm::Backoff backoff;
    while (!comm::probe_politely(world_, server_ranks_[s], comm::kTagProducerReply, message, status, false)) {
      service_();
      backoff.pause();
    }
    comm::receive_matched(message, status, ack);
  }
  complete_sends(/*all=*/true);
}

}  // namespace strata::store
