#include "store/producer_staging.hpp"

#include <algorithm>
#include <cmath>
#include <chrono>

#include "comm/mpi_channel.hpp"
#include "comm/wire.hpp"
#include "common/cpu_time.hpp"
#include "common/error.hpp"
#include "store/l1_device_tier.hpp"
#include "store/row_init.hpp"
#include "store/tiered_protocol.hpp"

namespace strata::store {
namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
constexpr size_t kAhead = 8;  // rows in flight in a prefetched pass
}  // namespace

ProducerStaging::ProducerStaging(const RunOptions& options, int width, std::vector<int> owners,
                                 std::vector<int> owner_ranks, std::vector<int> server_ranks, MPI_Comm world,
                                 bool servers_may_hold_rows, L2Pool* l2_pool)
    : l2_pool_(l2_pool),
      seed_(options.train.seed),
      row_init_scale_(options.model.row_init_scale),
      dim_(options.model.embedding_dim),
      sparse_optimizer_(model::make_sparse_optimizer(options.optim)),
      depth_(options.store.prefetch_depth),
      fault_l2_every_(options.store.fault_l2_every),
      width_(width),
      l1_rows_(L1DeviceTier::rows_for_budget(options.store.l1_mb, width)),
      owners_(std::move(owners)),
      owner_ranks_(std::move(owner_ranks)),
      world_(world),
      policy_(make_eviction_policy(options.store.policy, options.store.decay)),
      evicted_(owners_.size()),
      flushed_(owners_.size(), false),
      fallback_late_rounds_(options.store.fallback_late_rounds),
      checkpoint_flushed_(owners_.size(), false),
      keep_promoted_dirty_(!options.checkpoint.dir.empty()),
      trainers_(options.layout.trainers),
      producers_(options.layout.producers) {
  if (!options.output.trace.empty()) {
    // One file per producer (it plans only its own trainers' L1s); the first is the plain path.
    trace_ = std::make_unique<AccessTraceWriter>(owners_.size() && owners_[0] == 0
                                                         ? options.output.trace
                                                         : options.output.trace + ".owner" + std::to_string(owners_[0]));
  }
  // Access history sized to the cached rows; it ages (halves) every ten
  // cache-fulls of accesses, so it follows a hot set that moves.
  const int64_t cached_rows = l1_rows_ * int64_t(owners_.size()) + L2HostTier::rows_for_budget(options.store.l2_mb, width);
  uint64_t sketch_width = 1 << 16;
  while (sketch_width < uint64_t(cached_rows) && sketch_width < (uint64_t(1) << 22)) sketch_width <<= 1;
  history_ = std::make_unique<AccessHistory>(sketch_width, std::max<uint64_t>(10 * uint64_t(cached_rows), 1 << 16));
  for (int owner : owners_) {
    directories_.emplace_back(owner, l1_rows_, int(L1DeviceTier::bytes_per_slot(width)), *policy_, history_.get());
  }
  // Under the online controller the arenas are reserved for the largest budget it may grant.
  int64_t l2_arena_rows = L2HostTier::rows_for_budget(options.store.l2_mb, width);
  if (options.autotune.online && options.store.mode == "tiered") {
    controller_ = std::make_unique<OnlineController>(options.autotune, options.store.horizon,
                                                     static_cast<int>(owners_.size()), int(L1DeviceTier::bytes_per_slot(width)),
                                                     online_l1_max_mb(options, static_cast<int>(owners_.size())));
    budgets_ = {options.store.l1_mb, options.store.l2_mb, options.store.prefetch_depth};
    every_steps_ = options.autotune.every_steps;
    l2_arena_rows = L2HostTier::rows_for_budget(options.store.l2_mb + options.store.l1_mb * double(owners_.size()), width);
  }
  double l2_mb = options.store.l2_mb;
  if (l2_pool_) {
    // A share of the node's pool: reserved for the most it may be granted.
    l2_mb = pool_grant_mb_ = l2_pool_->granted_mb();
    l2_arena_rows = L2HostTier::rows_for_budget(l2_pool_->max_mb(), width);
  }
  l2_ = std::make_unique<L2HostTier>(L2HostTier::rows_for_budget(l2_mb, width), l2_arena_rows, width, *policy_, world,
                                     std::move(server_ranks), [this] { poll(); },
                                     [this](const RowId& id, float* row) { new_row(id, row); },
                                     [this](const RowId& id) { return directory_of(id).next_use(id); },
                                     history_.get(), servers_may_hold_rows);
  if (l2_pool_) {
    // As many ghosts as rows: the look-ahead policy evicts rows with no use within the horizon, so
    // their next use comes after many rounds of evictions.
    ghost_rows_ = std::max<int64_t>(4096, L2HostTier::rows_for_budget(l2_mb, width));
    l2_->track_ghosts(ghost_rows_);
  }
}

