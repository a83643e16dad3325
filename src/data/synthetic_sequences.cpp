// SyntheticSequences: the generator and its teacher. Items are ranked by popularity
// (id 0 the most popular) and item i belongs to cluster i % K. A user starts in a
// cluster and, before each event but the first, moves to a neighbouring cluster with
// probability `drift` (slowly drifting interest). Each next item is
//   with follow_probability   one of the `successors` items of the previous item,
//   with cluster_probability  a Zipf draw inside the user's current cluster,
//   otherwise                 a Zipf draw over all items (popularity noise);
// the first event puts the follow mass on the cluster. Successors of an item are
// Zipf draws inside its own cluster, hashed from (seed, item, k).
//
// The teacher knows the cluster before the step (not whether it drifts at the step)
// and scores an item by its exact probability under that mixture: an upper bound of
// what a model that sees only the history can reach.
#include "data/synthetic_sequences.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <unordered_set>

#include "common/error.hpp"
#include "common/rng.hpp"
#include "data/feature_hash.hpp"
#include "data/zipf_sampler.hpp"

namespace strata::data {

namespace {

// Salts keep the purposes of the hash streams apart.
constexpr uint64_t kLengthSalt = 0x4c454e4754480000ULL;     // "LENGTH"
constexpr uint64_t kEventSalt = 0x4556454e54530000ULL;      // "EVENTS"
constexpr uint64_t kTimeSalt = 0x54494d4500000000ULL;       // "TIME"
constexpr uint64_t kSuccessorSalt = 0x5355434300000000ULL;  // "SUCC"
constexpr uint64_t kNegativeSalt = 0x4e45470000000000ULL;   // "NEG"
constexpr int64_t kFirstTimestamp = 978300000;              // ml-1m's era, in seconds
constexpr double kMeanGapSeconds = 3600.0;
constexpr int64_t kLongestSequence = int64_t(1) << 24;

// floor(r / 2^64 * n): a uniform index in [0, n).
inline uint64_t scale_to(uint64_t r, uint64_t n) {
  __extension__ using u128 = unsigned __int128;
  return uint64_t((u128(r) * n) >> 64);
}

// sum_{k=1}^{n} k^-s: exact over the first 2^20 terms, Euler-Maclaurin beyond.
double zipf_normalizer(uint64_t n, double s) {
  const uint64_t exact = std::min<uint64_t>(n, uint64_t(1) << 20);
  double sum = 0.0;
  for (uint64_t k = exact; k >= 1; --k) sum += std::pow(double(k), -s);  // small terms first
  if (n > exact) {
    const double a = double(exact + 1), b = double(n);
    const double integral = std::abs(1.0 - s) < 1e-9
                                ? std::log(b / a)
                                : (std::pow(b, 1.0 - s) - std::pow(a, 1.0 - s)) / (1.0 - s);
    const double fa = std::pow(a, -s), fb = std::pow(b, -s);
    sum += integral + 0.5 * (fa + fb) + (-s * fb / b + s * fa / a) / 12.0;
  }
  return sum;
}

void check(bool ok, const std::string& what, const std::string& fix) {
  if (!ok) throw Error("synthetic sequences: " + what, fix);
}

}  // namespace

struct SyntheticSequences::Impl {
  SyntheticSequenceOptions options;
  uint64_t cluster_size = 0;  // Zipf ranks per cluster: item r * K + c, r < cluster_size
  ZipfSampler global;
  ZipfSampler in_cluster;
  std::optional<ZipfSampler> length_zipf;
  double global_norm = 1.0, cluster_norm = 1.0;

  explicit Impl(const SyntheticSequenceOptions& o)
      : options(o),
        cluster_size(o.num_items / uint64_t(std::max(o.num_clusters, 1))),
        global(std::max<uint64_t>(o.num_items, 1), o.item_zipf_exponent),
        in_cluster(std::max<uint64_t>(cluster_size, 1), o.item_zipf_exponent) {
    if (o.length_law == SequenceLengthLaw::kZipf) {
      length_zipf.emplace(uint64_t(o.max_length - o.min_length + 1), o.length_zipf_exponent);
    }
    global_norm = zipf_normalizer(o.num_items, o.item_zipf_exponent);
    cluster_norm = zipf_normalizer(cluster_size, o.item_zipf_exponent);
  }

  int clusters() const { return options.num_clusters; }

  uint64_t successor(uint64_t item, int k) const {
    CounterRng rng(mix64(mix64(options.seed ^ kSuccessorSalt, item), uint64_t(k)));
    return in_cluster(rng) * uint64_t(clusters()) + item % uint64_t(clusters());
  }

