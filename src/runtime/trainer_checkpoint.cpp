// The trainer's side of checkpoints: when one is due, writing its part at a
// step boundary (see runtime/checkpointing.hpp for the protocol), and resuming
// dense weights, optimizer state, counters and the open metrics window.
#include <spdlog/spdlog.h>

#include "comm/collectives.hpp"
#include "comm/mpi_channel.hpp"
#include "common/error.hpp"
#include "io/checkpoint_reader.hpp"
#include "io/checkpoint_writer.hpp"
#include "runtime/checkpointing.hpp"
#include "runtime/shared_tables.hpp"
#include "runtime/trainer.hpp"

namespace strata::runtime {

// Models that share tables make their server rounds together, so they must
// continue from the same step: a resume that found their latest complete
// checkpoints at different steps (one model's write was cut short) stops here.
void Trainer::check_sharing_models_resume_together() {
  const SharedTablesPlan* tables = shared_tables();
  if (tables == nullptr || tables->sharing_trainers == MPI_COMM_NULL) return;
  int64_t steps[2] = {report_.steps, -report_.steps};
  comm::allreduce(steps, 2, MPI_INT64_T, MPI_MIN, tables->sharing_trainers);
  if (steps[0] != -steps[1]) {
    throw InputError("the models of models.share_tables resume from checkpoints of different steps (" +
                         std::to_string(steps[0]) + " and " + std::to_string(-steps[1]) +
                         "): their servers take every sharing model's requests in step",
                     "resume each of them from the same step: --resume=DIR picks each model's latest complete "
                     "checkpoint in DIR/NAME; remove the newer ones of the models that are ahead");
  }
}

bool Trainer::checkpoint_due() const {
  if (options_.checkpoint.dir.empty() || report_.steps == 0 || report_.steps == last_checkpoint_step_) return false;
  const auto& c = options_.checkpoint;
  if (c.every_steps > 0 && report_.steps % c.every_steps == 0) return true;
  return c.every_seconds > 0 && seconds(last_checkpoint_time_, Clock::now()) >= c.every_seconds;
}

// After step report_.steps, before the next one (its batch may have been
// received and staged already: that changes where rows are, not their values).
void Trainer::write_checkpoint(bool preempted) {
  const auto start = Clock::now();
  CheckpointStamp stamp;
  stamp.step = report_.steps;
  stamp.epoch = epoch_;
  stamp.step_in_epoch = steps_this_epoch_;
  stamp.samples = samples_total_;
  stamp.epoch_samples = epoch_samples_;
  stamp.train_seconds = resumed_seconds_ + seconds(run_start_, start);
  stamp.dense_optimizer_steps = optimizer_->steps_taken();
  stamp.preempted = preempted ? 1 : 0;
  // Caches write down, the producer parks, the servers join: see checkpointing.hpp.
  store_->prepare_checkpoint(stamp.step);
  comm::send_value(stamp, producer_rank_, comm::kTagCheckpoint, context_.job);
  int ready = 0;
  MPI_Request request = comm::receive_value(ready, producer_rank_, comm::kTagCheckpointReady, context_.job);
  comm::wait(request);
  store_->checkpoint_servers(&stamp, sizeof(stamp));
  {
    io::CheckpointWriter writer(context_.job, checkpoint_temporary(options_, stamp.step),
                                checkpoint_header(options_, stamp));
    const model::DenseSharding* sharding = model_->dense_sharding();
    const auto& slices = sharding ? sharding->full_slices : model_->parameters().slices();
    std::vector<float> values, optimizer_state;
    whole_dense(values, optimizer_state);
    io::TrainerState state{window_loss_, window_samples_, window_steps_, last_window_loss_,
                           {last_levels_[0], last_levels_[1], last_levels_[2], last_levels_[3]}};
    if (is_root()) {
      writer.write_dense(slices, values, optimizer_state, true);
    } else {
      writer.write_dense({}, {}, {}, false);
    }
    writer.write_trainer_state(state, is_root());
    writer.write_rows(io::SparseRows{});
    writer.write_producers(nullptr, nullptr);
    writer.close();
  }
  if (context_.world_rank == 0) publish_checkpoint_file(options_, stamp.step, seconds(start, Clock::now()));
  comm::barrier(comm_);  // nobody trains before the file is in place
  last_checkpoint_step_ = report_.steps;
  last_checkpoint_time_ = Clock::now();
  report_.checkpoints += 1;
  report_.checkpoint_pause_s += seconds(start, last_checkpoint_time_);
}

void Trainer::whole_dense(std::vector<float>& values, std::vector<float>& state) {
  const model::DenseSharding* sharding = model_->dense_sharding();
  const auto& params = model_->parameters();
  if (sharding == nullptr) {
    values = params.values();
    state = optimizer_->state();
    return;
  }
  values.clear(), state.clear();
  if (groups_.dp_rank() != 0) return;  // the first replica holds every expert once
  // Each member sends its experts' values, then its share of each state array.
  const std::vector<float> local_state = optimizer_->state();
  const size_t local = sharding->local_size(), shard = sharding->shard_size, replicated = sharding->replicated;
  const int arrays = local == 0 ? 0 : static_cast<int>(local_state.size() / local);
  std::vector<float> send(params.values().begin() + replicated, params.values().end());
  for (int a = 0; a < arrays; ++a) {
    const float* array = local_state.data() + size_t(a) * local;
    send.insert(send.end(), array + replicated, array + local);
  }
  const std::vector<char> gathered =
      comm::gather_bytes(send.data(), static_cast<int>(send.size() * sizeof(float)), 0, groups_.ep_comm());
  if (groups_.ep_rank() != 0) return;
  const int members = sharding->members;
  if (gathered.size() != size_t(members) * send.size() * sizeof(float)) {
    throw Error("the expert group's dense shards differ in size (bug)");
  }
  const float* parts = reinterpret_cast<const float*>(gathered.data());
  const size_t part = send.size();  // one member's floats: (1 + arrays) x shard
  auto whole_array = [&](const float* replicated_part, int which, std::vector<float>& out) {
    std::vector<const float*> shards;
    for (int m = 0; m < members; ++m) shards.push_back(parts + size_t(m) * part + size_t(which) * shard);
    sharding->append_whole(replicated_part, shards, out);
  };
  whole_array(params.values().data(), 0, values);
  for (int a = 0; a < arrays; ++a) whole_array(local_state.data() + size_t(a) * local, a + 1, state);
}

// Continues from a checkpoint: dense weights and optimizer state, the step
// counters, and the metrics window that was open when it was written.
void Trainer::restore() {
  io::CheckpointReader reader(MPI_COMM_SELF, resume_.path);
  const io::CheckpointHeader& h = reader.header();
  auto& params = model_->parameters();
  const model::DenseSharding* sharding = model_->dense_sharding();
  const size_t whole = sharding ? sharding->full_size : params.size();
  std::vector<float> values = reader.dense_values();
  if (values.size() != whole) {
    throw Error(resume_.path + ": " + std::to_string(values.size()) + " dense values, this model has " +
                    std::to_string(whole),
                "resume with the model the checkpoint was written with");
  }
  std::vector<float> optimizer_state = reader.dense_optimizer_state();
  if (sharding) {
    // The file holds the whole model (any layout wrote it): this trainer takes its experts.
    const int arrays = whole == 0 ? 0 : static_cast<int>(optimizer_state.size() / whole);
    if (size_t(arrays) * whole != optimizer_state.size()) {
      throw Error(resume_.path + ": a dense optimizer state of " + std::to_string(optimizer_state.size()) +
                      " floats is not whole arrays of the model's " + std::to_string(whole) + " values",
                  "resume with the optimizer (optim.dense) the checkpoint was written with");
    }
    values = sharding->local_of(values, 1);
    optimizer_state = sharding->local_of(optimizer_state, arrays);
  }
  params.values() = std::move(values);
  optimizer_->set_state(optimizer_state);
  optimizer_->set_steps_taken(h.dense_optimizer_steps);
  const io::TrainerState state = reader.trainer_state();
  window_loss_ = state.window_loss;
  window_samples_ = state.window_samples;
  window_steps_ = state.window_steps;
  last_window_loss_ = state.last_window_loss;
  for (int i = 0; i < 4; ++i) last_levels_[i] = state.last_levels[i];
  report_.steps = h.step;
  last_checkpoint_step_ = h.step;
  first_epoch_ = static_cast<int>(h.epoch);
  steps_this_epoch_ = h.step_in_epoch;
  epoch_samples_ = h.epoch_samples;
  samples_total_ = h.samples;
  resumed_seconds_ = h.train_seconds;
  report_.resumed_from_step = h.step;
  if (is_root()) {
    spdlog::info("resumed from {}: step {}, epoch {} (+{} steps into it)", resume_.path, h.step, h.epoch,
                 h.step_in_epoch);
  }
}

}  // namespace strata::runtime
