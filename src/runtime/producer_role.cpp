#include "runtime/producer_role.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <optional>
#include <thread>

#include "comm/mpi_channel.hpp"
#include "common/error.hpp"
#include "model/optimizers.hpp"
#include "runtime/batch_channel.hpp"
#include "runtime/batch_source.hpp"
#include "runtime/checkpointing.hpp"
#include "store/frequency_admission.hpp"
#include "store/producer_staging.hpp"
#include "store/round_requests.hpp"

namespace strata::runtime {
namespace {

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

struct InFlight {
  MPI_Request request = MPI_REQUEST_NULL;
  std::vector<char> bytes;
};

// One trainer's outgoing queue: at most `depth` batches sent but not yet received.
struct TrainerQueue {
  int trainer = 0;
  int world_rank = 0;
  std::deque<InFlight> in_flight;
  std::vector<std::vector<char>> spare;  // buffers of completed sends, reused
  bool done = false;   // PhaseDone received
  bool final = false;
};

// A round of the tiered store: one batch per trainer of this producer.
struct Round {
  int64_t number = 0;
  std::vector<data::Batch> batches;
};

class Producer {
 public:
  Producer(const RunOptions& options, const RankContext& context, const ResumePoint& resume)
      : options_(options), context_(context), depth_(options.store.prefetch_depth) {
    const RoleLayout& layout = context.layout;
    std::vector<int> trainers = layout.trainers_of_producer(context.index);
    std::vector<int> trainer_ranks;
    for (int t : trainers) {
      queues_.push_back({t, layout.world_rank(Role::kTrainer, t), {}, {}, false, false});
      trainer_ranks.push_back(layout.world_rank(Role::kTrainer, t));
    }
    source_ = make_batch_source(options, context.index, layout.producers(), trainers, layout.trainers());
    if (options.store.min_count > 1) {
      admission_ = std::make_unique<store::FrequencyAdmission>(options.store.min_count, options.store.admission_counters);
    }
    if (options.store.mode == "tiered") {
      std::vector<int> servers;
      for (int s = 0; s < layout.servers(); ++s) servers.push_back(layout.world_rank(Role::kServer, s));
      const int dim = options.model.embedding_dim;
      const int width = dim + model::make_sparse_optimizer(options.optim)->state_width(dim);
      staging_ = std::make_unique<store::ProducerStaging>(options, width, trainers, trainer_ranks, servers,
                                                          MPI_COMM_WORLD, /*servers_may_hold_rows=*/resume.active());
      exchange_ = std::make_unique<store::RoundExchange>(context.index, layout.producers(), layout.trainers(),
                                                         context.role_comm);
    }
    stamps_.resize(queues_.size());
    if (staging_) staging_->set_wait_hook([this] { poll_checkpoint(); });
    if (resume.active()) restore(resume);
  }

  ProducerReport run() {
    const CpuTimes cpu_start = process_cpu_times();
    bool final = false;
    while (!final) final = run_phase(Phase::kTrain);
    report_.train_cpu = process_cpu_times() - cpu_start;
    if (stopped_) return report_;  // preempted: the checkpoint holds everything
    if (staging_ && !fell_back_) staging_->finish_training();
    if (run_has_eval(options_)) run_phase(Phase::kEval);
    report_.parse = source_->stats();
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
      report_.late_rounds = c.late_rounds;
      report_.ps_fallback_round = fallback_round_;
    }
    if (admission_) {
      report_.admission_keys_seen = admission_->keys_seen();
      report_.admission_keys_defaulted = admission_->keys_defaulted();
    }
    return report_;
  }

 private:
  // Keeps the tiered store's write-backs flowing while this rank waits on
  // anything, and joins a checkpoint when the trainers ask for one.
  void service() {
    if (staging_) staging_->poll();
    poll_checkpoint();
  }

  // Checkpoints -----------------------------------------------------------

