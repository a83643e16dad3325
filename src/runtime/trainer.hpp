// Trainer: the state of one trainer rank, shared by the files that implement
// it (a private header of the runtime): trainer_role.cpp (the step loop),
// trainer_metrics.cpp (metrics windows), trainer_checkpoint.cpp (writing and
// restoring checkpoints) and trainer_eval.cpp (evaluation and the final dump).
#pragma once

#include <array>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/mpi_expert_group.hpp"
#include "comm/mpi_sequence_group.hpp"
#include "comm/parallel_groups.hpp"
#include "common/cpu_time.hpp"
#include "data/batch.hpp"
#include "data/synthetic.hpp"
#include "io/metrics_writer.hpp"
#include "model/model.hpp"
#include "model/optimizers.hpp"
#include "runtime/batch_source.hpp"
#include "runtime/trainer_role.hpp"
#include "store/parameter_store.hpp"

namespace strata::runtime {

using Clock = std::chrono::steady_clock;
inline double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

class Trainer {
 public:
  Trainer(const RunOptions& options, const RankContext& context, const ResumePoint& resume);
  TrainerReport run();

 private:
  bool is_root() const { return context_.index == 0; }
  int64_t global_batch() const { return int64_t(options_.train.batch_size) * trainers_; }

  // trainer_role.cpp: the loop.
  bool receive_batch(data::Batch& batch);
  [[noreturn]] void stop_on_non_finite_loss();
  void stage_attachment(const std::vector<char>& message, double batch_wait_s);
  void train_epoch(int64_t planned);
  void train_step(const data::Batch& batch);
  void end_phase(bool final);

  // trainer_metrics.cpp
  void flush_window(int64_t planned, bool last);
  std::vector<std::string> gather_notes();

  // trainer_store.cpp: tiered, ps, or another model's tables.
  std::unique_ptr<store::ParameterStore> make_store() const;

  // trainer_checkpoint.cpp
  bool checkpoint_due() const;
  void check_sharing_models_resume_together();
  void write_checkpoint(bool preempted);
  void restore();
  // The whole model's dense values and optimizer state, as one trainer alone holds
  // them (checkpoints, the digest): this trainer's own when the model is not
  // sharded. Sharded (moe, layout.ep > 1): collective over the first replica's
  // expert group, whose members send their experts to the root trainer; `values`
  // and `state` are filled on the root only.
  void whole_dense(std::vector<float>& values, std::vector<float>& state);

  // trainer_eval.cpp
  void evaluate();
  void evaluate_ranking();
  void for_each_eval_batch(const std::function<void(const data::Batch&)>& on_batch);
  void finish();

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
  int64_t non_finite_step_ = -1;  // first step whose loss was NaN or infinite on this trainer
  int trainers_;
  MPI_Comm comm_;
  comm::ParallelGroups groups_;  // the dp / sp / ep sub-communicators of the trainers
  int producer_rank_;
  DataShape shape_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<comm::MpiSequenceGroup> sequence_group_;  // layout.sp > 1: the trainers sharing model_'s attention
  std::unique_ptr<comm::MpiExpertGroup> expert_group_;  // layout.ep > 1: the trainers sharing model_'s experts
  std::unique_ptr<model::DenseOptimizer> optimizer_;
  std::unique_ptr<store::ParameterStore> store_;
  std::unique_ptr<io::MetricsWriter> writer_;
  std::vector<std::vector<float>> rows_;       // per table (U_t, dim)
  std::vector<std::vector<float>> row_grads_;  // per table (U_t, dim)
  std::vector<const float*> row_ptrs_;         // per table, into rows_
  std::vector<float*> grad_ptrs_;              // per table, into row_grads_
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

}  // namespace strata::runtime
