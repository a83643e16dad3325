// SequenceSamples: click-through samples cut from behaviour sequences, the way DIN is
// trained on the Amazon and Taobao logs. Every event after a user's first in the
// train part of the SASRec split is one positive sample (its history: the events
// before it, at most max_seq_len; its candidate: the event's item) followed by
// `negatives` samples with the same history and a candidate drawn uniformly from the
// corpus' items other than the positive. Evaluation asks the same of each user's
// validation (or test) target.
//
// Sample i of a stream is a pure function of (corpus, data_seed, i), so any rank can
// make any range, as with the synthetic CTR data: trainer t of T at step s gets the
// same samples whatever the number of producers. Training positives are visited in a
// fixed pseudo-random order (a keyed bijection of their indices), so a batch mixes
// users instead of holding one user's consecutive events.
//
// Negatives are the items of events drawn uniformly from the whole corpus (so items
// in proportion to their popularity, and a drawn event's side columns come with it),
// redrawn while they equal the positive's item.
//
// Tables of a batch: 0 the user (one key), 1 the candidate (one key), then one table
// per side column holding the candidate's value, and last the target-last history
// bag (history items oldest first, then the candidate: what model.kind = din reads
// by default). One dense feature: log(1 + history length).
// Keys of tables 1 and 2 are item keys of one key space, so one embedding row backs
// an item wherever it appears.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "data/batch.hpp"
#include "data/sample_reader.hpp"
#include "data/sequence_events.hpp"
#include "data/synthetic.hpp"
#include "data/synthetic_sequences.hpp"

namespace strata::data {

inline constexpr int kSequenceUserTable = 0;
inline constexpr int kSequenceCandidateTable = 1;
inline constexpr int kSequenceFirstSideTable = 2;  // history table: kSequenceFirstSideTable + side columns
inline constexpr int kSequenceSampleDense = 1;

struct SequenceSampleOptions {
  int64_t max_history = 0;       // most recent history events of a sample (0 = all before it)
  int negatives = 1;             // negative samples per positive (>= 1)
  bool eval_on_test = false;     // evaluate on each user's last event instead of the one before it
  uint64_t seed = 2024;          // order of the training positives and the negatives' items
};

// Throws strata::Error naming the deck key for an empty corpus or a negative
// data.max_seq_len: what every kind of sequence sample needs.
void check_sample_corpus(const SequenceCorpus* corpus, int64_t max_history);

class SequenceSamples {
 public:
  SequenceSamples(std::shared_ptr<const SequenceCorpus> corpus, const SequenceSampleOptions& options);

  int num_dense() const { return kSequenceSampleDense; }
  int num_tables() const;
  int64_t size(Stream stream) const;
  const SequenceCorpus& corpus() const;
  // Distinct items of the corpus (what negatives are drawn from).
  int64_t num_items() const;

  // Appends samples [first, first + count) of `stream` to `batch` (already reset to
  // num_dense(), num_tables()). Throws strata::Error for a range outside the stream.
  // `epoch` is ignored: these click samples (their sampled non-clicks
  // included) are a fixed CTR dataset, the same every epoch.
  void generate(Stream stream, int64_t first, int32_t count, Batch& batch, int64_t epoch = 0) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// The corpus a deck names: data.source = sequences reads data.train (an event file);
// data.source = synthetic_sequences generates data.sequence_users users; data.source =
// hdf5 reads the corpus strata convert wrote to data.train (sequence_hdf5.hpp). Every rank
// that calls this gets the same corpus. Errors name the data.* key.
std::shared_ptr<const SequenceCorpus> load_sequence_corpus(const DataOptions& options,
                                                           ParseStats* stats = nullptr);
SequenceSampleOptions sequence_sample_options(const DataOptions& options);
// data.source = synthetic_sequences: the hidden teacher's HR@10 on each user's last
// event against `negatives` unseen items (the best a next-item model can expect).
double synthetic_sequence_teacher_hit_rate(const DataOptions& options, int negatives);
// Tables of a batch for this deck (3 + side columns), without reading any data (but
// the attributes of a data.source = hdf5 file).
int sequence_sample_tables(const DataOptions& options);

// "fixed:N", "uniform:MIN:MAX" or "zipf:MIN:MAX[:EXPONENT]" into the synthetic length
// law; strata::Error naming data.sequence_length otherwise.
void parse_sequence_length(const std::string& text, SyntheticSequenceOptions& options);

}  // namespace strata::data