  // Every trainer of this producer sends a stamp; with all of them here, the
  // caches are written down, the trainers are told "ready", and this rank
  // writes its part of the file. Called only from the producer's own loops,
  // never inside an L2 request, so the servers it may wait on are serving.
  void poll_checkpoint() {
    for (size_t i = 0; i < queues_.size(); ++i) {
      if (stamps_[i]) continue;
      MPI_Message message;
      MPI_Status status;
      if (!comm::probe_politely(MPI_COMM_WORLD, queues_[i].world_rank, comm::kTagCheckpoint, message, status, false)) {
        continue;
      }
      CheckpointStamp stamp;
      comm::check_mpi(MPI_Mrecv(&stamp, sizeof(stamp), MPI_BYTE, &message, MPI_STATUS_IGNORE), "MPI_Mrecv");
      stamps_[i] = stamp;
    }
    for (const auto& s : stamps_) {
      if (!s) return;
    }
    const CheckpointStamp stamp = *stamps_[0];
    for (auto& s : stamps_) s.reset();
    if (staging_ && !fell_back_) staging_->write_down_for_checkpoint();
    for (const auto& q : queues_) {
      const int ready = 1;
      comm::check_mpi(MPI_Send(&ready, 1, MPI_INT, q.world_rank, comm::kTagCheckpointReady, MPI_COMM_WORLD), "MPI_Send");
    }
    io::ProducerState state{};
    state.producer = context_.index;
    state.epoch = stamp.epoch;
    state.round_in_epoch = stamp.step_in_epoch;
    const SourcePosition position = position_of_round(stamp.step_in_epoch);
    state.byte_offset = position.byte_offset;
    state.line = position.line;
    const data::ParseStats parse = source_->stats();
    state.lines = parse.lines, state.samples = parse.samples, state.malformed = parse.malformed;
    if (admission_) {
      state.admission_seen = admission_->keys_seen();
      state.admission_defaulted = admission_->keys_defaulted();
    }
    io::CheckpointWriter writer(MPI_COMM_WORLD, checkpoint_temporary(options_, stamp.step),
                                checkpoint_header(options_, stamp));
    writer.write_dense({}, {}, {}, false);
    writer.write_trainer_state(io::TrainerState{}, false);
    writer.write_rows(io::SparseRows{});
    writer.write_producers(&state, admission_ ? &admission_->counters() : nullptr);
    writer.close();
    if (stamp.preempted) stopped_ = true;
  }

  // The training stream's position before round `round` of this epoch (rounds
  // are built ahead, so it is looked up in the recent history).
  SourcePosition position_of_round(int64_t round) const {
    for (const auto& [r, position] : positions_) {
      if (r == round) return position;
    }
    return source_->position();  // not built: the epoch's data ended before it
  }

  void restore(const ResumePoint& resume) {
    io::CheckpointReader reader(MPI_COMM_SELF, resume.path);
    const io::CheckpointHeader& h = reader.header();
    const std::vector<io::ProducerState> records = reader.producers();
    EpochResume epoch;
    epoch.epoch_samples = h.epoch_samples;
    epoch.old_producers = h.producers;
    epoch.positions.resize(h.producers);
    for (const auto& r : records) {
      if (r.producer < 0 || r.producer >= h.producers) {
        throw Error(resume.path + ": producer record " + std::to_string(r.producer) + " of " +
                        std::to_string(h.producers),
                    "the checkpoint is damaged; resume from an older one");
      }
      epoch.positions[r.producer] = {r.byte_offset, r.line};
    }
    source_->resume_epoch(epoch);
    rounds_in_phase_ = h.step_in_epoch;
    next_round_ = h.step;
    if (admission_ && h.admission_counters > 0) {
      // Same producers: each takes its own sketch; otherwise every producer
      // starts from the sum of all (an upper bound on every count, as a sketch is).
      const bool same = h.producers == context_.layout.producers();
      std::vector<uint32_t> counters = reader.admission_counters(same ? context_.index : 0);
      uint64_t seen = 0, defaulted = 0;
      for (const auto& r : records) {
        if (same && r.producer != context_.index) continue;
        seen += r.admission_seen, defaulted += r.admission_defaulted;
      }
      if (h.producers != context_.layout.producers()) {
        for (int q = 1; q < h.producers; ++q) {
          const std::vector<uint32_t> more = reader.admission_counters(q);
          for (size_t i = 0; i < counters.size() && i < more.size(); ++i) counters[i] += more[i];
        }
      }
      if (!counters.empty()) admission_->restore(std::move(counters), same ? seen : 0, same ? defaulted : 0);
    }
  }

  void wait(MPI_Request& request) {
    comm::Backoff backoff;
    int done = 0;
    while (true) {
      comm::check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) return;
      service();
      backoff.pause();
    }
  }

  // A message buffer for q: a completed send's, so that steady streaming
  // allocates (and page-faults) nothing.
  std::vector<char> take_buffer(TrainerQueue& q) {
    if (q.spare.empty()) return {};
    std::vector<char> buffer = std::move(q.spare.back());
    q.spare.pop_back();
    return buffer;
  }
  void retire_front(TrainerQueue& q) {
    if (q.spare.size() < 4) q.spare.push_back(std::move(q.in_flight.front().bytes));
    q.in_flight.pop_front();
  }

  void send(TrainerQueue& q, std::vector<char> bytes) {
    wait_for_room(q);
    report_.bytes_sent += bytes.size();
    q.in_flight.push_back({MPI_REQUEST_NULL, std::move(bytes)});
    q.in_flight.back().request =
        comm::send_bytes(MPI_COMM_WORLD, q.world_rank, comm::kTagBatch, q.in_flight.back().bytes);
  }
  void send_batch(TrainerQueue& q, const data::Batch& batch) {
    std::vector<char> message = take_buffer(q);
    encode_batch_message(batch, message);
    send(q, std::move(message));
  }

