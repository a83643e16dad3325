// Click-through samples from behaviour sequences (see the header). The training
// stream is indexed by (positive, k): sample i is positive p = order(i / (1 + neg)),
// k = i % (1 + neg), k = 0 the positive itself. Positives are numbered user by user
// through a prefix sum, so locating one is a binary search.
#include "data/sequence_samples.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.hpp"
#include "common/rng.hpp"
#include "data/index_permutation.hpp"
#include "data/sequence_hdf5.hpp"
#include "data/synthetic_sequences.hpp"

namespace strata::data {

namespace {

constexpr uint64_t kOrderSalt = 0x5345514f52444552ULL;     // "SEQORDER"
constexpr uint64_t kNegativeSalt = 0x5345514e45474154ULL;  // "SEQNEGAT"
constexpr int kNegativeRedraws = 16;

}  // namespace

struct SequenceSamples::Impl {
  std::shared_ptr<const SequenceCorpus> corpus;
  SequenceSampleOptions options;
  std::vector<int64_t> positives_before;  // (U + 1) training positives of users before u
  std::vector<int64_t> eval_users;        // users with a validation / test target
  int64_t distinct_items = 0;
  IndexPermutation order{1, 0};

  int64_t per_positive() const { return 1 + int64_t(options.negatives); }

  // Appends one sample: history events [history_begin, target) of the corpus and the
  // candidate event `candidate` (its item and side keys).
  void append(Batch& batch, int64_t user, int64_t history_begin, int64_t target, int64_t candidate,
              float label) const {
    const SequenceCorpus& c = *corpus;
    const int side = c.num_side();
    if (options.max_history > 0) history_begin = std::max(history_begin, target - options.max_history);
    const int64_t history = target - history_begin;
    batch.labels.push_back(label);
    batch.dense.push_back(std::log1p(float(history)));
    auto push = [&](int table, uint64_t key) {
      batch.tables[size_t(table)].keys.push_back(key);
      batch.tables[size_t(table)].offsets.push_back(int32_t(batch.tables[size_t(table)].keys.size()));
    };
    push(kSequenceUserTable, c.user_keys[size_t(user)]);
    push(kSequenceCandidateTable, c.items[size_t(candidate)]);
    for (int s = 0; s < side; ++s) push(kSequenceFirstSideTable + s, c.side[size_t(candidate) * side + s]);
    SparseBags& bag = batch.tables[size_t(kSequenceFirstSideTable + side)];
    bag.keys.insert(bag.keys.end(), c.items.begin() + history_begin, c.items.begin() + target);
    bag.keys.push_back(c.items[size_t(candidate)]);
    bag.offsets.push_back(int32_t(bag.keys.size()));
  }