std::string ProducerStaging::run_l2_pool(int64_t round, uint64_t samples) {
  constexpr int64_t kEveryRounds = 8;
  if (!l2_pool_ || round % kEveryRounds != 0) return {};
  const int64_t row_bytes = int64_t(L2HostTier::bytes_for(ghost_rows_, width_) / size_t(std::max<int64_t>(ghost_rows_, 1)));
  int64_t l1_rows = 0, l1_capacity = 0;
  for (const L1Directory& directory : directories_) l1_rows += directory.size(), l1_capacity += directory.capacity();
  const double grant = l2_pool_->report(l2_->ghosts()->hits(), l2_->counters().hits, samples, ghost_rows_, row_bytes,
                                        l2_->size() * row_bytes, l1_rows, l1_capacity);
  if (std::abs(grant - pool_grant_mb_) < 1e-6) return {};
  const std::string note = "step " + std::to_string(round) + ": L2 " + std::to_string(pool_grant_mb_) + " -> " +
                           std::to_string(grant) + " MiB of the shared pool";
  l2_->set_capacity(L2HostTier::rows_for_budget(grant, width_));
  l2_pool_->applied(grant);
  pool_grant_mb_ = grant;
  ++pool_changes_;
  return note;
}

void ProducerStaging::new_row(const RowId& id, float* row) const {
  init_row_values(id.table, id.key, seed_, row_init_scale_, row, dim_);
  sparse_optimizer_->init_state(row + dim_, dim_);
}

void ProducerStaging::add_round(int64_t round, const std::vector<OwnerRequests>& per_owner) {
  const auto start = Clock::now();
  const double cpu_start = thread_cpu_seconds();
  for (size_t i = 0; i < owners_.size(); ++i) {
    absent_.clear();
    distinct_.clear();
    directories_[i].add_round(round, per_owner[i], &absent_, trace_ ? &distinct_ : nullptr);
    if (trace_) trace_->write(round, owners_[i], distinct_);
    l2_->note_future_use(absent_, round);
  }
  counters_.staging_s += since(start);
  counters_.staging_cpu_s += thread_cpu_seconds() - cpu_start;
}

// One probe for every owner (only this producer's trainers send it
// write-backs); MPI keeps each owner's messages in order.
void ProducerStaging::poll() {
  while (true) {
    MPI_Message message;
    MPI_Status status;
    if (!comm::probe_politely(world_, MPI_ANY_SOURCE, comm::kTagWriteBack, message, status, false)) break;
    const auto owner = std::find(owner_ranks_.begin(), owner_ranks_.end(), status.MPI_SOURCE);
    if (owner == owner_ranks_.end()) {
      throw Error("write-back from rank " + std::to_string(status.MPI_SOURCE) + ", which this producer does not feed");
    }
    Arrived arrived{static_cast<size_t>(owner - owner_ranks_.begin()), {}};
    if (!spare_buffers_.empty()) {  // a spare buffer's capacity saves the allocation
      arrived.bytes = std::move(spare_buffers_.back());
      spare_buffers_.pop_back();
    }
    comm::receive_matched(message, status, arrived.bytes);
    arrived_.push_back(std::move(arrived));
  }
}

