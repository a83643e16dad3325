#include "runtime/trainer_role.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>

#include "comm/link_model.hpp"
#include "comm/mpi_channel.hpp"
#include "common/error.hpp"
#include "data/synthetic.hpp"
#include "io/metrics_writer.hpp"
#include "io/params_digest.hpp"
#include "model/dlrm.hpp"
#include "model/metrics.hpp"
#include "model/optimizers.hpp"
#include "runtime/batch_channel.hpp"
#include "runtime/batch_source.hpp"
#include "runtime/checkpointing.hpp"
#include "runtime/preemption.hpp"
#include "runtime/producer_role.hpp"
#include "store/producer_staging.hpp"
#include "store/remote_ps_store.hpp"
#include "store/online_controller.hpp"
#include "store/tiered_store.hpp"

namespace strata::runtime {
namespace {

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  int total = static_cast<int>(s + 0.5);
  char text[32];
  std::snprintf(text, sizeof(text), "%d:%02d:%02d", total / 3600, (total / 60) % 60, total % 60);
  return text;
}

// Steps the run will take when that is known in advance (-1 otherwise).
int64_t planned_steps(const RunOptions& options, int trainers) {
  if (options.train.steps > 0) return options.train.steps;
  if (options.data.source != "synthetic") return -1;
  const int64_t per_epoch = options.data.synthetic_train_samples / (int64_t(options.train.batch_size) * trainers);
  return per_epoch * options.train.epochs;
}

class Trainer {
 public:
  Trainer(const RunOptions& options, const RankContext& context, const ResumePoint& resume)
      : options_(options),
        context_(context),
        resume_(resume),
        trainers_(context.layout.trainers()),
        comm_(context.role_comm),
        producer_rank_(context.layout.world_rank(Role::kProducer,
                                                 context.layout.producer_of_trainer(context.index))),
        shape_(data_shape(options.data)),
        model_(options.model, shape_.num_dense, shape_.num_tables, options.train.seed),
        optimizer_(model::make_dense_optimizer(options.optim, model_.parameters().size())) {
    std::vector<int> servers;
    for (int s = 0; s < context.layout.servers(); ++s) servers.push_back(context.layout.world_rank(Role::kServer, s));
    const int dim = options.model.embedding_dim;
    if (options.store.mode == "tiered") {
      auto sparse = model::make_sparse_optimizer(options.optim);
      const int width = dim + sparse->state_width(dim);
      // Under the online controller the L1 arena is reserved for the largest budget it may grant.
      const int owners =
          static_cast<int>(context.layout.trainers_of_producer(context.layout.producer_of_trainer(context.index)).size());
      const double arena_mb = options.autotune.online ? store::online_l1_max_mb(options, owners) : options.store.l1_mb;
      store_ = std::make_unique<store::TieredStore>(MPI_COMM_WORLD, comm_, producer_rank_, servers, context.index, dim,
                                                    shape_.num_tables, store::rows_for_budget(arena_mb, width),
                                                    std::move(sparse),
                                                    /*reports_producer=*/context.index < context.layout.producers());
    } else {
      store_ = std::make_unique<store::RemotePsStore>(MPI_COMM_WORLD, servers, context.index, dim, shape_.num_tables);
    }
    if (is_root()) writer_ = std::make_unique<io::MetricsWriter>(options.output.dir);
    rows_.resize(shape_.num_tables);
    row_grads_.resize(shape_.num_tables);
    if (resume_.active()) restore();
  }

