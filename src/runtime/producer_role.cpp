// The producer's loop: phases (epochs and evaluation), batches built and
// de-duplicated, and up to store.prefetch_depth of them in flight to each trainer.
#include "runtime/producer.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "comm/collectives.hpp"
#include "comm/mpi_channel.hpp"
#include "comm/stall_watchdog.hpp"
#include "common/error.hpp"
#include "model/model.hpp"
#include "model/optimizers.hpp"
#include "runtime/batch_channel.hpp"
#include "runtime/batch_source.hpp"
#include "runtime/checkpointing.hpp"
#include "runtime/preemption.hpp"
#include "runtime/shared_ingest.hpp"
#include "store/frequency_admission.hpp"
#include "store/producer_staging.hpp"
#include "store/round_requests.hpp"

namespace strata::runtime {
namespace {
using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
// While waiting for a trainer to take a batch: the longest sleep between
// polls, and the longest first sleep (a trainer's pace can change).
constexpr int kMaxRoomSleepUs = 2000;
constexpr int kMaxFirstSleepUs = 20000;
}  // namespace

Producer::Producer(const RunOptions& options, const RankContext& context, const ResumePoint& resume)
    : options_(options), context_(context), depth_(options.store.prefetch_depth) {
  const RoleLayout& layout = context.layout;
  std::vector<int> trainers = layout.trainers_of_producer(context.index);
  std::vector<int> trainer_ranks;
  for (int t : trainers) {
    queues_.push_back({t, layout.world_rank(Role::kTrainer, t), {}, {}, false, false});
    trainer_ranks.push_back(layout.world_rank(Role::kTrainer, t));
  }
  source_ = as_input_errors(
      [&] { return make_batch_source(options, context.index, layout.producers(), trainers, layout.trainers()); });
  if (options.store.min_count > 1) {
    admission_ = std::make_unique<store::FrequencyAdmission>(options.store.min_count, options.store.admission_counters);
  }
  if (options.store.mode == "tiered") {
    std::vector<int> servers;
    for (int s = 0; s < layout.servers(); ++s) servers.push_back(layout.world_rank(Role::kServer, s));
    const int dim = options.model.embedding_dim;
    const int width = dim + model::make_sparse_optimizer(options.optim)->state_width(dim);
    staging_ = std::make_unique<store::ProducerStaging>(options, width, trainers, trainer_ranks, servers,
                                                        context_.job, /*servers_may_hold_rows=*/resume.active(),
                                                        shared_l2_pool());
    exchange_ = std::make_unique<store::RoundExchange>(context.index, layout.producers(), layout.trainers(),
                                                       context.role_comm);
  }
  keys_of_ = model::tied_tables(options.model, data_shape(options.data).num_tables);
  stamps_.resize(queues_.size());
  if (staging_) staging_->set_wait_hook([this] { poll_checkpoint(); });
  if (resume.active()) restore(resume);
}

ProducerReport Producer::run() {
  const CpuTimes cpu_start = process_cpu_times();
  bool final = false;
  while (!final) final = run_phase(Phase::kTrain);
  report_.train_cpu = process_cpu_times() - cpu_start;
  if (stopped_) {  // preempted: the checkpoint holds everything
    stop_stall_watchdog();
    return report_;
  }
  if (staging_ && !fell_back_) staging_->finish_training();
  if (run_has_eval(options_)) run_phase(Phase::kEval);
  stop_stall_watchdog();
  report_.parse = source_->stats();
  report_.shared = source_->shared_stats();
  report_.shared_batches = source_->shared_batch_stats();
  if (staging_) {
    const auto& c = staging_->counters();
    const auto& l2 = staging_->l2_counters();
    report_.tiered = true;
    report_.l1_hits = c.l1_hits, report_.l1_misses = c.l1_misses, report_.l1_evictions = c.l1_evictions;
    report_.l2_hits = l2.hits, report_.l2_misses = l2.misses, report_.l2_evictions = l2.evictions;
    report_.l2_write_backs = l2.write_backs_to_l3, report_.fallback_rows = l2.fallback_rows;
    report_.bytes_l3_to_l2 = l2.bytes_from_l3, report_.bytes_l2_to_l3 = l2.bytes_to_l3;
    report_.staging_s = c.staging_s, report_.write_back_wait_s = c.write_back_wait_s;
    report_.staging_cpu_s = c.staging_cpu_s;
    report_.l3_wait_s = l2.fetch_wait_s;
    report_.max_window_rows = c.max_window_rows;
    report_.l1_capacity_rows = staging_->l1_capacity_rows();
    report_.l2_capacity_rows = staging_->l2_capacity_rows();
    report_.l2_bytes = double(staging_->l2_bytes());
    report_.directory_bytes = double(staging_->directory_bytes());
    report_.history_bytes = double(staging_->history_bytes());
    report_.late_rounds = c.late_rounds;
    report_.ps_fallback_round = fallback_round_;
    report_.l2_pool_grant_mb = staging_->l2_pool_grant_mb();
    report_.l2_pool_changes = staging_->l2_pool_changes();
    report_.l2_pool_decisions = staging_->l2_pool_decisions();
  }
  if (admission_) {
    report_.admission_keys_seen = admission_->keys_seen();
    report_.admission_keys_defaulted = admission_->keys_defaulted();
  }
  return report_;
}

// Keeps the tiered store's write-backs flowing while this rank waits on
// anything, and joins a checkpoint when the trainers ask for one.
void Producer::service() {
  if (staging_) staging_->poll();
  poll_checkpoint();
}

void Producer::wait(MPI_Request& request) { comm::wait(request, [this] { service(); }); }

// A message buffer for q: a completed send's, so that steady streaming
// allocates (and page-faults) nothing.
std::vector<char> Producer::take_buffer(TrainerQueue& q) {
  if (q.spare.empty()) return {};
  std::vector<char> buffer = std::move(q.spare.back());
  q.spare.pop_back();
  return buffer;
}

void Producer::retire_front(TrainerQueue& q) {
  if (q.spare.size() < 4) q.spare.push_back(std::move(q.in_flight.front().bytes));
  q.in_flight.pop_front();
}

void Producer::send(TrainerQueue& q, std::vector<char> bytes) {
  wait_for_room(q);
  report_.bytes_sent += bytes.size();
  q.in_flight.push_back({MPI_REQUEST_NULL, std::move(bytes)});
  q.in_flight.back().request =
      comm::send_bytes(context_.job, q.world_rank, comm::kTagBatch, q.in_flight.back().bytes);
}

void Producer::send_batch(TrainerQueue& q, const data::Batch& batch) {
  std::vector<char> message = take_buffer(q);
  encode_batch_message(batch, message);
  send(q, std::move(message));
}

// Streams one phase; returns true when the trainers said training is over.
bool Producer::run_phase(Phase phase) {
  source_->start_phase(phase);
  phase_ = phase;
  if (phase == Phase::kTrain && !first_phase_) {
    rounds_in_phase_ = 0;
    positions_.clear();
  }
  first_phase_ = false;
  for (auto& q : queues_) {
    q.done = q.final = false;
    q.take_interval_s = 0, q.last_take = {};  // an evaluation's pace is not training's
  }
  if (staging_ && phase == Phase::kTrain && !fell_back_) {
    stream_tiered_rounds();
    if (fell_back_) stream_batches();  // the rest of the phase in Scheme A
  } else {
    stream_batches();
  }
  for (auto& q : queues_) {
    q.in_flight.push_back({MPI_REQUEST_NULL, encode_end_of_phase()});
    q.in_flight.back().request =
        comm::send_bytes(context_.job, q.world_rank, comm::kTagBatch, q.in_flight.back().bytes);
  }
  comm::WaitingFor waiting([this] {
    std::string missing;
    for (const auto& q : queues_) {
      if (!q.done) missing += (missing.empty() ? "" : ", ") + comm::StallWatchdog::name_rank(q.world_rank);
    }
    return "the end of the phase from " + missing;
  });
  comm::Backoff backoff;
  while (!all_done()) {
    if (!poll_done()) {
      service();
      backoff.pause();
    }
  }
  bool final = false;
  for (auto& q : queues_) {
    while (!q.in_flight.empty()) {
      wait(q.in_flight.front().request);
      retire_front(q);
    }
    final = final || q.final;
  }
  return phase == Phase::kEval || final;
}

bool Producer::build(TrainerQueue& q, data::Batch& batch) {
  auto start = Clock::now();
  if (&q == &queues_[0] && phase_ == Phase::kTrain) {  // a new round: where its data starts
    positions_.emplace_back(rounds_in_phase_++, source_->position());
    if (positions_.size() > 4096) positions_.pop_front();
  }
  // Tied tables (sasrec's item rows) share one key list: one row, one summed gradient.
  if (!admission_) {
    // A reader's error is the data's (a malformed line in strict mode, an unreadable file).
    if (!as_input_errors([&] { return source_->next_deduplicated(q.trainer, batch, keys_of_); })) return false;
  } else {
    if (!as_input_errors([&] { return source_->next(q.trainer, batch); })) return false;
    if (phase_ == Phase::kTrain) {
      admission_->admit_training(batch);
    } else {
      admission_->admit_eval(batch);
    }
    data::deduplicate(batch, keys_of_);
  }
  report_.build_s += seconds(start, Clock::now());
  report_.batches += 1;
  report_.samples += batch.size;
  return true;
}

// Scheme A and evaluation: batches go out as they are built. A training batch
// taken from the node's shared batches (co-trained models) goes out in the wire
// format it was found in, never decoded here.
void Producer::stream_batches() {
  source_->set_wire_only(phase_ == Phase::kTrain && !admission_);
  bool exhausted = false;
  while (!exhausted && !any_done()) {
    for (auto& q : queues_) {
      data::Batch batch;
      if (!build(q, batch)) {
        exhausted = true;
        break;
      }
      comm::StallWatchdog::set_step(phase_ == Phase::kTrain ? "its training batch" : "its evaluation batch",
                                    report_.batches);
      if (const std::vector<char>* wire = admission_ ? nullptr : source_->last_wire()) {
        std::vector<char> message = take_buffer(q);
        encode_batch_message_from_wire(*wire, message);
        send(q, std::move(message));
      } else {
        send_batch(q, batch);
      }
    }
    poll_done();
  }
  source_->set_wire_only(false);
}

void Producer::wait_for_room(TrainerQueue& q) {
  auto start = Clock::now();
  comm::WaitingFor waiting(
      [&q] { return comm::StallWatchdog::name_rank(q.world_rank) + " to take the batches queued for it"; });
  // With a batch still queued behind the one the trainer takes next, this
  // rank need not poll every 200 us: it sleeps until shortly before the
  // trainer's pace says the next batch goes, then polls at an eighth of that
  // pace. The trainer is not kept waiting, and a producer that mostly waits
  // (several co-trained models on few cores) wakes a few times per batch, not dozens.
  comm::Pace pace;
  if (depth_ >= 2 && q.take_interval_s > 0 && q.last_take != Clock::time_point{}) {
    const double until_s = 0.9 * q.take_interval_s - seconds(q.last_take, Clock::now());
    pace.quick_polls = 0;
    pace.max_sleep_us = std::clamp(static_cast<int>(q.take_interval_s * 1e6 / 8), pace.max_sleep_us, kMaxRoomSleepUs);
    pace.first_sleep_us = std::clamp(static_cast<int>(until_s * 1e6), pace.max_sleep_us, kMaxFirstSleepUs);
  }
  bool waited = false;
  while (static_cast<int>(q.in_flight.size()) >= depth_) {
    comm::wait(q.in_flight.front().request, [this] { service(); }, pace);
    retire_front(q);
    waited = true;
  }
  if (waited) {
    const auto now = Clock::now();
    if (q.last_take != Clock::time_point{}) {
      const double interval = seconds(q.last_take, now);
      q.take_interval_s = q.take_interval_s == 0 ? interval : 0.8 * q.take_interval_s + 0.2 * interval;
    }
    q.last_take = now;
  } else {
    q.last_take = {};  // the producer was the slower side: no pace to learn from
  }
  // Completed sends at the front free their buffers early.
  while (!q.in_flight.empty() && comm::completed(q.in_flight.front().request)) retire_front(q);
  report_.blocked_s += seconds(start, Clock::now());
}

// Receives any PhaseDone messages that have arrived; true if one did.
bool Producer::poll_done() {
  bool any = false;
  for (auto& q : queues_) {
    if (q.done) continue;
    MPI_Message message;
    MPI_Status status;
    if (!comm::probe_politely(context_.job, q.world_rank, comm::kTagProducerCtl, message, status, false)) {
      continue;
    }
    PhaseDone done{};
    comm::receive_matched(message, &done, sizeof(done));
    q.done = true;
    q.final = done.final != 0;
    if (done.stop != 0) stopped_ = true;
    any = true;
  }
  return any;
}

bool Producer::any_done() const {
  for (const auto& q : queues_) {
    if (q.done) return true;
  }
  return false;
}

bool Producer::all_done() const {
  for (const auto& q : queues_) {
    if (!q.done) return false;
  }
  return true;
}

bool run_has_eval(const RunOptions& options) {
  if (!options.train.eval) return false;
  if (options.data.source == "synthetic") return options.data.synthetic_eval_samples > 0;
  // Held-out events of the sequences themselves (the SASRec split).
  if (options.data.source == "sequences" || options.data.source == "synthetic_sequences") return true;
  return !options.data.eval.empty();
}

ProducerReport run_producer(const RunOptions& options, const RankContext& context, const ResumePoint& resume) {
  Producer producer(options, context, resume);
  start_stall_watchdog(options, context);
  return producer.run();
}

}  // namespace strata::runtime