  // Streams one phase; returns true when the trainers said training is over.
  bool run_phase(Phase phase) {
    source_->start_phase(phase);
    phase_ = phase;
    if (phase == Phase::kTrain && !first_phase_) {
      rounds_in_phase_ = 0;
      positions_.clear();
    }
    first_phase_ = false;
    for (auto& q : queues_) q.done = q.final = false;
    if (staging_ && phase == Phase::kTrain && !fell_back_) {
      stream_tiered_rounds();
      if (fell_back_) stream_batches();  // the rest of the phase in Scheme A
    } else {
      stream_batches();
    }
    for (auto& q : queues_) {
      q.in_flight.push_back({MPI_REQUEST_NULL, encode_end_of_phase()});
      q.in_flight.back().request =
          comm::send_bytes(MPI_COMM_WORLD, q.world_rank, comm::kTagBatch, q.in_flight.back().bytes);
    }
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

  bool build(TrainerQueue& q, data::Batch& batch) {
    auto start = Clock::now();
    if (&q == &queues_[0] && phase_ == Phase::kTrain) {  // a new round: where its data starts
      positions_.emplace_back(rounds_in_phase_++, source_->position());
      if (positions_.size() > 4096) positions_.pop_front();
    }
    if (!source_->next(q.trainer, batch)) return false;
    if (admission_) {
      if (phase_ == Phase::kTrain) {
        admission_->admit_training(batch);
      } else {
        admission_->admit_eval(batch);
      }
    }
    data::deduplicate(batch);
    report_.build_s += seconds(start, Clock::now());
    report_.batches += 1;
    report_.samples += batch.size;
    return true;
  }

  // Scheme A and evaluation: batches go out as they are built.
  void stream_batches() {
    bool exhausted = false;
    while (!exhausted && !any_done()) {
      for (auto& q : queues_) {
        data::Batch batch;
        if (!build(q, batch)) {
          exhausted = true;
          break;
        }
        send_batch(q, batch);
      }
      poll_done();
    }
  }

  // Scheme B: rounds are built `horizon` ahead of the window so the look-ahead
  // policy knows future uses; each round is planned and staged when it leaves
  // the front, and its staging plan travels with the batch of that round.
  void stream_tiered_rounds() {
    std::deque<Round> window;
    bool more = true;
    while (true) {
      // The online controller may change the depth between rounds.
      depth_ = staging_->prefetch_depth();
      const size_t ahead = static_cast<size_t>(depth_ + options_.store.horizon);
      bool built = false;
      while (more && window.size() <= ahead) {
        // Never plan rounds past the last step: the window near the end (and
        // with it the minimum L1 budget) must not depend on when the trainers'
        // end-of-training message arrives.
        if (options_.train.steps > 0 && next_round_ >= options_.train.steps) {
          more = false;
          break;
        }
        Round round;
        round.number = next_round_;
        round.batches.resize(queues_.size());
        bool ok = true;
        for (size_t i = 0; i < queues_.size() && ok; ++i) ok = build(queues_[i], round.batches[i]);
        poll_done();
        ok = ok && !any_done();
        bool any_lagging = false;
        if (!exchange_->exchange(ok, staging_->wants_fallback(), round.batches, requests_, any_lagging,
                                 [this] { service(); })) {
          more = false;
          break;
        }
        window.push_back(std::move(round));
        ++next_round_;
        built = true;
        if (any_lagging) {
          switch_to_ps(window);
          return;
        }
        staging_->add_round(window.back().number, requests_);
      }
      if (window.empty()) break;
      // The last rounds are built already (the horizon reaches the last step):
      // the producers agree on the fallback without a round exchange to carry it.
      if (!built && options_.store.fallback_late_rounds > 0 && any_producer_lagging(staging_->wants_fallback())) {
        switch_to_ps(window);
        return;
      }
      Round& front = window.front();
      if (options_.store.fault_staging_delay_ms > 0) {
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(options_.store.fault_staging_delay_ms));
      }
      staging_->note_lateness(front.number);
      const std::string decision = staging_->run_controller(front.number);
      if (!decision.empty()) spdlog::info("autotune: {}", decision);
      for (size_t i = 0; i < queues_.size(); ++i) {
        std::vector<char> message = take_buffer(queues_[i]);
        encode_batch_message(front.batches[i], message);
        staging_->stage(front.number, i, message);
        send(queues_[i], std::move(message));
      }
      window.pop_front();
      poll_done();
    }
  }

