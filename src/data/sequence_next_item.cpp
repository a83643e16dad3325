// Next-item samples from behaviour sequences (see the header).
#include "data/sequence_next_item.hpp"

#include <algorithm>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/error.hpp"
#include "common/rng.hpp"
#include "data/index_permutation.hpp"
#include "data/sequence_samples.hpp"

namespace strata::data {

namespace {

constexpr uint64_t kOrderSalt = 0x4e584f5244455231ULL;     // "NXORDER1"
constexpr uint64_t kNegativeSalt = 0x4e584e4547415431ULL;  // "NXNEGAT1"
constexpr int kNegativeRedraws = 32;

}  // namespace

struct NextItemSamples::Impl {
  std::shared_ptr<const SequenceCorpus> corpus;
  NextItemOptions options;
  std::vector<int64_t> train_users;  // users with >= 2 train events
  std::vector<int64_t> eval_users;   // users with >= 3 events
  std::vector<uint64_t> items;       // distinct item keys, sorted
  IndexPermutation order{1, 0};

  // An item the user never had (`seen`), drawn from rng; after kNegativeRedraws
  // misses the last draw stands (a user who had almost every item).
  uint64_t negative(CounterRng& rng, const std::unordered_set<uint64_t>& seen) const {
    uint64_t item = 0;
    for (int attempt = 0; attempt < kNegativeRedraws; ++attempt) {
      item = items[size_t(rng.next() % items.size())];
      if (seen.count(item) == 0) break;
    }
    return item;
  }
};

NextItemSamples::NextItemSamples(std::shared_ptr<const SequenceCorpus> corpus, const NextItemOptions& options) {
  check_sample_corpus(corpus.get(), options.max_history);
  if (options.eval_negatives < 1) {
    throw Error("data.sequence_eval_negatives = " + std::to_string(options.eval_negatives) + " must be at least 1",
                "set data.sequence_eval_negatives = 100 (SASRec's protocol) or another count >= 1");
  }
  auto impl = std::make_shared<Impl>();
  impl->corpus = std::move(corpus);
  impl->options = options;
  const SequenceCorpus& c = *impl->corpus;
  for (int64_t u = 0; u < c.num_users(); ++u) {
    const int64_t n = c.length(u);
    if (train_split_length(n) >= 2) impl->train_users.push_back(u);
    if (n >= 3) impl->eval_users.push_back(u);
  }
  impl->items = c.items;
  std::sort(impl->items.begin(), impl->items.end());
  impl->items.erase(std::unique(impl->items.begin(), impl->items.end()), impl->items.end());
  impl->order = IndexPermutation(uint64_t(impl->train_users.size()), mix64(options.seed ^ kOrderSalt));
  impl_ = std::move(impl);
}

int64_t NextItemSamples::size(Stream stream) const {
  return int64_t(stream == Stream::kTrain ? impl_->train_users.size() : impl_->eval_users.size());
}

int64_t NextItemSamples::num_items() const { return int64_t(impl_->items.size()); }

void NextItemSamples::generate(Stream stream, int64_t first, int32_t count, Batch& batch, int64_t epoch) const {
  const Impl& m = *impl_;
  const SequenceCorpus& c = *m.corpus;
  if (first < 0 || count < 0 || first + count > size(stream)) {
    throw Error("next-item samples [" + std::to_string(first) + ", " + std::to_string(first + count) +
                    ") are outside the stream of " + std::to_string(size(stream)),
                "ask for samples inside [0, size(stream))");
  }
  if (batch.num_dense != num_dense() || int(batch.tables.size()) != num_tables()) {
    throw Error("a next-item batch must be reset to 0 dense features and 2 tables",
                "call batch.reset(num_dense(), num_tables()) first");
  }
  SparseBags& history = batch.tables[kNextItemHistoryTable];
  SparseBags& candidates = batch.tables[kNextItemCandidateTable];
  std::unordered_set<uint64_t> seen;
  const int64_t cap = m.options.max_history;
  const bool later_epoch = stream == Stream::kTrain && epoch > 0;
  const IndexPermutation epoch_order =
      later_epoch ? IndexPermutation(uint64_t(m.train_users.size()), mix64(m.options.seed ^ kOrderSalt, uint64_t(epoch)))
                  : m.order;
  const uint64_t negative_seed = later_epoch ? mix64(m.options.seed ^ kNegativeSalt, uint64_t(epoch)) : m.options.seed ^ kNegativeSalt;
  for (int64_t i = first; i < first + count; ++i) {
    const bool train = stream == Stream::kTrain;
    const int64_t user = train ? m.train_users[size_t(epoch_order(uint64_t(i)))] : m.eval_users[size_t(i)];
    const int64_t begin = c.offsets[size_t(user)];
    const int64_t n = c.length(user);
    seen.clear();
    seen.insert(c.items.begin() + begin, c.items.begin() + begin + n);
    CounterRng rng(mix64(negative_seed, uint64_t(stream), uint64_t(i)));
    // History events [h0, h1); training targets are h0 + 1 .. h1, evaluation's one target h1.
    int64_t h1 = train ? begin + train_split_length(n) - 1 : begin + n - (m.options.eval_on_test ? 1 : 2);
    int64_t h0 = begin;
    if (cap > 0) h0 = std::max(h0, h1 - cap);
    history.keys.insert(history.keys.end(), c.items.begin() + h0, c.items.begin() + h1);
    history.offsets.push_back(int32_t(history.keys.size()));
    if (train) {
      for (int64_t e = h0 + 1; e <= h1; ++e) {
        candidates.keys.push_back(c.items[size_t(e)]);
        candidates.keys.push_back(m.negative(rng, seen));
      }
    } else {
      candidates.keys.push_back(c.items[size_t(h1)]);
      for (int k = 0; k < m.options.eval_negatives; ++k) candidates.keys.push_back(m.negative(rng, seen));
    }
    candidates.offsets.push_back(int32_t(candidates.keys.size()));
    batch.labels.push_back(1.0f);
  }
  batch.size += count;
}

}  // namespace strata::data
