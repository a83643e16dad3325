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
#include "runtime/producer_role.hpp"
#include "store/producer_staging.hpp"
#include "store/remote_ps_store.hpp"
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
  Trainer(const RunOptions& options, const RankContext& context)
      : options_(options),
        context_(context),
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
      store_ = std::make_unique<store::TieredStore>(MPI_COMM_WORLD, comm_, producer_rank_, servers, context.index, dim,
                                                    shape_.num_tables, store::rows_for_budget(options.store.l1_mb, width),
                                                    std::move(sparse),
                                                    /*reports_producer=*/context.index < context.layout.producers());
    } else {
      store_ = std::make_unique<store::RemotePsStore>(MPI_COMM_WORLD, servers, context.index, dim, shape_.num_tables);
    }
    if (is_root()) writer_ = std::make_unique<io::MetricsWriter>(options.output.dir);
    rows_.resize(shape_.num_tables);
    row_grads_.resize(shape_.num_tables);
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
    bool final = false;
    for (int epoch = 0; !final; ++epoch) {
      epoch_ = epoch;
      train_epoch(planned, start);
      final = (options_.train.steps > 0 && report_.steps >= options_.train.steps) ||
              (options_.train.steps == 0 && epoch + 1 >= options_.train.epochs);
      if (options_.train.steps > 0 && !final && steps_this_epoch_ == 0) {
        throw Error("the training data holds less than one global batch (" +
                        std::to_string(int64_t(options_.train.batch_size) * trainers_) + " samples)",
                    "use more data or a smaller train.batch_size");
      }
      end_phase(final);
    }
    report_.train_seconds = seconds(start, Clock::now());
    report_.samples = report_.steps * int64_t(options_.train.batch_size) * trainers_;
    report_.samples_per_s = report_.samples / std::max(report_.train_seconds, 1e-9);
    report_.measured_samples_per_s = report_.samples_per_s;
    if (options_.measure_after_steps > 0 && report_.steps > options_.measure_after_steps) {
      const double measured = seconds(measure_start_, Clock::now());
      report_.measured_samples_per_s = double(report_.steps - options_.measure_after_steps) *
                                       options_.train.batch_size * trainers_ / std::max(measured, 1e-9);
    }
    if (window_steps_ > 0) flush_window(planned, /*last=*/true);  // the last partial window
    report_.train_logloss = last_window_loss_;
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
    steps_this_epoch_ = 0;
    data::Batch batch;
    while (true) {
      int have = receive_batch(batch) ? 1 : 0;
      if (options_.train.steps > 0 && report_.steps >= options_.train.steps) have = 0;
      int all = 0;
      comm::check_mpi(MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, comm_), "MPI_Allreduce");
      if (!all) break;
      if (batch.size != options_.train.batch_size) {
        throw Error("trainer " + std::to_string(context_.index) + " got a batch of " + std::to_string(batch.size) +
                    " samples, expected " + std::to_string(options_.train.batch_size));
      }
      train_step(batch);
      ++steps_this_epoch_;
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
      if (last || report_.steps % options_.output.metrics_every == 0) writer_->append(line);
    }
    window_loss_ = 0;
    window_samples_ = 0;
    window_steps_ = 0;
    window_start_ = now;
  }

  Clock::time_point run_start() const { return run_start_; }
  void end_phase(bool final) {
    PhaseDone done{final ? 1u : 0u, 0};
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

  const RunOptions& options_;
  const RankContext& context_;
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
  std::array<double, 4> last_levels_{};  // l1 hits, misses, l2 hits, misses at the last metrics line
  TrainerReport report_;
};

}  // namespace

TrainerReport run_trainer(const RunOptions& options, const RankContext& context) {
  Trainer trainer(options, context);
  return trainer.run();
}

}  // namespace strata::runtime
