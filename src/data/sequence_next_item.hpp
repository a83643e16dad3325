// NextItemSamples: next-item prediction samples from behaviour sequences, the way
// SASRec and HSTU are trained and evaluated. One sample per user.
//
// Training (data.sequence_task = next_item): the user's train events (the SASRec
// split: all but the last two when there are at least three) t_0 .. t_{T-1} give the
// history t_0 .. t_{T-2} and, at every history position i, the positive t_{i+1} and
// one negative; the most recent data.max_seq_len positions are kept. Users with
// fewer than two train events have nothing to predict and are left out.
// Evaluation: each user with at least three events: history = every event before
// the held-out one (validation or test, data.sequence_eval; most recent max_seq_len),
// candidates = the held-out item, then data.sequence_eval_negatives items.
//
// Negatives are drawn uniformly from the corpus' distinct items that the user never
// had (SASRec's protocol), redrawn a bounded number of times otherwise.
//
// Tables of a batch (both carry item keys of one key space):
//   0 history   bag b: the context items, oldest first (L_b keys)
//   1 candidates bag b: training [pos_0, neg_0, pos_1, neg_1, ...] (2 L_b keys);
//                evaluation [target, negative_1, ..., negative_N]
// No dense features. Sample i is a pure function of (corpus, data_seed, i); training
// users are visited in a keyed pseudo-random order.
#pragma once

#include <cstdint>
#include <memory>

#include "data/batch.hpp"
#include "data/sequence_events.hpp"
#include "data/synthetic.hpp"

namespace strata::data {

inline constexpr int kNextItemHistoryTable = 0;
inline constexpr int kNextItemCandidateTable = 1;
inline constexpr int kNextItemTables = 2;

struct NextItemOptions {
  int64_t max_history = 0;    // most recent history positions (0 = all)
  int eval_negatives = 100;   // negatives beside each held-out item
  bool eval_on_test = false;  // the last event instead of the one before it
  uint64_t seed = 2024;       // order of the training users and the negatives
};

class NextItemSamples {
 public:
  NextItemSamples(std::shared_ptr<const SequenceCorpus> corpus, const NextItemOptions& options);

  int num_dense() const { return 0; }
  int num_tables() const { return kNextItemTables; }
  int64_t size(Stream stream) const;
  int64_t num_items() const;

  // Appends samples [first, first + count) of `stream` to `batch` (reset to
  // num_dense(), num_tables()); label 1 for every sample. strata::Error outside the stream.
  // Training epochs differ as in SASRec: each `epoch` visits the users in its
  // own order and draws fresh negatives (epoch 0 as before epochs counted);
  // evaluation is the same in every epoch.
  void generate(Stream stream, int64_t first, int32_t count, Batch& batch, int64_t epoch = 0) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace strata::data