// Applies queued write-backs in arrival order. Never called from inside an L2
// operation (poll() only queues), so L2 is never modified under its own feet.
void ProducerStaging::apply_arrived() {
  while (!arrived_.empty()) {
    Arrived arrived = std::move(arrived_.front());
    arrived_.pop_front();
    struct Recycle {  // the buffer goes back to the pool however this one ends
      std::vector<std::vector<char>>& pool;
      std::vector<char>& bytes;
      ~Recycle() {
        if (pool.size() < 8) pool.push_back(std::move(bytes));
      }
    } recycle{spare_buffers_, arrived.bytes};
    comm::ByteReader reader(arrived.bytes.data(), arrived.bytes.size(), "write-back");
    const auto header = reader.get<WriteBackHeader>();
    reader.skip_padding(8);
    const size_t used = arrived.bytes.size() - reader.remaining();
    RowBlock rows = read_row_block(arrived.bytes.data() + used, reader.remaining());
    if (header.kind != WriteBackKind::kRound) {
      l2_->write_down(rows);
      if (header.kind == WriteBackKind::kFlush) flushed_[arrived.owner_index] = true;
      if (header.kind == WriteBackKind::kCheckpoint) checkpoint_flushed_[arrived.owner_index] = true;
      continue;
    }
    note_report(header);
    auto& queue = evicted_[arrived.owner_index];
    if (queue.empty() || queue.front().round != header.round) {
      throw Error("write-back of round " + std::to_string(header.round) + " from trainer " +
                  std::to_string(owners_[arrived.owner_index]) + " out of order (protocol bug)");
    }
    // The dirty rows come back in the order they were evicted: each takes the
    // next use it was evicted with (a finite one cannot have moved since).
    const Evicted& evicted = queue.front();
    arrived_next_use_.resize(rows.size());
    size_t j = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      while (j < evicted.ids.size() && !(evicted.ids[j] == rows.ids[i])) ++j;
      if (j == evicted.ids.size()) throw Error("write-back of a row that was not evicted (protocol bug)");
      arrived_next_use_[i] = evicted.next_use[j];
    }
    // Rows evicted with no known use: a use may have become known since. Asked
    // here, two stages of prefetch ahead, rather than one miss at a time inside L2.
    const size_t n = rows.size();
    auto unknown = [&](size_t i) { return arrived_next_use_[i] == INT64_MAX; };
    for (size_t i = 0; i < n; ++i) {
      if (i + 2 * kAhead < n && unknown(i + 2 * kAhead)) directory_of(rows.ids[i + 2 * kAhead]).prefetch_index(rows.ids[i + 2 * kAhead]);
      if (i + kAhead < n && unknown(i + kAhead)) directory_of(rows.ids[i + kAhead]).prefetch_entry_of(rows.ids[i + kAhead]);
      if (unknown(i)) arrived_next_use_[i] = directory_of(rows.ids[i]).next_use(rows.ids[i]);
    }
    l2_->write_back(rows, header.round, arrived_next_use_.data(), /*next_use_exact=*/true);
    for (const RowId& id : evicted.ids) {
      int* count = pending_.find(id);
      if (--*count == 0) pending_.erase(id);
    }
    queue.pop_front();
  }
}

