// Producer: the state of one producer rank, shared by the files that
// implement it (a private header of the runtime): producer_role.cpp (phases,
// batches and the queues to the trainers), producer_tiered.cpp (Scheme B
// rounds: requests, planning, staging, the fallback to Scheme A) and
// producer_checkpoint.cpp (joining checkpoints, resuming reader positions).
#pragma once

#include <mpi.h>

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "data/batch.hpp"
#include "runtime/batch_source.hpp"
#include "runtime/checkpointing.hpp"
#include "runtime/producer_role.hpp"
#include "store/frequency_admission.hpp"
#include "store/producer_staging.hpp"
#include "store/round_requests.hpp"

namespace strata::runtime {

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
  // The trainer's pace while this producer waits for room (seconds between
  // the sends it took, smoothed): how long the producer may sleep in a poll.
  double take_interval_s = 0;
  std::chrono::steady_clock::time_point last_take{};
};

// A round of the tiered store: one batch per trainer of this producer.
struct Round {
  int64_t number = 0;
  std::vector<data::Batch> batches;
};

class Producer {
 public:
  Producer(const RunOptions& options, const RankContext& context, const ResumePoint& resume);
  ProducerReport run();

 private:
  // Keeps the tiered store's write-backs flowing while this rank waits on
  // anything, and joins a checkpoint when the trainers ask for one.
  void service();
  // Every trainer of this producer sends a stamp; with all of them here, the
  // caches are written down, the trainers are told "ready", and this rank
  // writes its part of the file. Called only from the producer's own loops,
  // never inside an L2 request, so the servers it may wait on are serving.
  void poll_checkpoint();
  // The training stream's position before round `round` of this epoch (rounds
  // are built ahead, so it is looked up in the recent history).
  SourcePosition position_of_round(int64_t round) const;
  void restore(const ResumePoint& resume);
  void wait(MPI_Request& request);
  // A message buffer for q: a completed send's, so that steady streaming
  // allocates (and page-faults) nothing.
  std::vector<char> take_buffer(TrainerQueue& q);
  void retire_front(TrainerQueue& q);
  void send(TrainerQueue& q, std::vector<char> bytes);
  void send_batch(TrainerQueue& q, const data::Batch& batch);
  // Streams one phase; returns true when the trainers said training is over.
  bool run_phase(Phase phase);
  bool build(TrainerQueue& q, data::Batch& batch);
  // Scheme A and evaluation: batches go out as they are built.
  void stream_batches();
  // Scheme B: rounds are built `horizon` ahead of the window so the look-ahead
  // policy knows future uses; each round is planned and staged when it leaves
  // the front, and its staging plan travels with the batch of that round.
  void stream_tiered_rounds();
  // Graceful fallback to Scheme A (store.fallback_late_rounds): staging kept
  // its trainers waiting, so from the window's front round on, rows come from
  // the servers. The front batch carries the switch; the trainers flush their
  // L1s, this producer writes its L2 down, and every later batch goes out plain.
  // Every producer decides at the same round (the flag travels in exchange_round).
  void switch_to_ps(std::deque<Round>& window);
  // Collective over producers: does any of them want the Scheme A fallback?
  bool any_producer_lagging(bool lagging);
  void wait_for_room(TrainerQueue& q);
  // Receives any PhaseDone messages that have arrived; true if one did.
  bool poll_done();
  bool any_done() const;
  bool all_done() const;

  const RunOptions& options_;
  const RankContext& context_;
  int depth_;
  std::vector<TrainerQueue> queues_;
  std::unique_ptr<BatchSource> source_;
  std::unique_ptr<store::ProducerStaging> staging_;
  std::unique_ptr<store::RoundExchange> exchange_;
  std::vector<store::OwnerRequests> requests_;  // scratch: the round's requests per owner
  std::unique_ptr<store::FrequencyAdmission> admission_;  // store.min_count > 1
  std::vector<int32_t> keys_of_;  // tied tables (model::tied_tables)
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

}  // namespace strata::runtime