  TrainerReport run() {
    const int64_t planned = planned_steps(options_, trainers_);
    if (is_root()) {
      spdlog::info("training: {} trainers x batch {} = global batch {}, store {}, {} steps", trainers_,
                   options_.train.batch_size, int64_t(options_.train.batch_size) * trainers_, store_->mode(),
                   planned > 0 ? std::to_string(planned) : std::string("(by epochs)"));
    }
    MPI_Barrier(comm_);
    const auto start = Clock::now();
    run_start_ = start;
    window_start_ = start;
    last_checkpoint_time_ = start;
    const int64_t first_step = report_.steps;  // > 0 when resumed
    bool final = options_.train.steps > 0 ? report_.steps >= options_.train.steps
                                          : first_epoch_ >= options_.train.epochs;
    for (int epoch = first_epoch_; !final; ++epoch) {
      epoch_ = epoch;
      train_epoch(planned, start);
      final = (options_.train.steps > 0 && report_.steps >= options_.train.steps) ||
              (options_.train.steps == 0 && epoch + 1 >= options_.train.epochs) || preempted_;
      if (options_.train.steps > 0 && !final && steps_this_epoch_ == 0) {
        throw Error("the training data holds less than one global batch (" +
                        std::to_string(int64_t(options_.train.batch_size) * trainers_) + " samples)",
                    "use more data or a smaller train.batch_size");
      }
      end_phase(final);
      steps_this_epoch_ = 0;
      epoch_samples_ = 0;
    }
    report_.train_seconds = seconds(start, Clock::now());
    report_.samples = (report_.steps - first_step) * int64_t(options_.train.batch_size) * trainers_;
    report_.samples_per_s = report_.samples / std::max(report_.train_seconds, 1e-9);
    report_.measured_samples_per_s = report_.samples_per_s;
    if (options_.measure_after_steps > 0 && report_.steps > options_.measure_after_steps) {
      const double measured = seconds(measure_start_, Clock::now());
      report_.measured_samples_per_s = double(report_.steps - options_.measure_after_steps) *
                                       options_.train.batch_size * trainers_ / std::max(measured, 1e-9);
    }
    if (window_steps_ > 0 && !preempted_) flush_window(planned, /*last=*/true);  // the last partial window
    report_.train_logloss = last_window_loss_;
    report_.preempted = preempted_;
    if (preempted_) {  // the checkpoint holds everything; leave quickly
      store_->shutdown();
      return report_;
    }
    store_->flush();  // tiered: every dirty row goes down to the servers

    if (run_has_eval(options_)) evaluate();
    finish();
    return report_;
  }

 private:
  bool is_root() const { return context_.index == 0; }

  // Receives the next message from the producer; false at the end of the phase.
  bool receive_batch(data::Batch& batch) {
    double waited = 0;
    comm::receive_bytes(MPI_COMM_WORLD, producer_rank_, comm::kTagBatch, message_, &waited);
    report_.stall_s += waited;
    report_.bytes_batches += message_.size();
    comm::LinkModel::transfer(comm::Link::kHostToDevice, message_.size());  // the sample stream
    if (message_kind(message_) == BatchMessageKind::kEndOfPhase) {
      phase_ended_ = true;
      return false;
    }
    batch = decode_batch_message(message_);
    stage_attachment(message_);
    return true;
  }

  // A tiered batch carries its round's staging plan: apply it before the step.
  void stage_attachment(const std::vector<char>& message) {
    auto [bytes, size] = batch_message_attachment(message);
    if (size > 0) store_->stage(bytes, size);
  }