void ProducerStaging::stage(int64_t round, size_t owner_index, std::vector<char>& out) {
  const auto start = Clock::now();
  const double cpu_start = thread_cpu_seconds();
  poll();
  apply_arrived();
  StagingPlan& plan = plan_;
  L1Directory& directory = directories_[owner_index];
  directory.plan(round, depth_, plan);
  counters_.max_window_rows = std::max(counters_.max_window_rows, directory.window_rows());
  window_max_rows_ = std::max(window_max_rows_, directory.window_rows());
  counters_.l1_hits += plan.hits;
  counters_.l1_misses += plan.insert.size();
  counters_.l1_evictions += plan.evict.size();
  // A row on its way back from an L1 must arrive before it is staged again.
  for (const RowId& id : plan.insert) {
    if (!is_pending(id)) continue;
    const auto wait_start = Clock::now();
    comm::Backoff backoff;
    while (is_pending(id)) {
      poll();
      if (arrived_.empty()) {
        if (on_wait_) on_wait_();  // the trainer may be waiting for a checkpoint before it sends the row
        backoff.pause();
      } else {
        apply_arrived();
      }
    }
    counters_.write_back_wait_s += since(wait_start);
  }
  StagingWriter writer(out, round, /*switch_to_ps=*/false, width_);
  writer.evict_slots(plan.evict_slots);
  const size_t n = plan.insert.size();
  writer.reserve_inserts(n);
  writer.serve(plan.serve_offsets, plan.serve_slots);
  std::copy(plan.insert_slots.begin(), plan.insert_slots.end(), writer.insert_slots());
  std::copy(plan.insert.begin(), plan.insert.end(), writer.insert_ids());
  l2_->set_refusing(fault_l2_every_ > 0 && round % fault_l2_every_ == 0);
  l2_->read(plan.insert, round, writer.insert_values(), writer.insert_dirty());
  for (const RowId& id : plan.evict) pending_[id] += 1;
  evicted_[owner_index].push_back({round, plan.evict, plan.evict_next_use, {}});
  if (keep_promoted_dirty_) {
    RowBlock& kept = evicted_[owner_index].back().promoted_dirty;
    kept.width = width_;
    const uint8_t* dirty = writer.insert_dirty();
    const float* values = writer.insert_values();
    for (size_t i = 0; i < n; ++i) {
      if (dirty[i]) kept.append(plan.insert[i], values + i * size_t(width_));
    }
  }
  ++counters_.rounds;
  counters_.staging_s += since(start);
  counters_.staging_cpu_s += thread_cpu_seconds() - cpu_start;
  double stats[kProducerStats];
  fill_stats(stats);
  writer.finish(stats, pending_note_);
}

std::string ProducerStaging::run_controller(int64_t round) {
  pending_note_.clear();
  if (!controller_ || round == 0 || round % every_steps_ != 0) return {};
  ControllerWindow w;
  w.rounds = counters_.rounds - window_start_counters_.rounds;
  w.late_rounds = counters_.late_rounds - window_start_counters_.late_rounds;
  w.l1_hits = counters_.l1_hits - window_start_counters_.l1_hits;
  w.l1_misses = counters_.l1_misses - window_start_counters_.l1_misses;
  w.l2_hits = l2_->counters().hits - window_start_l2_.hits;
  w.window_rows = window_max_rows_;
  window_start_counters_ = counters_;
  window_start_l2_ = l2_->counters();
  window_max_rows_ = 0;
  const ControllerDecision d = controller_->decide(w, budgets_);
  if (d.action.empty()) return {};
  const int64_t l1_rows = L1DeviceTier::rows_for_budget(d.next.l1_mb, width_);
  for (const auto& dir : directories_) {
    if (dir.window_rows() > l1_rows) return {};  // never below a window in use
  }
  for (auto& dir : directories_) dir.set_capacity(l1_rows);
  l1_rows_ = l1_rows;
  l2_->set_capacity(L2HostTier::rows_for_budget(d.next.l2_mb, width_));
  depth_ = d.next.prefetch_depth;
  budgets_ = d.next;
  pending_note_ = "step " + std::to_string(round) + ": " + d.action + " (" + d.reason + ")";
  return pending_note_;
}

