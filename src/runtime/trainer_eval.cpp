// The trainer after training: evaluation on the held-out stream (exact AUC over
// every trainer's predictions, on trainer 0; HR@10 / NDCG@10 for models that rank
// items) and the final row dump that the params digest is taken over.
#include <spdlog/spdlog.h>

#include <functional>

#include "comm/collectives.hpp"
#include "common/error.hpp"
#include "data/sequence_next_item.hpp"
#include "io/params_digest.hpp"
#include "model/metrics.hpp"
#include "runtime/trainer.hpp"
#include "store/tiered_store.hpp"

namespace strata::runtime {

// Runs every held-out batch through the store, each trainer its own; on_batch gets
// a trainer's batches with row_ptrs_ pointing at their rows. Trainers whose stream
// ended keep taking part in the server rounds with an empty batch (and, expert
// parallel, in the model's all-to-alls: on_batch sees the empty batch).
void Trainer::for_each_eval_batch(const std::function<void(const data::Batch&)>& on_batch) {
  phase_ended_ = false;
  data::Batch batch;
  data::Batch empty;
  empty.reset(shape_.num_dense, shape_.num_tables, shape_.num_tasks);
  while (true) {
    int have = !phase_ended_ && receive_batch(batch) ? 1 : 0;
    comm::allreduce(&have, 1, MPI_INT, MPI_MAX, comm_);
    if (!have) break;
    const bool mine = !phase_ended_;
    const data::Batch& b = mine ? batch : empty;
    store_->pull(b, rows_, /*for_training=*/false);  // every trainer takes part in each server round
    if (!mine && expert_group_ == nullptr) continue;  // expert parallel: every trainer takes part in the all-to-alls
    for (int t = 0; t < shape_.num_tables; ++t) row_ptrs_[t] = rows_[t].data();
    on_batch(b);
  }
  end_phase(true);
}

// Next-item models: HR@10 and NDCG@10 of each sample's target among its candidates,
// summed on every trainer and then over trainers.
void Trainer::evaluate_ranking() {
  constexpr int kTopK = 10;
  model::RankingSums sums;
  std::vector<float> scores;
  for_each_eval_batch([&](const data::Batch& b) {
    as_input_errors([&] { model_->score_candidates(b, row_ptrs_, scores); });
    const std::vector<int32_t>& offsets = b.tables[data::kNextItemCandidateTable].offsets;
    for (int32_t s = 0; s < b.size; ++s) {
      const size_t begin = size_t(offsets[size_t(s)]), end = size_t(offsets[size_t(s) + 1]);
      sums.add(model::target_rank(scores.data() + begin, end - begin), kTopK);
    }
  });
  double totals[3] = {sums.hits, sums.ndcg, double(sums.samples)};
  comm::allreduce(totals, 3, MPI_DOUBLE, MPI_SUM, comm_);
  if (is_root()) {
    report_.eval_samples = int64_t(totals[2]);
    report_.eval_hit_rate = totals[2] > 0 ? totals[0] / totals[2] : 0.0;
    report_.eval_ndcg = totals[2] > 0 ? totals[1] / totals[2] : 0.0;
    spdlog::info("eval: {} users, HR@{} {:.4f}, NDCG@{} {:.4f}", report_.eval_samples, kTopK, report_.eval_hit_rate,
                 kTopK, report_.eval_ndcg);
  }
}

void Trainer::evaluate() {
  if (model_->ranks_items()) {
    evaluate_ranking();
    return;
  }
  // (samples, tasks) sample-major, as predict and the batches' labels are.
  const int tasks = model_->num_tasks();
  std::vector<float> probs, labels;
  std::vector<float> batch_probs;
  for_each_eval_batch([&](const data::Batch& b) {
    batch_probs.resize(size_t(b.size) * size_t(tasks));
    as_input_errors([&] { model_->predict(b, row_ptrs_, batch_probs.data()); });
    probs.insert(probs.end(), batch_probs.begin(), batch_probs.end());
    labels.insert(labels.end(), b.labels.begin(), b.labels.end());
  });
  // Exact AUC needs every prediction in one place.
  const int bytes = static_cast<int>(probs.size() * sizeof(float));
  const std::vector<char> all_probs = comm::gather_bytes(probs.data(), bytes, 0, comm_);
  const std::vector<char> all_labels = comm::gather_bytes(labels.data(), bytes, 0, comm_);
  if (is_root()) {
    const size_t total = all_probs.size() / sizeof(float) / size_t(tasks);
    const auto* p = reinterpret_cast<const float*>(all_probs.data());
    const auto* l = reinterpret_cast<const float*>(all_labels.data());
    report_.eval_samples = static_cast<int64_t>(total);
    if (tasks == 1) {
      report_.eval_auc = model::exact_auc(p, l, total);
      report_.eval_logloss = model::mean_logloss(p, l, total);
      spdlog::info("eval: {} samples, AUC {:.4f}, logloss {:.4f}", total, report_.eval_auc, report_.eval_logloss);
      return;
    }
    std::vector<float> task_probs(total), task_labels(total);
    for (int t = 0; t < tasks; ++t) {
      for (size_t i = 0; i < total; ++i) {
        task_probs[i] = p[i * size_t(tasks) + size_t(t)];
        task_labels[i] = l[i * size_t(tasks) + size_t(t)];
      }
      report_.eval_auc_per_task.push_back(model::exact_auc(task_probs.data(), task_labels.data(), total));
      report_.eval_logloss_per_task.push_back(model::mean_logloss(task_probs.data(), task_labels.data(), total));
      spdlog::info("eval: {} samples, task {}: AUC {:.4f}, logloss {:.4f}", total, t, report_.eval_auc_per_task.back(),
                   report_.eval_logloss_per_task.back());
    }
    report_.eval_auc = report_.eval_auc_per_task[0];
    report_.eval_logloss = report_.eval_logloss_per_task[0];
  }
}

void Trainer::finish() {
  // Before the digest's dump of every row, which is O(rows), not O(budget).
  report_.training_rss_mib = process_peak_rss_mib();
  if (const auto* tiered = dynamic_cast<const store::TieredStore*>(store_.get())) {
    report_.l1_bytes = double(tiered->l1().memory_bytes());
  }
  const auto& params = model_->parameters();
  report_.dense_bytes = double((params.values().capacity() + params.grads().capacity() + optimizer_->state().size()) *
                               sizeof(float));
  store::RowDump rows = store_->dump_rows();
  std::vector<float> values, optimizer_state;
  whole_dense(values, optimizer_state);  // the whole model's, however its experts are stored
  if (is_root()) {
    report_.params_digest = io::params_digest(values, optimizer_state, optimizer_->steps_taken(), rows);
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

}  // namespace strata::runtime
