// The producer's side of checkpoints: joining one its trainers started (its
// caches written down, its reader positions recorded) and resuming them.
#include "runtime/producer.hpp"

#include <spdlog/spdlog.h>

#include "comm/mpi_channel.hpp"
#include "common/error.hpp"
#include "io/checkpoint_reader.hpp"
#include "io/checkpoint_writer.hpp"

namespace strata::runtime {

// Every trainer of this producer sends a stamp; with all of them here, the
// caches are written down, the trainers are told "ready", and this rank
// writes its part of the file. Called only from the producer's own loops,
// never inside an L2 request, so the servers it may wait on are serving.
// One probe for all trainers: a trainer that sent its stamp waits for "ready"
// before it could send another.
void Producer::poll_checkpoint() {
  while (true) {
    MPI_Message message;
    MPI_Status status;
    if (!comm::probe_politely(context_.job, MPI_ANY_SOURCE, comm::kTagCheckpoint, message, status, false)) break;
    size_t i = 0;
    while (i < queues_.size() && queues_[i].world_rank != status.MPI_SOURCE) ++i;
    if (i == queues_.size()) {
      throw Error("checkpoint stamp from rank " + std::to_string(status.MPI_SOURCE) + ", which this producer does not feed");
    }
    CheckpointStamp stamp;
    comm::receive_matched(message, &stamp, sizeof(stamp));
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
    comm::send_value(ready, q.world_rank, comm::kTagCheckpointReady, context_.job);
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
  io::CheckpointWriter writer(context_.job, checkpoint_temporary(options_, stamp.step),
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
SourcePosition Producer::position_of_round(int64_t round) const {
  for (const auto& [r, position] : positions_) {
    if (r == round) return position;
  }
  return source_->position();  // not built: the epoch's data ended before it
}

void Producer::restore(const ResumePoint& resume) {
  io::CheckpointReader reader(MPI_COMM_SELF, resume.path);
  const io::CheckpointHeader& h = reader.header();
  const std::vector<io::ProducerState> records = reader.producers();
  EpochResume epoch;
  epoch.epoch = h.epoch;
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

}  // namespace strata::runtime
