// Behaviour sequences: the in-memory SequenceCorpus (per-user ordered events, jagged,
// never padded), its reader from event files (`user item [timestamp] [side...]`, the
// layout of the public SASRec / HSTU files), the SASRec leave-last-out split, user
// sharding over producer ranks, and the Batch a trainer gets for a range of users.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/batch.hpp"
#include "data/sample_reader.hpp"

namespace strata::data {

// How event files are read and hashed (filled from the deck once this is wired).
struct SequenceOptions {
  bool timestamps = true;                 // third column is an integer timestamp (else file order)
  std::vector<std::string> side_columns;  // names of the columns after item [timestamp], in order
  bool header = false;                    // skip the first line of the file
  int64_t max_seq_len = 0;                // keep each user's most recent events (0 = all)
  bool strict = false;                    // first malformed line is fatal instead of skipped
  int max_errors_reported = 10;           // malformed lines logged individually (all are counted)
  uint32_t user_table = 1000;             // feature_key table of user tokens (never looked up)
  uint32_t item_table = 0;                // feature_key table of item tokens: the item rows
  uint32_t first_side_table = 1;          // side column c is hashed with table first_side_table + c
};

// Events grouped per user, oldest first. Memory ~ (16 + 8 * side) bytes per event.
struct SequenceCorpus {
  int64_t first_user = 0;                 // global index of user 0 here (a shard's offset)
  std::vector<std::string> side_names;    // (S) as declared
  std::vector<uint64_t> user_keys;        // (U) feature_key(user_table, token), in corpus order
  std::vector<int64_t> offsets;           // (U + 1) user u's events are [offsets[u], offsets[u+1])
  std::vector<uint64_t> items;            // (E) item keys (feature_key(item_table, token))
  std::vector<int64_t> timestamps;        // (E) or empty when the source has none
  std::vector<uint64_t> side;             // (E, S) side keys of each event

  SequenceCorpus() : offsets(1, 0) {}
  int64_t num_users() const { return int64_t(user_keys.size()); }
  int64_t num_events() const { return int64_t(items.size()); }
  int num_side() const { return int(side_names.size()); }
  int64_t length(int64_t user) const { return offsets[size_t(user) + 1] - offsets[size_t(user)]; }
};

// Reads an event file: fields separated by runs of spaces or tabs, or by commas (an
// empty field between two commas is missing). Users in order of first appearance;
// each user's events sorted by timestamp (stable: ties keep file order) or in file
// order without timestamps; then cut to the max_seq_len most recent. Malformed lines
// (missing item, non-integer timestamp, column count other than declared) are
// counted in `stats`, logged with file:line and skipped, or thrown with options.strict.
// Throws strata::Error for a missing, unreadable or empty file.
SequenceCorpus read_sequence_events(const SequenceOptions& options, const std::string& path,
                                    ParseStats* stats = nullptr);

// ---- SASRec split ----------------------------------------------------------------

// Per user with n >= 3 events: the last is the test target, the one before it the
// validation target, the first n - 2 are train. Users with n < 3 are train only (all
// n events) and have no validation or test target.
enum class SequenceSplit { kTrain, kValidation, kTest };

// Events of a user with n events that the train split holds.
inline int64_t train_split_length(int64_t n) { return n >= 3 ? n - 2 : n; }

// The events of one user that a split uses, as [begin, end) indices into the corpus
// arrays. Train: history [b, e - 1) predicts targets [b + 1, e) position by position.
// Validation / test: history is every event before the single target.
struct SplitSpan {
  int64_t history_begin = 0, history_end = 0;
  int64_t target_begin = 0, target_end = 0;
  int64_t num_targets() const { return target_end - target_begin; }
};

// max_history > 0 keeps only the most recent max_history history events (and, for
// train, their targets).
SplitSpan split_span(const SequenceCorpus& corpus, int64_t user, SequenceSplit split, int64_t max_history = 0);

// ---- sharding over producer ranks --------------------------------------------------

// Contiguous users [begin, end) of shard `shard` of `num_shards`: [s * U / n, (s + 1) * U / n).
// The shards cover every user once and do not depend on anything but (U, s, n).
struct UserRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
UserRange shard_users(int64_t num_users, int shard, int num_shards);

// A copy of the users of `range` (first_user moves with it).
SequenceCorpus slice_users(const SequenceCorpus& corpus, UserRange range);

// ---- batches ----------------------------------------------------------------------

// Tables of a sequence batch. Both item tables carry keys of the item key space
// (SequenceOptions::item_table): one embedding table backs them.
inline constexpr int kHistoryTable = 0;    // bag b: user b's history, oldest first
inline constexpr int kTargetTable = 1;     // bag b: train, the next item of each history position; eval, the target
inline constexpr int kFirstSideTable = 2;  // + c: side column c of each history event (aligned with the history)

struct SequenceBatchOptions {
  int64_t max_history = 0;  // most recent history events per user (the model's context; 0 = all)
  bool side_tables = true;  // add one table per side column after the item tables
};

// Appends users [first, first + count) (corpus indices) of `split` to `batch`, one
// sample per user, even one without a target (empty bags, label 0): a user's place in
// a batch is the same whatever the split. label[b] = 1 when user b has a target.
// No dense features. first_sample = corpus.first_user + first. With history_timestamps,
// appends the timestamp of every history key (bag order) when the corpus has them.
// The batch is reset when its shape differs and it is empty.
void append_sequence_batch(const SequenceCorpus& corpus, SequenceSplit split, int64_t first, int32_t count,
                           const SequenceBatchOptions& options, Batch& batch,
                           std::vector<int64_t>* history_timestamps = nullptr);

// Number of tables append_sequence_batch produces for this corpus.
int sequence_num_tables(const SequenceCorpus& corpus, const SequenceBatchOptions& options);

}  // namespace strata::data
