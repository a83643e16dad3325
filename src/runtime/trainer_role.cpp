// The trainer's step loop: receive a batch (with its staging plan in tiered
// mode), agree with the other trainers that there is a step to take, pull the
// rows, run forward and backward, push the row gradients, all-reduce the dense
// gradients and step the dense optimizer.
#include "runtime/trainer.hpp"

#include <spdlog/spdlog.h>

#include <cmath>

#include "comm/collectives.hpp"
#include "comm/link_model.hpp"
#include "comm/mpi_channel.hpp"
#include "comm/stall_watchdog.hpp"
#include "common/error.hpp"
#include "runtime/batch_channel.hpp"
#include "runtime/preemption.hpp"
#include "runtime/producer_role.hpp"
#include "runtime/shared_tables.hpp"

namespace strata::runtime {
namespace {

// Steps the run will take when that is known in advance (-1 otherwise).
int64_t planned_steps(const RunOptions& options, int trainers) {
  if (options.train.steps > 0) return options.train.steps;
  if (options.data.source != "synthetic") return -1;
  const int64_t per_epoch = options.data.synthetic_train_samples / (int64_t(options.train.batch_size) * trainers);
  return per_epoch * options.train.epochs;
}

}  // namespace

Trainer::Trainer(const RunOptions& options, const RankContext& context, const ResumePoint& resume)
    : options_(options),
      context_(context),
      resume_(resume),
      trainers_(context.layout.trainers()),
      comm_(context.role_comm),
      groups_(context.role_comm, resolve_parallel_layout(options.layout)),
      producer_rank_(context.layout.world_rank(Role::kProducer, context.layout.producer_of_trainer(context.index))),
      shape_(data_shape(options.data)),
      model_(model::make_model(options.model, shape_.num_dense, shape_.num_tables, options.train.seed, shape_.num_tasks)),
      optimizer_(model::make_dense_optimizer(options.optim, model_->parameters().size())) {
  store_ = make_store();
  if (groups_.layout().sp > 1) {
    sequence_group_ = std::make_unique<comm::MpiSequenceGroup>(groups_);
    model_->set_sequence_group(sequence_group_.get(),
                               {options.layout.sp_min_len, model::parse_sequence_parallel_mode(options.layout.sp_mode)});
  }
  if (groups_.layout().ep > 1) {
    expert_group_ = std::make_unique<comm::MpiExpertGroup>(groups_);
    model_->set_expert_group(expert_group_.get());
    // The experts' storage is sharded now: the optimizer keeps state for what this trainer holds.
    optimizer_ = model::make_dense_optimizer(options.optim, model_->parameters().size());
  }
  if (is_root()) writer_ = std::make_unique<io::MetricsWriter>(options.output.dir);
  rows_.resize(shape_.num_tables);
  row_grads_.resize(shape_.num_tables);
  row_ptrs_.resize(shape_.num_tables);
  grad_ptrs_.resize(shape_.num_tables);
  if (resume_.active()) restore();
}

TrainerReport Trainer::run() {
  const int64_t planned = planned_steps(options_, trainers_);
  if (is_root()) {
    spdlog::info("training: {} trainers (dp {} x sp {} x ep {}) x batch {} = global batch {}, store {}, {} steps",
                 trainers_, groups_.layout().dp, groups_.layout().sp, groups_.layout().ep,
                 options_.train.batch_size, global_batch(), store_->mode(),
                 planned > 0 ? std::to_string(planned) : std::string("(by epochs)"));
  }
  {
    comm::WaitingFor waiting([] { return std::string("the other trainers to start"); });
    comm::barrier(comm_);
  }
  check_sharing_models_resume_together();
  const auto start = Clock::now();
  const CpuTimes cpu_start = process_cpu_times();
  run_start_ = start;
  window_start_ = start;
  last_checkpoint_time_ = start;
  const int64_t first_step = report_.steps;  // > 0 when resumed
  bool final = options_.train.steps > 0 ? report_.steps >= options_.train.steps : first_epoch_ >= options_.train.epochs;
  for (int epoch = first_epoch_; !final; ++epoch) {
    epoch_ = epoch;
    train_epoch(planned);
    final = (options_.train.steps > 0 && report_.steps >= options_.train.steps) ||
            (options_.train.steps == 0 && epoch + 1 >= options_.train.epochs) || preempted_;
    if (options_.train.steps > 0 && !final && steps_this_epoch_ == 0) {
      throw Error("the training data holds less than one global batch (" + std::to_string(global_batch()) +
                      " samples)",
                  "use more data or a smaller train.batch_size");
    }
    end_phase(final);
    steps_this_epoch_ = 0;
    epoch_samples_ = 0;
  }
  report_.train_seconds = seconds(start, Clock::now());
  report_.train_cpu = process_cpu_times() - cpu_start;
  report_.samples = (report_.steps - first_step) * global_batch();
  report_.samples_per_s = report_.samples / std::max(report_.train_seconds, 1e-9);
  report_.measured_samples_per_s = report_.samples_per_s;
  if (options_.measure_after_steps > 0 && report_.steps > options_.measure_after_steps) {
    const double measured = seconds(measure_start_, Clock::now());
    report_.measured_samples_per_s =
        double(report_.steps - options_.measure_after_steps) * global_batch() / std::max(measured, 1e-9);
  }
  if (window_steps_ > 0 && !preempted_) flush_window(planned, /*last=*/true);  // the last partial window
  report_.train_logloss = last_window_loss_;
  if (expert_group_ != nullptr) report_.bytes_experts = expert_group_->bytes_exchanged() + expert_group_->bytes_chained();
  if (sequence_group_ != nullptr) {
    report_.bytes_sequence = sequence_group_->bytes_exchanged();
    report_.sequence_parallel = model_->take_sequence_parallel_stats();
  }
  report_.preempted = preempted_;
  if (preempted_) {  // the checkpoint holds everything; leave quickly
    stop_stall_watchdog();
    store_->shutdown();
    return report_;
  }
  comm::StallWatchdog::set_step("the final flush after step", report_.steps);
  store_->flush();  // tiered: every dirty row goes down to the servers
  comm::StallWatchdog::set_step("the evaluation after step", report_.steps);
  if (run_has_eval(options_)) evaluate();
  stop_stall_watchdog();  // the final dump: one long computation on trainer 0, not watched
  finish();
  return report_;
}

// Receives the next message from the producer; false at the end of the phase.
bool Trainer::receive_batch(data::Batch& batch) {
  double waited = 0;
  {
    comm::WaitingFor waiting(
        [this] { return "its next batch from " + comm::StallWatchdog::name_rank(producer_rank_); });
    comm::receive_bytes(context_.job, producer_rank_, comm::kTagBatch, message_, &waited);
  }
  report_.stall_s += waited;
  report_.bytes_batches += message_.size();
  comm::LinkModel::transfer(comm::Link::kHostToDevice, message_.size());  // the sample stream
  if (message_kind(message_) == BatchMessageKind::kEndOfPhase) {
    phase_ended_ = true;
    return false;
  }
  decode_batch_message(message_, batch);
  stage_attachment(message_, waited);
  return true;
}

// A tiered batch carries its round's staging plan: apply it before the step.
void Trainer::stage_attachment(const std::vector<char>& message, double batch_wait_s) {
  auto [bytes, size] = batch_message_attachment(message);
  if (size > 0) store_->stage(bytes, size, batch_wait_s);
}

void Trainer::train_epoch(int64_t planned) {
  phase_ended_ = false;
  data::Batch batch;
  while (true) {
    comm::StallWatchdog::set_step("step", report_.steps + 1);
    int have = receive_batch(batch) ? 1 : 0;
    if (options_.train.steps > 0 && report_.steps >= options_.train.steps) have = 0;
    // One all-reduce decides, identically on every trainer: is there a step
    // to take, is a checkpoint due, was the job told to stop (MIN of negations = OR).
    // A non-finite loss on any trainer stops every trainer before the poisoned
    // parameters reach a checkpoint.
    int flags[4] = {have, checkpoint_due() ? 0 : 1, preemption_requested() ? 0 : 1, non_finite_step_ < 0 ? 1 : 0};
    // Models that share tables decide together: their servers take a round of all of them.
    const SharedTablesPlan* tables = shared_tables();
    const MPI_Comm deciders =
        tables != nullptr && tables->sharing_trainers != MPI_COMM_NULL ? tables->sharing_trainers : comm_;
    if (trainers_ > 1 || deciders != comm_) {
      comm::WaitingFor waiting([] { return std::string("the other trainers to agree on taking the step"); });
      comm::allreduce(flags, 4, MPI_INT, MPI_MIN, deciders);
    }
    if (flags[3] == 0) stop_on_non_finite_loss();
    const bool all = flags[0] != 0, stop = flags[2] == 0;
    if ((flags[1] == 0 || stop) && report_.steps > last_checkpoint_step_ && !options_.checkpoint.dir.empty()) {
      write_checkpoint(stop);
    }
    if (stop) {
      if (is_root()) {
        spdlog::warn("signal {} received: stopping after step {} (exit code {})", preemption_signal(), report_.steps,
                     kExitPreempted);
      }
      preempted_ = true;
      break;
    }
    if (!all) break;
    if (batch.size != options_.train.batch_size) {
      throw Error("trainer " + std::to_string(context_.index) + " got a batch of " + std::to_string(batch.size) +
                  " samples, expected " + std::to_string(options_.train.batch_size));
    }
    train_step(batch);
    comm::StallWatchdog::step_completed();
    ++steps_this_epoch_;
    epoch_samples_ += global_batch();
    samples_total_ += global_batch();
    if (report_.steps == options_.measure_after_steps) measure_start_ = Clock::now();
    if (report_.steps % options_.output.metrics_every == 0 || report_.steps % options_.output.progress_every == 0) {
      flush_window(planned, /*last=*/false);
    }
  }
}

// Every trainer gets here together (the step flags' all-reduce). No checkpoint
// is written; the job ends through the error path with the step named.
void Trainer::stop_on_non_finite_loss() {
  const int64_t step = non_finite_step_ >= 0 ? non_finite_step_ : report_.steps;
  throw Error("the training loss became NaN or infinite at step " + std::to_string(step) +
                  (non_finite_step_ >= 0 ? " on trainer " + std::to_string(context_.index) : " on another trainer") +
                  "; stopped without writing a checkpoint of the poisoned parameters",
              "lower optim.dense_lr / optim.sparse_lr (they must be finite), check the data for huge dense "
              "values, or resume from the last good checkpoint");
}

void Trainer::train_step(const data::Batch& batch) {
  const int dim = model_->embedding_dim();
  {
    comm::WaitingFor waiting([] { return std::string("the rows of its batch"); });
    store_->pull(batch, rows_, /*for_training=*/true);
  }
  ++report_.keys_batches;
  for (int t = 0; t < shape_.num_tables; ++t) {
    report_.keys_total += batch.tables[t].index.size();
    report_.keys_unique += batch.tables[t].unique_keys.size();
    row_grads_[t].resize(batch.tables[t].unique_keys.size() * dim);
    row_ptrs_[t] = rows_[t].data();
    grad_ptrs_[t] = row_grads_[t].data();
  }
  const float scale = 1.0f / (float(batch.size) * trainers_);
  // The model's errors are about the batch against its options (a history longer than its max_len).
  const double loss = as_input_errors([&] { return model_->forward_backward(batch, row_ptrs_, grad_ptrs_, scale); });
  if (!std::isfinite(loss) && non_finite_step_ < 0) non_finite_step_ = report_.steps + 1;
  window_loss_ += loss;
  window_samples_ += batch.size;
  {
    comm::WaitingFor waiting([] { return std::string("the push of its row gradients"); });
    store_->push(batch, row_grads_);
  }
  auto& params = model_->parameters();
  if (trainers_ > 1) {
    comm::WaitingFor waiting([] { return std::string("the all-reduce of the dense gradients"); });
    if (const model::DenseSharding* sharding = model_->dense_sharding()) {
      // The replicated weights over every trainer; this trainer's experts hold the
      // sum of their replicas' blocks on the last replica already (the chain): it
      // passes it to the others.
      comm::ordered_allreduce_sum(params.grads().data(), static_cast<int>(sharding->replicated), comm_);
      if (groups_.layout().dp > 1) {
        comm::broadcast(params.grads().data() + sharding->replicated, static_cast<int>(sharding->shard_size),
                        MPI_FLOAT, groups_.layout().dp - 1, groups_.dp_comm());
      }
      report_.bytes_allreduce += sharding->replicated * sizeof(float);
    } else if (model_->sums_gradients_in_trainer_order()) {
      comm::ordered_allreduce_sum(params.grads().data(), static_cast<int>(params.size()), comm_);
    } else {
      comm::allreduce(params.grads().data(), static_cast<int>(params.size()), MPI_FLOAT, MPI_SUM, comm_);
    }
    if (model_->dense_sharding() == nullptr) report_.bytes_allreduce += params.size() * sizeof(float);
  }
  optimizer_->step(params.values().data(), params.grads().data(), params.size());
  ++report_.steps;
  ++window_steps_;
}

void Trainer::end_phase(bool final) {
  PhaseDone done{final ? 1u : 0u, preempted_ ? 1u : 0u};
  comm::send_value(done, producer_rank_, comm::kTagProducerCtl, context_.job);
  std::vector<char> drained;
  comm::WaitingFor waiting(
      [this] { return "the end of the phase from " + comm::StallWatchdog::name_rank(producer_rank_); });
  while (!phase_ended_) {
    comm::receive_bytes(context_.job, producer_rank_, comm::kTagBatch, drained);
    phase_ended_ = message_kind(drained) == BatchMessageKind::kEndOfPhase;
    if (!phase_ended_) stage_attachment(drained, 0);  // keeps L1 what its producer believes
  }
}

TrainerReport run_trainer(const RunOptions& options, const RankContext& context, const ResumePoint& resume) {
  Trainer trainer(options, context, resume);
  start_stall_watchdog(options, context);
  return trainer.run();
}

}  // namespace strata::runtime