  double cluster_pmf(uint64_t item, int cluster) const {
    const uint64_t k = uint64_t(clusters());
    if (item % k != uint64_t(cluster) || item / k >= cluster_size) return 0.0;
    return std::pow(double(item / k + 1), -options.item_zipf_exponent) / cluster_norm;
  }

  int64_t length(int64_t user) const {
    const SyntheticSequenceOptions& o = options;
    CounterRng rng(mix64(o.seed ^ kLengthSalt, uint64_t(user)));
    switch (o.length_law) {
      case SequenceLengthLaw::kFixed:
        return o.max_length;
      case SequenceLengthLaw::kUniform:
        return o.min_length + int64_t(scale_to(rng.next(), uint64_t(o.max_length - o.min_length + 1)));
      case SequenceLengthLaw::kZipf:
        return o.min_length + int64_t((*length_zipf)(rng));
    }
    return o.max_length;
  }

  // Items of user u, and the cluster each event was drawn in (after the step's drift).
  void generate(int64_t user, std::vector<uint64_t>& items, std::vector<int>* cluster_of) const {
    const SyntheticSequenceOptions& o = options;
    const int64_t n = length(user);
    items.resize(size_t(n));
    if (cluster_of) cluster_of->resize(size_t(n));
    CounterRng rng(mix64(o.seed ^ kEventSalt, uint64_t(user)));
    const uint64_t k = uint64_t(clusters());
    int z = int(scale_to(rng.next(), k));
    for (int64_t t = 0; t < n; ++t) {
      if (t > 0 && rng.uniform() < o.drift) {
        z = int((uint64_t(z) + ((rng.next() & 1) ? 1 : k - 1)) % k);
      }
      const double x = rng.uniform();
      uint64_t item;
      if (t > 0 && x < o.follow_probability) {
        item = successor(items[size_t(t - 1)], int(scale_to(rng.next(), uint64_t(o.successors))));
      } else if (x < o.follow_probability + o.cluster_probability) {
        item = in_cluster(rng) * k + uint64_t(z);
      } else {
        item = global(rng);
      }
      items[size_t(t)] = item;
      if (cluster_of) (*cluster_of)[size_t(t)] = z;
    }
  }