  // Graceful fallback to Scheme A (store.fallback_late_rounds): staging kept
  // its trainers waiting, so from the window's front round on, rows come from
  // the servers. The front batch carries the switch; the trainers flush their
  // L1s, this producer writes its L2 down, and every later batch goes out plain.
  // Every producer decides at the same round (the flag travels in exchange_round).
  void switch_to_ps(std::deque<Round>& window) {
    const Round& front = window.front();
    if (context_.index == 0) {
      spdlog::warn("tiered store: staging was late for {} rounds in a row; falling back to Scheme A (ps) from "
                   "step {} (store.fallback_late_rounds)",
                   options_.store.fallback_late_rounds, front.number);
    }
    for (size_t i = 0; i < queues_.size(); ++i) {
      std::vector<char> message = take_buffer(queues_[i]);
      encode_batch_message(front.batches[i], message);
      staging_->append_switch(front.number, message);
      send(queues_[i], std::move(message));
    }
    fallback_round_ = front.number;
    fell_back_ = true;
    staging_->finish_training();  // every L1 and this L2 written down to the servers
    for (size_t r = 1; r < window.size(); ++r) {
      for (size_t i = 0; i < queues_.size(); ++i) send_batch(queues_[i], window[r].batches[i]);
    }
    window.clear();
  }

  // Collective over producers: does any of them want the Scheme A fallback?
  bool any_producer_lagging(bool lagging) {
    int mine = lagging ? 1 : 0, any = 0;
    MPI_Request request;
    comm::check_mpi(MPI_Iallreduce(&mine, &any, 1, MPI_INT, MPI_MAX, context_.role_comm, &request),
                    "MPI_Iallreduce");
    wait(request);
    return any != 0;
  }

  void wait_for_room(TrainerQueue& q) {
    auto start = Clock::now();
    while (static_cast<int>(q.in_flight.size()) >= depth_) {
      wait(q.in_flight.front().request);
      retire_front(q);
    }
    // Completed sends at the front free their buffers early.
    while (!q.in_flight.empty()) {
      int done = 0;
      comm::check_mpi(MPI_Test(&q.in_flight.front().request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (!done) break;
      retire_front(q);
    }
    report_.blocked_s += seconds(start, Clock::now());
  }

  // Receives any PhaseDone messages that have arrived; true if one did.
  bool poll_done() {
    bool any = false;
    for (auto& q : queues_) {
      if (q.done) continue;
      MPI_Message message;
      MPI_Status status;
      if (!comm::probe_politely(MPI_COMM_WORLD, q.world_rank, comm::kTagProducerCtl, message, status, false)) {
        continue;
      }
      PhaseDone done{};
      comm::check_mpi(MPI_Mrecv(&done, sizeof(done), MPI_BYTE, &message, MPI_STATUS_IGNORE), "MPI_Mrecv");
      q.done = true;
      q.final = done.final != 0;
      if (done.stop != 0) stopped_ = true;
      any = true;
    }
    return any;
  }
  bool any_done() const {
    for (const auto& q : queues_) {
      if (q.done) return true;
    }
    return false;
  }
  bool all_done() const {
    for (const auto& q : queues_) {
      if (!q.done) return false;
    }
    return true;
  }

  const RunOptions& options_;
  const RankContext& context_;
  int depth_;
  std::vector<TrainerQueue> queues_;
  std::unique_ptr<BatchSource> source_;
  std::unique_ptr<store::ProducerStaging> staging_;
  std::unique_ptr<store::RoundExchange> exchange_;
  std::vector<store::OwnerRequests> requests_;  // scratch: the round's requests per owner
  std::unique_ptr<store::FrequencyAdmission> admission_;  // store.min_count > 1
  Phase phase_ = Phase::kTrain;
  bool fell_back_ = false;       // the tiered store switched to Scheme A
  bool stopped_ = false;         // preempted: no evaluation, no final flush
  bool first_phase_ = true;
  int64_t rounds_in_phase_ = 0;  // rounds built in this training phase (epoch)
  std::deque<std::pair<int64_t, SourcePosition>> positions_;  // round -> stream position before it
  std::vector<std::optional<CheckpointStamp>> stamps_;         // per trainer queue
  int64_t fallback_round_ = -1;  // the first round served in Scheme A
  int64_t next_round_ = 0;
  ProducerReport report_;
};

}  // namespace

bool run_has_eval(const RunOptions& options) {
  if (!options.train.eval) return false;
  if (options.data.source == "synthetic") return options.data.synthetic_eval_samples > 0;
  return !options.data.eval.empty();
}

ProducerReport run_producer(const RunOptions& options, const RankContext& context, const ResumePoint& resume) {
  return Producer(options, context, resume).run();
}

}  // namespace strata::runtime