  // The event whose item is negative k of positive event `target` in `stream`.
  int64_t negative_event(Stream stream, int64_t sample, int64_t target) const {
    const SequenceCorpus& c = *corpus;
    const uint64_t events = uint64_t(c.num_events());
    CounterRng rng(mix64(options.seed ^ kNegativeSalt, uint64_t(stream), uint64_t(sample)));
    int64_t event = 0;
    for (int attempt = 0; attempt < kNegativeRedraws; ++attempt) {
      event = int64_t(rng.next() % events);
      if (c.items[size_t(event)] != c.items[size_t(target)]) break;
    }
    return event;
  }
};

void check_sample_corpus(const SequenceCorpus* corpus, int64_t max_history) {
  if (corpus == nullptr || corpus->num_events() == 0) {
    throw Error("the behaviour sequences hold no events", "check data.train (or data.sequence_users)");
  }
  if (max_history < 0) {
    throw Error("data.max_seq_len = " + std::to_string(max_history) + " is negative",
                "use 0 (every event) or the number of most recent events to keep");
  }
}

SequenceSamples::SequenceSamples(std::shared_ptr<const SequenceCorpus> corpus, const SequenceSampleOptions& options) {
  check_sample_corpus(corpus.get(), options.max_history);
  if (options.negatives < 1) {
    throw Error("data.sequence_negatives = " + std::to_string(options.negatives) + " must be at least 1",
                "set data.sequence_negatives = 1 (one negative per positive) or more");
  }
  auto impl = std::make_shared<Impl>();
  impl->corpus = std::move(corpus);
  impl->options = options;
  const SequenceCorpus& c = *impl->corpus;
  const int64_t users = c.num_users();
  impl->positives_before.assign(size_t(users) + 1, 0);
  for (int64_t u = 0; u < users; ++u) {
    const int64_t n = c.length(u);
    impl->positives_before[size_t(u) + 1] = impl->positives_before[size_t(u)] + std::max<int64_t>(0, train_split_length(n) - 1);
    if (n >= 3) impl->eval_users.push_back(u);
  }
  std::vector<uint64_t> items(c.items);
  std::sort(items.begin(), items.end());
  impl->distinct_items = int64_t(std::unique(items.begin(), items.end()) - items.begin());
  impl->order = IndexPermutation(uint64_t(impl->positives_before.back()), mix64(options.seed ^ kOrderSalt));
  impl_ = std::move(impl);
}

int SequenceSamples::num_tables() const { return kSequenceFirstSideTable + impl_->corpus->num_side() + 1; }

int64_t SequenceSamples::size(Stream stream) const {
  const Impl& m = *impl_;
  const int64_t positives = stream == Stream::kTrain ? m.positives_before.back() : int64_t(m.eval_users.size());
  return positives * m.per_positive();
}

const SequenceCorpus& SequenceSamples::corpus() const { return *impl_->corpus; }
int64_t SequenceSamples::num_items() const { return impl_->distinct_items; }

void SequenceSamples::generate(Stream stream, int64_t first, int32_t count, Batch& batch, int64_t /*epoch*/) const {
  const Impl& m = *impl_;
  const SequenceCorpus& c = *m.corpus;
  if (first < 0 || count < 0 || first + count > size(stream)) {
    throw Error("sequence samples [" + std::to_string(first) + ", " + std::to_string(first + count) +
                    ") are outside the stream of " + std::to_string(size(stream)),
                "ask for samples inside [0, size(stream))");
  }
  if (batch.num_dense != num_dense() || int(batch.tables.size()) != num_tables()) {
    throw Error("a sequence batch must be reset to " + std::to_string(num_dense()) + " dense features and " +
                    std::to_string(num_tables()) + " tables",
                "call batch.reset(num_dense(), num_tables()) first");
  }
  const int64_t per = m.per_positive();
  for (int64_t i = first; i < first + count; ++i) {
    const int64_t positive = i / per;
    const int64_t k = i % per;
    int64_t user = 0, target = 0;
    if (stream == Stream::kTrain) {
      const int64_t p = int64_t(m.order(uint64_t(positive)));
      // The user whose positives hold p: the last u with positives_before[u] <= p.
      user = int64_t(std::upper_bound(m.positives_before.begin(), m.positives_before.end(), p) -
                     m.positives_before.begin()) - 1;
      target = c.offsets[size_t(user)] + 1 + (p - m.positives_before[size_t(user)]);
    } else {
      user = m.eval_users[size_t(positive)];
      target = c.offsets[size_t(user) + 1] - (m.options.eval_on_test ? 1 : 2);
    }
    const int64_t candidate = k == 0 ? target : m.negative_event(stream, i, target);
    m.append(batch, user, c.offsets[size_t(user)], target, candidate, k == 0 ? 1.0f : 0.0f);
  }
  batch.size += count;
}

// ---- the deck's corpus --------------------------------------------------------------

void parse_sequence_length(const std::string& text, SyntheticSequenceOptions& options) {
  const std::string fix =
      "use fixed:N, uniform:MIN:MAX or zipf:MIN:MAX[:EXPONENT] (lengths >= 1), e.g. data.sequence_length = zipf:3:16384";
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t colon = text.find(':', start);
    parts.push_back(text.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  auto number = [&](const std::string& part) {
    size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != part.size() || value < 1) {
      throw Error("data.sequence_length = '" + text + "': '" + part + "' is not a length >= 1", fix);
    }
    return int64_t(value);
  };
  const std::string& law = parts[0];
  if (law == "fixed" && parts.size() == 2) {
    options.length_law = SequenceLengthLaw::kFixed;
    options.min_length = options.max_length = number(parts[1]);
  } else if ((law == "uniform" && parts.size() == 3) || (law == "zipf" && (parts.size() == 3 || parts.size() == 4))) {
    options.length_law = law == "uniform" ? SequenceLengthLaw::kUniform : SequenceLengthLaw::kZipf;
    options.min_length = number(parts[1]);
    options.max_length = number(parts[2]);
    if (options.min_length > options.max_length) {
      throw Error("data.sequence_length = '" + text + "': MIN is above MAX", fix);
    }
    if (parts.size() == 4) {
      size_t used = 0;
      double exponent = 0;
      try {
        exponent = std::stod(parts[3], &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != parts[3].size() || !(exponent > 0.0) || !std::isfinite(exponent)) {
        throw Error("data.sequence_length = '" + text + "': the exponent '" + parts[3] + "' is not a number > 0", fix);
      }
      options.length_zipf_exponent = exponent;
    }
  } else {
    throw Error("data.sequence_length = '" + text + "' is not a length law", fix);
  }
}

SequenceSampleOptions sequence_sample_options(const DataOptions& options) {
  SequenceSampleOptions out;
  out.max_history = options.max_seq_len;
  out.negatives = options.sequence_negatives;
  if (options.sequence_eval != "validation" && options.sequence_eval != "test") {
    throw Error("data.sequence_eval = '" + options.sequence_eval + "' is neither validation nor test",
                "set data.sequence_eval = validation (each user's second-to-last event) or test (the last)");
  }
  out.eval_on_test = options.sequence_eval == "test";
  out.seed = options.data_seed;
  return out;
}

namespace {

std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    const size_t comma = text.find(',', start);
    std::string name = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (name.empty()) {
      throw Error("data.sequence_side_columns = '" + text + "' has an empty column name",
                  "list the side columns after user, item [, timestamp] by name, e.g. category,action");
    }
    names.push_back(std::move(name));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return names;
}

}  // namespace

int sequence_sample_tables(const DataOptions& options) {
  const int side = options.source == "sequences" ? int(split_names(options.sequence_side_columns).size())
                   : options.source == "hdf5"    ? int(read_sequence_hdf5_info(options.train).side_names.size())
                                                 : 0;
  return kSequenceFirstSideTable + side + 1;
}

namespace {

SyntheticSequenceOptions synthetic_sequence_options(const DataOptions& options) {
  if (options.sequence_users < 1) {
    throw Error("data.sequence_users = " + std::to_string(options.sequence_users) + " must be at least 1",
                "set data.sequence_users to the number of synthetic users");
  }
  SyntheticSequenceOptions synthetic;
  synthetic.num_users = options.sequence_users;
  synthetic.num_items = options.sequence_items < 1 ? 0 : uint64_t(options.sequence_items);
  synthetic.seed = options.data_seed;
  parse_sequence_length(options.sequence_length, synthetic);
  return synthetic;
}

}  // namespace

double synthetic_sequence_teacher_hit_rate(const DataOptions& options, int negatives) {
  const SyntheticSequences generator(synthetic_sequence_options(options));
  return generator.teacher_hit_rate(generator.num_users(), negatives, 10);
}

std::shared_ptr<const SequenceCorpus> load_sequence_corpus(const DataOptions& options, ParseStats* stats) {
  if (options.max_seq_len < 0) {
    throw Error("data.max_seq_len = " + std::to_string(options.max_seq_len) + " is negative",
                "use 0 (every event) or the number of most recent events to keep");
  }
  if (options.source == "synthetic_sequences") {
    const SyntheticSequences generator(synthetic_sequence_options(options));
    // The most recent max_seq_len events of each user, as the file reader keeps.
    SequenceCorpus corpus = keep_most_recent(generator.corpus({0, generator.num_users()}), options.max_seq_len);
    return std::make_shared<const SequenceCorpus>(std::move(corpus));
  }
  if (options.source == "hdf5") {
    // A corpus strata convert wrote: already grouped, ordered and hashed.
    return std::make_shared<const SequenceCorpus>(
        keep_most_recent(read_sequence_hdf5(options.train, stats), options.max_seq_len));
  }
  SequenceOptions reader;
  reader.timestamps = options.sequence_timestamps;
  reader.side_columns = options.sequence_side_columns.empty() ? std::vector<std::string>{}
                                                              : split_names(options.sequence_side_columns);
  reader.header = options.sequence_header;
  reader.max_seq_len = options.max_seq_len;
  reader.strict = options.strict;
  reader.max_errors_reported = options.max_errors_reported;
  return std::make_shared<const SequenceCorpus>(read_sequence_events(reader, options.train, stats));
}

}  // namespace strata::data
