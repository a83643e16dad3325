// SyntheticSequences: deterministic behaviour sequences with a hidden teacher. User
// u's sequence (length, items, timestamps) is a pure function of (seed, u), so any
// rank can generate any user, and the teacher's HR@K on the last event of each user
// is the best a next-item model can be expected to reach.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "data/sequence_events.hpp"

namespace strata::data {

enum class SequenceLengthLaw { kFixed, kUniform, kZipf };

struct SyntheticSequenceOptions {
  int64_t num_users = 10000;                         // users 0 .. num_users - 1
  uint64_t num_items = 100000;                       // item ids 0 .. num_items - 1, 0 the most popular
  SequenceLengthLaw length_law = SequenceLengthLaw::kUniform;
  int64_t min_length = 3;                            // shortest sequence (uniform, zipf)
  int64_t max_length = 200;                          // longest sequence; kFixed's length
  double length_zipf_exponent = 1.1;                 // kZipf: P(min + r) ~ (r + 1)^-s over [min, max]
  double item_zipf_exponent = 1.05;                  // skew of item popularity, globally and in a cluster
  int num_clusters = 64;                             // interest clusters: item i belongs to i % num_clusters
  double drift = 0.05;                               // per event, P(the user's cluster moves to a neighbour)
  double follow_probability = 0.45;                  // P(next item = a successor of the previous one)
  double cluster_probability = 0.35;                 // P(next item from the user's current cluster)
                                                     // the rest: from global popularity (noise)
  int successors = 4;                                // successor items of each item (the Markov part)
  uint64_t seed = 2024;                              // seed of lengths, items and the teacher
  uint32_t user_table = 1000;                        // feature_key table of user ids
  uint32_t item_table = 0;                           // feature_key table of item ids (as in SequenceOptions)
};

class SyntheticSequences {
 public:
  explicit SyntheticSequences(const SyntheticSequenceOptions& options);

  int64_t num_users() const;
  const SyntheticSequenceOptions& options() const;

  // Length of user u's sequence, without generating it.
  int64_t length(int64_t user) const;
  // User u's item ids and timestamps (seconds, increasing), oldest first.
  void generate(int64_t user, std::vector<uint64_t>& item_ids, std::vector<int64_t>& timestamps) const;
  // Users [range.begin, range.end) as a corpus: item keys feature_key(item_table, id),
  // user keys feature_key(user_table, u), first_user = range.begin, no side columns.
  SequenceCorpus corpus(UserRange range) const;

  // The teacher's probability that `next` follows `previous` (an item id, or
  // num_items for none) for a user whose cluster before the step is `cluster`.
  double teacher_probability(uint64_t previous, int cluster, uint64_t next) const;

  // HR@k of the teacher on the test target (last event) of users [0, max_users) with
  // >= 3 events: the target ranked against `negatives` items drawn uniformly from the
  // items the user never had (as SASRec evaluates; ties count half). Random: k / (negatives + 1).
  double teacher_hit_rate(int64_t max_users, int negatives, int k = 10) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace strata::data