  double teacher_probability(uint64_t previous, int cluster, uint64_t next) const {
    const SyntheticSequenceOptions& o = options;
    const bool first = previous >= o.num_items;
    const double follow = first ? 0.0 : o.follow_probability;
    const double in = first ? o.follow_probability + o.cluster_probability : o.cluster_probability;
    const double noise = 1.0 - o.follow_probability - o.cluster_probability;
    double p = noise * std::pow(double(next + 1), -o.item_zipf_exponent) / global_norm;
    if (follow > 0.0) {
      int hits = 0;
      for (int j = 0; j < o.successors; ++j) hits += successor(previous, j) == next ? 1 : 0;
      p += follow * double(hits) / double(o.successors);
    }
    if (first) return p + in * cluster_pmf(next, cluster);
    const int k = clusters();
    const double stay = cluster_pmf(next, cluster);
    const double moved = 0.5 * (cluster_pmf(next, (cluster + 1) % k) + cluster_pmf(next, (cluster + k - 1) % k));
    return p + in * ((1.0 - o.drift) * stay + o.drift * moved);
  }
};

SyntheticSequences::SyntheticSequences(const SyntheticSequenceOptions& o) {
  check(o.num_users >= 0, "num_users = " + std::to_string(o.num_users) + " is negative", "use num_users >= 0");
  check(o.num_clusters >= 1 && uint64_t(o.num_clusters) <= o.num_items,
        "num_clusters = " + std::to_string(o.num_clusters) + " with num_items = " + std::to_string(o.num_items),
        "use 1 <= num_clusters <= num_items");
  check(o.num_items <= (uint64_t(1) << 53), "num_items is larger than 2^53", "use at most 2^53 items");
  check(o.min_length >= 1 && o.max_length >= o.min_length && o.max_length <= kLongestSequence,
        "lengths [" + std::to_string(o.min_length) + ", " + std::to_string(o.max_length) + "] are not a range",
        "use 1 <= min_length <= max_length <= 2^24");
  check(o.drift >= 0.0 && o.drift <= 1.0, "drift is not a probability", "use 0 <= drift <= 1");
  check(o.follow_probability >= 0.0 && o.cluster_probability >= 0.0 &&
            o.follow_probability + o.cluster_probability <= 1.0,
        "follow_probability + cluster_probability is not a probability",
        "use non-negative values that add up to at most 1 (the rest is popularity noise)");
  check(o.successors >= 1, "successors < 1", "give each item at least one successor");
  impl_ = std::make_shared<const Impl>(o);
}

int64_t SyntheticSequences::num_users() const { return impl_->options.num_users; }
const SyntheticSequenceOptions& SyntheticSequences::options() const { return impl_->options; }
int64_t SyntheticSequences::length(int64_t user) const { return impl_->length(user); }

void SyntheticSequences::generate(int64_t user, std::vector<uint64_t>& item_ids,
                                  std::vector<int64_t>& timestamps) const {
  impl_->generate(user, item_ids, nullptr);
  // Timestamps from their own stream: increasing, exponential gaps of at least a second.
  CounterRng rng(mix64(impl_->options.seed ^ kTimeSalt, uint64_t(user)));
  int64_t now = kFirstTimestamp + int64_t(scale_to(rng.next(), 100000000));
  timestamps.resize(item_ids.size());
  for (int64_t& t : timestamps) {
    now += 1 + int64_t(-std::log1p(-rng.uniform()) * kMeanGapSeconds);
    t = now;
  }
}

SequenceCorpus SyntheticSequences::corpus(UserRange range) const {
  if (range.begin < 0 || range.end < range.begin || range.end > num_users()) {
    throw Error("synthetic users [" + std::to_string(range.begin) + ", " + std::to_string(range.end) +
                    ") are outside [0, " + std::to_string(num_users()) + ")",
                "take ranges from shard_users(num_users(), ...)");
  }
  const SyntheticSequenceOptions& o = impl_->options;
  SequenceCorpus out;
  out.first_user = range.begin;
  int64_t total = 0;
  for (int64_t u = range.begin; u < range.end; ++u) total += length(u);
  out.items.reserve(size_t(total));
  out.timestamps.reserve(size_t(total));
  out.user_keys.reserve(size_t(range.size()));
  out.offsets.reserve(size_t(range.size()) + 1);
  std::vector<uint64_t> ids;
  std::vector<int64_t> times;
  for (int64_t u = range.begin; u < range.end; ++u) {
    generate(u, ids, times);
    out.user_keys.push_back(feature_key(o.user_table, uint64_t(u)));
    const size_t at = out.items.size();
    out.items.resize(at + ids.size());
    feature_keys(o.item_table, ids.data(), ids.size(), out.items.data() + at);
    out.timestamps.insert(out.timestamps.end(), times.begin(), times.end());
    out.offsets.push_back(int64_t(out.items.size()));
  }
  return out;
}

double SyntheticSequences::teacher_probability(uint64_t previous, int cluster, uint64_t next) const {
  return impl_->teacher_probability(previous, cluster, next);
}

double SyntheticSequences::teacher_hit_rate(int64_t max_users, int negatives, int k) const {
  const Impl& m = *impl_;
  check(negatives >= 1 && k >= 1, "HR@" + std::to_string(k) + " against " + std::to_string(negatives) +
                                       " negatives", "use k >= 1 and negatives >= 1");
  const int64_t users = std::min(max_users, num_users());
  std::vector<uint64_t> items;
  std::vector<int> clusters;
  std::unordered_set<uint64_t> seen;
  double hits = 0.0;
  int64_t evaluated = 0;
  for (int64_t u = 0; u < users; ++u) {
    m.generate(u, items, &clusters);
    const size_t n = items.size();
    if (n < 3) continue;
    seen.clear();
    seen.insert(items.begin(), items.end());
    if (seen.size() + size_t(negatives) > m.options.num_items) continue;  // too few unseen items to draw
    const uint64_t previous = items[n - 2];
    const int cluster = clusters[n - 2];
    const double target = m.teacher_probability(previous, cluster, items[n - 1]);
    CounterRng rng(mix64(m.options.seed ^ kNegativeSalt, uint64_t(u)));
    int above = 0, tied = 0;
    for (int j = 0; j < negatives; ++j) {
      uint64_t item;
      do {
        item = scale_to(rng.next(), m.options.num_items);
      } while (seen.count(item) != 0);
      const double score = m.teacher_probability(previous, cluster, item);
      above += score > target ? 1 : 0;
      tied += score == target ? 1 : 0;
    }
    // Ties broken at random: the chance that the target still lands in the top k.
    if (above + tied < k) {
      hits += 1.0;
    } else if (above < k) {
      hits += double(k - above) / double(tied + 1);
    }
    ++evaluated;
  }
  return evaluated > 0 ? hits / double(evaluated) : 0.0;
}

}  // namespace strata::data