  void train_epoch(int64_t planned, Clock::time_point start) {
    phase_ended_ = false;
    data::Batch batch;
    while (true) {
      int have = receive_batch(batch) ? 1 : 0;
      if (options_.train.steps > 0 && report_.steps >= options_.train.steps) have = 0;
      // One all-reduce decides, identically on every trainer: is there a step
      // to take, is a checkpoint due, was the job told to stop (MIN of negations = OR).
      int flags[3] = {have, checkpoint_due() ? 0 : 1, preemption_requested() ? 0 : 1};
      int agreed[3];
      comm::check_mpi(MPI_Allreduce(flags, agreed, 3, MPI_INT, MPI_MIN, comm_), "MPI_Allreduce");
      const bool all = agreed[0] != 0, stop = agreed[2] == 0;
      if ((agreed[1] == 0 || stop) && report_.steps > last_checkpoint_step_ && !options_.checkpoint.dir.empty()) {
        write_checkpoint(stop);
      }
      if (stop) {
        if (is_root()) {
          spdlog::warn("signal {} received: stopping after step {} (exit code {})", preemption_signal(),
                       report_.steps, kExitPreempted);
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
      ++steps_this_epoch_;
      epoch_samples_ += int64_t(options_.train.batch_size) * trainers_;
      samples_total_ += int64_t(options_.train.batch_size) * trainers_;
      if (report_.steps == options_.measure_after_steps) measure_start_ = Clock::now();
      if (report_.steps % options_.output.metrics_every == 0 ||
          report_.steps % options_.output.progress_every == 0) {
        flush_window(planned, /*last=*/false);
      }
    }
    (void)start;
  }

  void train_step(const data::Batch& batch) {
    const int dim = model_.embedding_dim();
    store_->pull(batch, rows_, /*for_training=*/true);
    std::vector<const float*> row_ptrs(shape_.num_tables);
    std::vector<float*> grad_ptrs(shape_.num_tables);
    for (int t = 0; t < shape_.num_tables; ++t) {
      row_grads_[t].resize(batch.tables[t].unique_keys.size() * dim);
      row_ptrs[t] = rows_[t].data();
      grad_ptrs[t] = row_grads_[t].data();
    }
    const float scale = 1.0f / (float(batch.size) * trainers_);
    window_loss_ += model_.forward_backward(batch, row_ptrs, grad_ptrs, scale);
    window_samples_ += batch.size;
    store_->push(batch, row_grads_);
    auto& params = model_.parameters();
    if (trainers_ > 1) {
      comm::check_mpi(MPI_Allreduce(MPI_IN_PLACE, params.grads().data(), static_cast<int>(params.size()), MPI_FLOAT,
                                    MPI_SUM, comm_),
                      "MPI_Allreduce");
      report_.bytes_allreduce += params.size() * sizeof(float);
    }
    optimizer_->step(params.values().data(), params.grads().data(), params.size());
    ++report_.steps;
    ++window_steps_;
  }

  // Combines the window's counters over trainers; trainer 0 prints and logs them.
  void flush_window(int64_t planned, bool last) {
    const auto& traffic = store_->traffic();
    double local[8] = {window_loss_,
                       double(window_samples_),
                       double(traffic.rows_pulled),
                       double(traffic.bytes_pulled),
                       double(traffic.bytes_pushed),
                       double(report_.bytes_batches),
                       report_.stall_s,
                       traffic.pull_wait_s};
    double total[8];
    comm::check_mpi(MPI_Reduce(local, total, 8, MPI_DOUBLE, MPI_SUM, 0, comm_), "MPI_Reduce");
    const auto levels = store_->level_stats();
    std::vector<double> level_local, level_total(levels.size());
    for (const auto& [name, value] : levels) level_local.push_back(value);
    if (!levels.empty()) {
      comm::check_mpi(MPI_Reduce(level_local.data(), level_total.data(), static_cast<int>(levels.size()), MPI_DOUBLE,
                                 MPI_SUM, 0, comm_),
                      "MPI_Reduce");
    }
    for (auto& note : gather_notes()) pending_notes_.push_back(std::move(note));
    const auto now = Clock::now();
    const double window_s = seconds(window_start_, now);
    if (is_root() && total[1] > 0) {
      last_window_loss_ = total[0] / total[1];
      const double rate = total[1] / std::max(window_s, 1e-9);
      const double elapsed = seconds(run_start(), now);
      if (last || report_.steps % options_.output.progress_every == 0) {
        std::string eta = "?";
        if (planned > 0 && report_.steps > 0) eta = format_duration(elapsed / report_.steps * (planned - report_.steps));
        spdlog::info("step {}{} | {:.0f} samples/s | loss {:.4f} | ETA {}", report_.steps,
                     planned > 0 ? "/" + std::to_string(planned) : std::string(), rate, last_window_loss_, eta);
      }
      nlohmann::json line = {
          {"step", report_.steps},
          {"epoch", epoch_},
          {"time_s", elapsed},
          {"samples_per_s", rate},
          {"loss", last_window_loss_},
          {"rows_pulled", total[2]},
          {"bytes", {{"server_to_trainer", total[3]}, {"trainer_to_server", total[4]}, {"producer_to_trainer", total[5]}}},
          {"stall_s", total[6]},
          {"pull_wait_s", total[7]},
      };
      if (!levels.empty()) {
        nlohmann::json level_json;
        for (size_t i = 0; i < levels.size(); ++i) level_json[levels[i].first] = level_total[i];
        auto rate = [](double h, double m) { return h + m > 0 ? h / (h + m) : 0.0; };
        // Window hit rates: the change since the previous line.
        const double l1h = level_json["l1_hits"], l1m = level_json["l1_misses"];
        const double l2h = level_json["l2_hits"], l2m = level_json["l2_misses"];
        level_json["l1_hit_rate_window"] = rate(l1h - last_levels_[0], l1m - last_levels_[1]);
        level_json["l2_hit_rate_window"] = rate(l2h - last_levels_[2], l2m - last_levels_[3]);
        last_levels_ = {l1h, l1m, l2h, l2m};
        line["levels"] = level_json;
      }
      if (last || report_.steps % options_.output.metrics_every == 0) {
        if (!pending_notes_.empty()) line["autotune"] = std::move(pending_notes_);
        pending_notes_.clear();
        writer_->append(line);
      }
    }
    window_loss_ = 0;
    window_samples_ = 0;
    window_steps_ = 0;
    window_start_ = now;
  }

  // Collective over trainers: the controller decisions every trainer heard, on trainer 0.
  std::vector<std::string> gather_notes() {
    std::string mine;
    for (const auto& n : store_->take_notes()) mine += n + "\n";
    int size = static_cast<int>(mine.size());
    std::vector<int> sizes(trainers_), offsets(trainers_, 0);
    comm::check_mpi(MPI_Gather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, comm_), "MPI_Gather");
    int total = 0;
    for (int t = 0; t < trainers_; ++t) offsets[t] = total, total += sizes[t];
    std::string all(is_root() ? total : 0, '\0');
    comm::check_mpi(MPI_Gatherv(mine.data(), size, MPI_CHAR, all.data(), sizes.data(), offsets.data(), MPI_CHAR, 0,
                                comm_),
                    "MPI_Gatherv");
    std::vector<std::string> notes;
    for (size_t at = 0; at < all.size();) {
      const size_t end = all.find('\n', at);
      notes.push_back(all.substr(at, end - at));
      at = end + 1;
    }
    return notes;
  }

  Clock::time_point run_start() const { return run_start_; }
  void end_phase(bool final) {
    PhaseDone done{final ? 1u : 0u, preempted_ ? 1u : 0u};
    comm::check_mpi(MPI_Send(&done, sizeof(done), MPI_BYTE, producer_rank_, comm::kTagProducerCtl, MPI_COMM_WORLD),
                    "MPI_Send");
    std::vector<char> drained;
    while (!phase_ended_) {
      comm::receive_bytes(MPI_COMM_WORLD, producer_rank_, comm::kTagBatch, drained);
      phase_ended_ = message_kind(drained) == BatchMessageKind::kEndOfPhase;
      if (!phase_ended_) stage_attachment(drained);  // keeps L1 what its producer believes
    }
  }

  void evaluate() {
    phase_ended_ = false;
    std::vector<float> probs, labels;
    data::Batch batch;
    data::Batch empty;
    empty.reset(shape_.num_dense, shape_.num_tables);
    std::vector<float> batch_probs;
    while (true) {
      int have = !phase_ended_ && receive_batch(batch) ? 1 : 0;
      int any = 0;
      comm::check_mpi(MPI_Allreduce(&have, &any, 1, MPI_INT, MPI_MAX, comm_), "MPI_Allreduce");
      if (!any) break;
      const data::Batch& b = have ? batch : empty;
      store_->pull(b, rows_, /*for_training=*/false);  // every trainer takes part in each server round
      if (!have) continue;
      std::vector<const float*> row_ptrs(shape_.num_tables);
      for (int t = 0; t < shape_.num_tables; ++t) row_ptrs[t] = rows_[t].data();
      batch_probs.resize(b.size);
      model_.predict(b, row_ptrs, batch_probs.data());
      probs.insert(probs.end(), batch_probs.begin(), batch_probs.end());
      labels.insert(labels.end(), b.labels.begin(), b.labels.end());
    }
    end_phase(true);
    // Exact AUC needs every prediction in one place.
    int local = static_cast<int>(probs.size());
    std::vector<int> counts(trainers_), offsets(trainers_, 0);
    comm::check_mpi(MPI_Gather(&local, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm_), "MPI_Gather");
    int total = 0;
    for (int t = 0; t < trainers_; ++t) offsets[t] = total, total += counts[t];
    std::vector<float> all_probs(is_root() ? total : 0), all_labels(is_root() ? total : 0);
    comm::check_mpi(MPI_Gatherv(probs.data(), local, MPI_FLOAT, all_probs.data(), counts.data(), offsets.data(),
                                MPI_FLOAT, 0, comm_),
                    "MPI_Gatherv");
    comm::check_mpi(MPI_Gatherv(labels.data(), local, MPI_FLOAT, all_labels.data(), counts.data(), offsets.data(),
                                MPI_FLOAT, 0, comm_),
                    "MPI_Gatherv");
    if (is_root()) {
      report_.eval_samples = total;
      report_.eval_auc = model::exact_auc(all_probs.data(), all_labels.data(), all_probs.size());
      report_.eval_logloss = model::mean_logloss(all_probs.data(), all_labels.data(), all_probs.size());
      spdlog::info("eval: {} samples, AUC {:.4f}, logloss {:.4f}", total, report_.eval_auc, report_.eval_logloss);
    }
  }

  void finish() {
    store::RowDump rows = store_->dump_rows();
    if (is_root()) {
      report_.params_digest = io::params_digest(model_.parameters().values(), optimizer_->state(),
                                                optimizer_->steps_taken(), rows);
      report_.sparse_rows = static_cast<int64_t>(rows.ids.size());
    }
    store_->shutdown();
    const auto& traffic = store_->traffic();
    report_.pull_wait_s = traffic.pull_wait_s;
    report_.rows_pulled = traffic.rows_pulled;
    report_.bytes_pulled = traffic.bytes_pulled;
    report_.rows_pushed = traffic.rows_pushed;
    report_.bytes_pushed = traffic.bytes_pushed;
    report_.bytes_requested = traffic.bytes_requested;
  }

  // Checkpoints ---------------------------------------------------------------

  bool checkpoint_due() const {
    if (options_.checkpoint.dir.empty() || report_.steps == 0 || report_.steps == last_checkpoint_step_) return false;
    const auto& c = options_.checkpoint;
    if (c.every_steps > 0 && report_.steps % c.every_steps == 0) return true;
    return c.every_seconds > 0 && seconds(last_checkpoint_time_, Clock::now()) >= c.every_seconds;
  }

  // After step report_.steps, before the next one (its batch may have been
  // received and staged already: that changes where rows are, not their values).
  void write_checkpoint(bool preempted) {
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
    comm::check_mpi(MPI_Send(&stamp, sizeof(stamp), MPI_BYTE, producer_rank_, comm::kTagCheckpoint, MPI_COMM_WORLD),
                    "MPI_Send");
    int ready = 0;
    MPI_Request request;
    comm::check_mpi(MPI_Irecv(&ready, 1, MPI_INT, producer_rank_, comm::kTagCheckpointReady, MPI_COMM_WORLD, &request),
                    "MPI_Irecv");
    comm::wait_politely(request);
    store_->checkpoint_servers(&stamp, sizeof(stamp));
    {
      io::CheckpointWriter writer(MPI_COMM_WORLD, checkpoint_temporary(options_, stamp.step),
                                  checkpoint_header(options_, stamp));
      const auto& params = model_.parameters();
      io::TrainerState state{window_loss_, window_samples_, window_steps_, last_window_loss_,
                             {last_levels_[0], last_levels_[1], last_levels_[2], last_levels_[3]}};
      if (is_root()) {
        writer.write_dense(params.slices(), params.values(), optimizer_->state(), true);
      } else {
        writer.write_dense({}, {}, {}, false);
      }
      writer.write_trainer_state(state, is_root());
      writer.write_rows(io::SparseRows{});
      writer.write_producers(nullptr, nullptr);
      writer.close();
    }
    if (context_.world_rank == 0) publish_checkpoint_file(options_, stamp.step, seconds(start, Clock::now()));
    comm::check_mpi(MPI_Barrier(comm_), "MPI_Barrier");  // nobody trains before the file is in place
    last_checkpoint_step_ = report_.steps;
    last_checkpoint_time_ = Clock::now();
    report_.checkpoints += 1;
    report_.checkpoint_pause_s += seconds(start, last_checkpoint_time_);
  }

  // Continues from a checkpoint: dense weights and optimizer state, the step
  // counters, and the metrics window that was open when it was written.
  void restore() {
    io::CheckpointReader reader(MPI_COMM_SELF, resume_.path);
    const io::CheckpointHeader& h = reader.header();
    auto& params = model_.parameters();
    std::vector<float> values = reader.dense_values();
    if (values.size() != params.size()) {
      throw Error(resume_.path + ": " + std::to_string(values.size()) + " dense values, this model has " +
                      std::to_string(params.size()),
                  "resume with the model the checkpoint was written with");
    }
    params.values() = std::move(values);
    optimizer_->set_state(reader.dense_optimizer_state());
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

  const RunOptions& options_;
  const RankContext& context_;
  const ResumePoint& resume_;
  int first_epoch_ = 0;
  int64_t epoch_samples_ = 0;      // samples of the current epoch trained (all trainers)
  int64_t samples_total_ = 0;      // samples trained since the start of training (all trainers)
  int64_t last_checkpoint_step_ = -1;
  Clock::time_point last_checkpoint_time_;
  double resumed_seconds_ = 0;     // training time before the checkpoint this run resumed from
  bool preempted_ = false;
  int trainers_;
  MPI_Comm comm_;
  int producer_rank_;
  DataShape shape_;
  model::Dlrm model_;
  std::unique_ptr<model::DenseOptimizer> optimizer_;
  std::unique_ptr<store::ParameterStore> store_;
  std::unique_ptr<io::MetricsWriter> writer_;
  std::vector<std::vector<float>> rows_;       // per table (U_t, dim)
  std::vector<std::vector<float>> row_grads_;  // per table (U_t, dim)
  std::vector<char> message_;
  bool phase_ended_ = false;
  int epoch_ = 0;
  int64_t steps_this_epoch_ = 0;
  double window_loss_ = 0;
  int64_t window_samples_ = 0;
  int64_t window_steps_ = 0;
  double last_window_loss_ = NAN;
  Clock::time_point window_start_;
  Clock::time_point run_start_ = Clock::now();
  Clock::time_point measure_start_ = Clock::now();  // end of the warm-up (strata tune)
  std::vector<std::string> pending_notes_;  // trainer 0: controller decisions not yet in metrics.jsonl
  std::array<double, 4> last_levels_{};  // l1 hits, misses, l2 hits, misses at the last metrics line
  TrainerReport report_;
};

}  // namespace

TrainerReport run_trainer(const RunOptions& options, const RankContext& context, const ResumePoint& resume) {
  Trainer trainer(options, context, resume);
  return trainer.run();
}

}  // namespace strata::runtime