void ProducerStaging::fill_stats(double* st) const {
  const L2Counters& l2 = l2_->counters();
  st[kStatL1Hits] = double(counters_.l1_hits), st[kStatL1Misses] = double(counters_.l1_misses);
  st[kStatL1Evictions] = double(counters_.l1_evictions), st[kStatL2Hits] = double(l2.hits);
  st[kStatL2Misses] = double(l2.misses), st[kStatL2Evictions] = double(l2.evictions);
  st[kStatL2WriteBacks] = double(l2.write_backs_to_l3), st[kStatFallbackRows] = double(l2.fallback_rows);
  st[kStatBytesL3ToL2] = double(l2.bytes_from_l3), st[kStatBytesL2ToL3] = double(l2.bytes_to_l3);
  st[kStatStagingS] = counters_.staging_s;
  st[kStatL1Mb] = controller_ ? budgets_.l1_mb : double(l1_rows_ * L1DeviceTier::bytes_per_slot(width_)) / 1048576.0;
  st[kStatL2Mb] = double(L2HostTier::bytes_for(l2_->capacity(), width_)) / 1048576.0;
  st[kStatPrefetchDepth] = depth_;
  st[kStatStagingCpuS] = counters_.staging_cpu_s;
}

void ProducerStaging::note_lateness() {
  poll();
  apply_arrived();
}

// One trainer's report of one round. A round reported late by several
// trainers counts once; a round skipped ends the run of late rounds, and so
// does an on-time report past the round after the newest late one (another
// trainer may still report that next round late).
void ProducerStaging::note_report(const WriteBackHeader& header) {
  if (header.batch_wait_s <= kLateWaitSeconds) {
    if (header.round > newest_late_round_ + 1) late_run_ = 0;
    return;
  }
  if (header.round <= newest_late_round_) return;
  late_run_ = header.round == newest_late_round_ + 1 ? late_run_ + 1 : 1;
  newest_late_round_ = header.round;
  ++counters_.late_rounds;
}

void ProducerStaging::append_switch(int64_t round, std::vector<char>& out) const {
  StagingWriter writer(out, round, /*switch_to_ps=*/true, width_);
  writer.evict_slots({});
  writer.reserve_inserts(0);
  writer.serve({}, {});
  double stats[kProducerStats];
  fill_stats(stats);
  writer.finish(stats, "");
}

void ProducerStaging::service() {
  poll();
  apply_arrived();
}

void ProducerStaging::write_down_for_checkpoint() {
  if (finished_) return;  // training over or switched to Scheme A: the servers hold everything
  // Every owner sends its dirty L1 rows, unless it already flushed for good
  // (a switch to Scheme A in progress).
  auto all_in = [&] {
    for (size_t i = 0; i < owners_.size(); ++i) {
      if (!checkpoint_flushed_[i] && !flushed_[i]) return false;
    }
    return true;
  };
  comm::Backoff backoff;
  while (!all_in()) {
    poll();
    if (arrived_.empty()) {
      backoff.pause();
    } else {
      apply_arrived();
    }
  }
  checkpoint_flushed_.assign(owners_.size(), false);
  // Plans staged but not yet applied by their trainer (their batches are in
  // flight) carry rows promoted from L2 dirty: nowhere else holds those values.
  for (const auto& queue : evicted_) {
    for (const Evicted& round : queue) l2_->write_down(round.promoted_dirty);
  }
  l2_->flush();  // acknowledged by every server: they hold every row at its newest value
}

void ProducerStaging::finish_training() {
  comm::Backoff backoff;
  while (true) {
    poll();
    apply_arrived();
    bool all = true;
    for (bool f : flushed_) all = all && f;
    if (all) break;
    if (on_wait_) on_wait_();
    backoff.pause();
  }
  for (const auto& queue : evicted_) {
    if (!queue.empty()) throw Error("a trainer flushed before writing back round " + std::to_string(queue.front().round));
  }
  l2_->flush();
  for (int rank : owner_ranks_) {
    const int done = 1;
    comm::send_value(done, rank, comm::kTagFlushDone, world_);
  }
  finished_ = true;
  if (l2_pool_) l2_pool_->leave();  // its grant returns to the models still training
}

size_t ProducerStaging::directory_bytes() const {
  size_t total = 0;
  for (const L1Directory& directory : directories_) total += directory.memory_bytes();
  return total;
}

}  // namespace strata::store
