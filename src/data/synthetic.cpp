// SyntheticDataset: Criteo-shaped samples and their hidden teacher. Every number
// is a counter-based hash of (data_seed, stream, sample, purpose), so any rank can
// generate any range, in any order, with identical results.
//
// Teacher, with t, t' tables and v the popularity rank (0 = most popular) of a key:
//   logit = bias + teacher_scale * ( sum_j a_j * (d_j - c_j)          dense, d = log1p(count)
//                                  + sum_t w_t(v_t)                   first order
//                                  + sum_{t<t'} <e_t(v_t), e_t'(v_t')> / sqrt(T - 1) )  dim 4
// A bag of h keys contributes the mean of its keys' w and e. w and e are hashes of
// (seed, table, v) scaled by g(v) = (1 + v / kRankScale)^-1/2: popular values carry
// more signal than rare ones, so a student that sees ~1M samples (a rare value too
// few times to learn its row) can come within ~0.02 AUC of the teacher. The pair
// term is kept weak for the same reason: students learn products of small initial
// rows slowly. The bias is calibrated once so that the click rate is kClickRate.
// Defaults (26 tables, vocab 1e5, Zipf 1.05): teacher AUC ~0.83, click rate ~0.30.
//
// Multi-task data (data.synthetic_tasks = K > 1): task 0 is the label above,
// unchanged. Task k > 0 has a teacher of its own (its own w, e and dense weights,
// the same form) and mixes it with task 0's:
//   logit_k = bias_k + kTaskShared * (logit_0 - bias_0) + kTaskOwn * own_k
// so tasks are correlated (0.6) but each has structure of its own, as CTR and
// conversion are: what MMoE and PLE's per-task gates over shared experts exploit.
// bias_k is calibrated to kTaskClickRate. Each task draws its label with its own hash.
//
// History table (data.synthetic_history_length = L > 0), after the others: items
// fall into kInterestClusters clusters (item v in cluster v % K, Zipf-popular within
// it). A sample's user has one interest cluster; each of its 1..L history items
// comes from that cluster with probability kOnInterest, and the candidate (the
// bag's last key) with probability one half. The teacher adds
//   kHistoryStrength * (m - kHistoryCentre),  m = share of history items in the candidate's cluster,
// a term only a model that relates the candidate to the history can learn.
#include "data/synthetic.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>
#include <string>
#include <string_view>

#include "common/error.hpp"
#include "common/rng.hpp"
#include "data/feature_hash.hpp"
#include "data/text_format.hpp"
#include "data/zipf_sampler.hpp"

namespace strata::data {

namespace {

// ---- teacher shape (changing any of these changes every synthetic label) -------
constexpr int kTeacherDim = 4;          // width of the hidden teacher embeddings
constexpr double kRankScale = 30.0;     // g(v)^2 halves at rank kRankScale
constexpr double kFirstOrderStd = 0.4;  // std of w_t(v) for the most popular values
constexpr double kPairStd = 0.15;       // std of each component of e_t(v) at the head
constexpr double kDenseStd = 0.25;      // std of the dense weights a_j
constexpr double kClickRate = 0.30;     // target mean label (the bias is calibrated to it)
constexpr int kCalibrationSamples = 8192;
constexpr uint64_t kRankShrinkCached = 4096;
// Dense counts are drawn by inverting their CDF at one of 1024 equiprobable
// quantiles: a table lookup instead of exp and log per value, tails cut at ~3.3 sigma.
constexpr int kDenseQuantileBits = 10;
constexpr size_t kDenseQuantiles = size_t(1) << kDenseQuantileBits;
constexpr int kDenseLanes = 6;  // quantile indices per 64-bit hash

// Salts keep the purposes of the hash streams apart.
constexpr uint64_t kStreamSalt = 0x53545245414d0000ULL;   // "STREAM"
constexpr uint64_t kTeacherSalt = 0x5445414348455200ULL;  // "TEACHER"
constexpr uint64_t kShapeSalt = 0x5348415045000000ULL;    // "SHAPE" (dense distributions)
constexpr uint64_t kDenseSalt = 0x44454e5345000000ULL;
constexpr uint64_t kLabelSalt = 0x4c4142454c000000ULL;
constexpr uint64_t kDriftSalt = 0x6a09e667f3bcc909ULL;  // which law a drifting sample draws from
constexpr uint64_t kCalibrationStream = 0xCA11B;
constexpr uint64_t kInterestClusters = 64;
constexpr double kOnInterest = 0.8;
constexpr double kHistoryStrength = 3.0;
constexpr double kHistoryCentre = 0.4;
constexpr double kTaskShared = 0.6;      // weight of task 0's logit in task k's
constexpr double kTaskOwn = 0.8;         // weight of task k's own teacher
constexpr double kTaskClickRate = 0.15;  // target mean label of tasks k > 0
constexpr int kMaxTasks = 16;
constexpr uint64_t kHistorySalt = 0x484953544f525900ULL;  // "HISTORY"

// Uniform in [-sqrt(3), sqrt(3)): unit variance.
inline double unit_uniform(uint64_t bits) { return (to_unit_double(bits) * 2.0 - 1.0) * 1.7320508075688772; }

// Inverse of the standard normal CDF by bisection on erfc (setup only, not hot).
double inverse_normal_cdf(double p) {
  double lo = -40.0, hi = 40.0;
  for (int i = 0; i < 200 && hi - lo > 1e-13; ++i) {
    const double mid = 0.5 * (lo + hi);
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

// Comma list of positive integers with one value (for every table) or `count` values.
std::vector<int64_t> parse_per_table(const std::string& text, const std::string& key, int count,
                                     int64_t min_value) {
  std::vector<int64_t> values;
  std::string_view rest = text;
  while (true) {
    const size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || value < min_value) {
      throw Error("data." + key + " = '" + text + "': '" + std::string(item) +
                      "' is not an integer >= " + std::to_string(min_value),
                  "give one integer for every table, or a comma list of data.num_tables integers");
    }
    values.push_back(value);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (values.size() == 1) values.assign(static_cast<size_t>(count), values[0]);
  if (values.size() != static_cast<size_t>(count)) {
    throw Error("data." + key + " lists " + std::to_string(values.size()) + " values for " +
                    std::to_string(count) + " tables",
                "give one value for all tables or exactly data.num_tables values");
  }
  return values;
}

// Exact ROC AUC, ties counted one half. Returns 0.5 when one class is absent.
double exact_auc(const std::vector<double>& scores, const std::vector<uint8_t>& labels) {
  std::vector<uint32_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return scores[a] < scores[b]; });
  double negatives_below = 0.0, area = 0.0, positives = 0.0;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    double pos = 0.0, neg = 0.0;
    while (j < order.size() && scores[order[j]] == scores[order[i]]) {
      (labels[order[j]] ? pos : neg) += 1.0;
      ++j;
    }
    area += pos * (negatives_below + 0.5 * neg);
    negatives_below += neg;
    positives += pos;
    i = j;
  }
  const double negatives = negatives_below;
  if (positives == 0.0 || negatives == 0.0) return 0.5;
  return area / (positives * negatives);
}

}  // namespace

struct SyntheticDataset::Impl {
  int num_dense = 0;
  int num_tables = 0;
  int64_t train_samples = 0;
  int64_t eval_samples = 0;
  uint64_t seed = 0;
  double teacher_scale = 1.0;
  double bias = 0.0;
  int tasks = 1;
  // Tasks k > 0, index k - 1: their teachers' seeds per table, dense weights, bias.
  std::vector<std::vector<uint64_t>> task_seed;
  std::vector<std::vector<double>> task_dense_weight;
  std::vector<double> task_bias;
  double pair_weight = 0.0;
  int total_hotness = 0;
  int history_length = 0;          // longest history; 0 = no history table
  uint64_t history_vocab = 0;
  std::vector<ZipfSampler> history_zipf;  // (0 or 1) ranks within an interest cluster

  std::vector<ZipfSampler> samplers;               // one per distinct vocab size
  // data.zipf_exponent_end: a second law per vocab size; training sample i of N
  // draws from it with probability i / N, so a flatter end law makes the hot
  // set grow during the run (evaluation draws from the end law).
  std::vector<ZipfSampler> end_samplers;           // empty when the law does not drift
  std::vector<int> sampler_of_table;               // (num_tables)
  std::vector<int> hotness;                        // (num_tables)
  std::vector<uint64_t> teacher_seed;              // (num_tables)
  std::vector<double> first_order_scale;           // (num_tables) std of w_t at the head, over hotness
  std::vector<double> pair_scale;                  // (num_tables) of e_t at the head, over hotness
  std::vector<double> rank_shrink;                 // (kRankShrinkCached) g(v) of the head ranks
  std::vector<double> dense_weight, dense_center;  // (num_dense) teacher weight a_j and centre c_j
  std::vector<float> dense_quantiles;  // (num_dense, kDenseQuantiles) transformed counts by quantile

  // Per-call buffers of fill(), reused across calls on one thread.
  struct Scratch {
    std::vector<uint64_t> base;    // (count) per-sample hash base
    std::vector<uint64_t> values;  // (count * hotness) value ranks of one table
    std::vector<double> pair;      // (count, kTeacherDim) sum of teacher embeddings
    std::vector<double> self;      // (count) sum of their squared norms
    std::vector<double> task_pair; // (count, tasks - 1, kTeacherDim) the same for tasks k > 0
    std::vector<double> task_self; // (count, tasks - 1)
  };

  uint64_t stream_seed(Stream stream) const { return mix64(seed ^ kStreamSalt, uint64_t(stream)); }
  static uint64_t sample_base(uint64_t stream, int64_t index) { return mix64(stream, uint64_t(index)); }

  // History events of a sample (its bag holds one more key, the candidate).
  int history_events(uint64_t base) const {
    return 1 + int(mix64(base ^ kHistorySalt) % uint64_t(history_length));
  }
  int tables_with_history() const { return num_tables + (history_length > 0 ? 1 : 0); }

  // An item of cluster c: a Zipf rank within the cluster, folded into the vocabulary.
  uint64_t item_of_cluster(CounterRng& rng, uint64_t c) const {
    const uint64_t item = history_zipf[0](rng) * kInterestClusters + c;
    return item < history_vocab ? item : c % history_vocab;
  }

  // The history table of samples [first, first + count): every sample's events then
  // its candidate, appended as item ranks to `values` (when not null), and the
  // teacher's history term added to logits.
  void fill_history(int64_t count, const uint64_t* base, std::vector<uint64_t>* values, double* logits) const {
    const uint64_t table_counter = (uint64_t(num_tables) + 1) << 32;
    std::vector<uint64_t> events;
    for (int64_t i = 0; i < count; ++i) {
      CounterRng rng(base[i] + table_counter);
      const uint64_t interest = rng.next() % kInterestClusters;
      const int n = history_events(base[i]);
      events.resize(size_t(n));
      for (int k = 0; k < n; ++k) {
        const bool on = rng.uniform() < kOnInterest;
        events[size_t(k)] = item_of_cluster(rng, on ? interest : rng.next() % kInterestClusters);
      }
      const bool on = rng.uniform() < 0.5;
      const uint64_t candidate = item_of_cluster(rng, on ? interest : rng.next() % kInterestClusters);
      int matches = 0;
      for (uint64_t e : events) matches += (e % kInterestClusters) == (candidate % kInterestClusters) ? 1 : 0;
      logits[i] += kHistoryStrength * (double(matches) / n - kHistoryCentre);
      if (values != nullptr) {
        values->insert(values->end(), events.begin(), events.end());
        values->push_back(candidate);
      }
    }
  }

  static double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
  static bool draw_label(uint64_t base, double probability) {
    return to_unit_double(mix64(base ^ kLabelSalt)) < probability;
  }
  static bool draw_task_label(uint64_t base, int task, double probability) {
    return task == 0 ? draw_label(base, probability)
                     : to_unit_double(mix64(base ^ kLabelSalt, uint64_t(task))) < probability;
  }

  // The teacher (seed tseed) sums of a bag of h value ranks: first-order w and pair e.
  void bag_sums(uint64_t tseed, const uint64_t* values, size_t h, double& w, double* e) const {
    for (size_t k = 0; k < h; ++k) {
      const uint64_t v = values[k];
      const double g = v < kRankShrinkCached ? rank_shrink[v] : 1.0 / std::sqrt(1.0 + double(v) / kRankScale);
      add_value(tseed, v, g, w, e);
    }
  }
  // A table's pair embedding e, scaled by ps, into the sample's running sum and squared norms.
  static void add_pair(const double* e, double ps, double* pair, double& self_sum) {
    double self = 0.0;
    for (int c = 0; c < kTeacherDim; ++c) {
      const double ec = e[c] * ps;
      pair[c] += ec;
      self += ec * ec;
    }
    self_sum += self;
  }

  // The teacher's first-order and pair contributions of one key value (rank v) to
  // the sums w and e, from the hash of a teacher seed and v.
  static void add_value(uint64_t tseed, uint64_t v, double g, double& w, double* e) {
    // One hash per value: 16 bits for w, 12 bits for each e component,
    // all uniform in [-1, 1) -- plenty of resolution for teacher weights.
    const uint64_t bits = mix64(tseed + v);
    w += g * (double(bits & 0xffff) * (2.0 / 65536.0) - 1.0);
    for (int c = 0; c < kTeacherDim; ++c) {
      e[c] += g * (double((bits >> (16 + 12 * c)) & 0xfff) * (2.0 / 4096.0) - 1.0);
    }
  }

  // Samples [first, first + count) of a stream: dense rows (count, num_dense) at
  // `dense`, table t's keys (count * hotness[t], bag order) at keys[t] (may be null),
  // and the teacher's logits (count) without the bias; task_logits (count, tasks - 1),
  // when not null, those of tasks k > 0 (without their bias). Table-major, so that
  // every inner loop runs over independent samples with its table's constants at hand.
  void fill(uint64_t stream, int64_t first, int32_t count, float* dense, uint64_t* const* keys,
            double* logits, double* task_logits = nullptr) const {
    thread_local Scratch scratch;
    const size_t n = size_t(count);
    const size_t extra = task_logits != nullptr ? size_t(tasks - 1) : 0;
    scratch.base.resize(n);
    scratch.pair.assign(n * kTeacherDim, 0.0);
    scratch.self.assign(n, 0.0);
    scratch.task_pair.assign(n * extra * kTeacherDim, 0.0);
    scratch.task_self.assign(n * extra, 0.0);
    if (extra > 0) std::fill(task_logits, task_logits + n * extra, 0.0);
    for (size_t i = 0; i < n; ++i) scratch.base[i] = sample_base(stream, first + int64_t(i));

    for (size_t i = 0; i < n; ++i) {
      const uint64_t dense_base = scratch.base[i] ^ kDenseSalt;
      float* row = dense + i * size_t(num_dense);
      double logit = 0.0;
      uint64_t bits = 0;
      for (int j = 0; j < num_dense; ++j) {
        // One hash gives six 10-bit quantile indices.
        const int lane = j % kDenseLanes;
        if (lane == 0) bits = mix64(dense_base + uint64_t(j / kDenseLanes));
        const size_t q = size_t(bits >> (kDenseQuantileBits * lane)) & (kDenseQuantiles - 1);
        row[j] = dense_quantiles[size_t(j) * kDenseQuantiles + q];
        logit += dense_weight[size_t(j)] * (double(row[j]) - dense_center[size_t(j)]);
        for (size_t k = 0; k < extra; ++k) {
          task_logits[i * extra + k] += task_dense_weight[k][size_t(j)] * (double(row[j]) - dense_center[size_t(j)]);
        }
      }
      logits[i] = logit;
    }

    for (int t = 0; t < num_tables; ++t) {
      const ZipfSampler& zipf = samplers[size_t(sampler_of_table[t])];
      const size_t h = size_t(hotness[t]);
      scratch.values.resize(n * h);
      uint64_t* values = scratch.values.data();
      // Table t draws from its own counter range of each sample's stream.
      const uint64_t table_counter = (uint64_t(t) + 1) << 32;
      const bool training = stream == stream_seed(Stream::kTrain);
      for (size_t i = 0; i < n; ++i) {
        CounterRng rng(scratch.base[i] + table_counter);
        const ZipfSampler* law = &zipf;
        if (!end_samplers.empty()) {
          const double progress = training ? double(first + int64_t(i)) / double(std::max<int64_t>(train_samples, 1)) : 1.0;
          if (to_unit_double(mix64(scratch.base[i] ^ kDriftSalt, uint64_t(t))) < progress) {
            law = &end_samplers[size_t(sampler_of_table[t])];
          }
        }
        for (size_t k = 0; k < h; ++k) values[i * h + k] = (*law)(rng);
      }
      if (keys != nullptr) feature_keys(uint32_t(t), values, n * h, keys[t]);
      const uint64_t tseed = teacher_seed[size_t(t)];
      const double fo = first_order_scale[size_t(t)];
      const double ps = pair_scale[size_t(t)];
      for (size_t i = 0; i < n; ++i) {
        double w = 0.0;
        double e[kTeacherDim] = {0, 0, 0, 0};
        bag_sums(tseed, values + i * h, h, w, e);
        for (size_t task = 0; task < extra; ++task) {
          double tw = 0.0;
          double te[kTeacherDim] = {0, 0, 0, 0};
          bag_sums(task_seed[task][size_t(t)], values + i * h, h, tw, te);
          task_logits[i * extra + task] += fo * tw;
          add_pair(te, ps, scratch.task_pair.data() + (i * extra + task) * kTeacherDim,
                   scratch.task_self[i * extra + task]);
        }
        logits[i] += fo * w;
        add_pair(e, ps, scratch.pair.data() + i * kTeacherDim, scratch.self[i]);
      }
    }

    if (history_length > 0) {
      thread_local std::vector<uint64_t> items;
      items.clear();
      fill_history(count, scratch.base.data(), keys != nullptr ? &items : nullptr, logits);
      if (keys != nullptr) feature_keys(uint32_t(num_tables), items.data(), items.size(), keys[num_tables]);
    }
    for (size_t i = 0; i < n; ++i) {
      const double* pair = scratch.pair.data() + i * kTeacherDim;
      double all = 0.0;
      for (int c = 0; c < kTeacherDim; ++c) all += pair[c] * pair[c];
      // sum over pairs t < t' of <e_t, e_t'> = (|sum e|^2 - sum |e|^2) / 2
      logits[i] = teacher_scale * (logits[i] + pair_weight * 0.5 * (all - scratch.self[i]));
      for (size_t task = 0; task < extra; ++task) {
        const double* tp = scratch.task_pair.data() + (i * extra + task) * kTeacherDim;
        double tall = 0.0;
        for (int c = 0; c < kTeacherDim; ++c) tall += tp[c] * tp[c];
        double& own = task_logits[i * extra + task];
        own = teacher_scale * (own + pair_weight * 0.5 * (tall - scratch.task_self[i * extra + task]));
        own = kTaskShared * logits[i] + kTaskOwn * own;
      }
    }
  }

  // Teacher logits of task `task` (with its bias) of samples [first, first + count).
  void task_logits_of(uint64_t stream, int64_t first, int64_t count, int task, std::vector<double>& out) const {
    constexpr int32_t kChunk = 1024;
    out.resize(size_t(count));
    const size_t extra = size_t(tasks - 1);
    std::vector<float> dense(size_t(kChunk) * size_t(std::max(num_dense, 1)));
    std::vector<double> logits(static_cast<size_t>(kChunk));
    std::vector<double> others(static_cast<size_t>(kChunk) * std::max<size_t>(extra, 1));
    for (int64_t at = 0; at < count; at += kChunk) {
      const int32_t n = int32_t(std::min<int64_t>(kChunk, count - at));
      fill(stream, first + at, n, dense.data(), nullptr, logits.data(), task > 0 ? others.data() : nullptr);
      for (int32_t i = 0; i < n; ++i) {
        out[size_t(at + i)] = task == 0 ? bias + logits[size_t(i)]
                                        : task_bias[size_t(task - 1)] + others[size_t(i) * extra + size_t(task - 1)];
      }
    }
  }

  // Teacher logits (without bias) of samples [first, first + count), in chunks.
  void logits_of(uint64_t stream, int64_t first, int64_t count, std::vector<double>& out) const {
    constexpr int32_t kChunk = 1024;
    out.resize(size_t(count));
    std::vector<float> dense(size_t(kChunk) * size_t(std::max(num_dense, 1)));
    for (int64_t at = 0; at < count; at += kChunk) {
      const int32_t n = int32_t(std::min<int64_t>(kChunk, count - at));
      fill(stream, first + at, n, dense.data(), nullptr, out.data() + at);
    }
  }

  // The bias that makes the mean of sigmoid(bias + logit) over `logits` equal `rate`.
  static double bisect_bias(const std::vector<double>& logits, double rate) {
    double lo = -30.0, hi = 30.0;
    for (int iter = 0; iter < 60; ++iter) {
      const double mid = 0.5 * (lo + hi);
      double mean = 0.0;
      for (double l : logits) mean += sigmoid(mid + l);
      mean /= double(logits.size());
      (mean < rate ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
  }

  void calibrate() {
    const uint64_t stream = mix64(seed ^ kStreamSalt, kCalibrationStream);
    // Centre each dense term on its mean over a calibration stream ...
    {
      std::vector<float> dense(size_t(kCalibrationSamples) * size_t(std::max(num_dense, 1)));
      std::vector<double> logits(static_cast<size_t>(kCalibrationSamples));
      fill(stream, 0, kCalibrationSamples, dense.data(), nullptr, logits.data());
      for (int j = 0; j < num_dense; ++j) {
        double sum = 0.0;
        for (int i = 0; i < kCalibrationSamples; ++i) sum += dense[size_t(i) * size_t(num_dense) + size_t(j)];
        dense_center[size_t(j)] = sum / kCalibrationSamples;
      }
    }
    // ... then bisect the bias so that the mean teacher probability is kClickRate,
    // whatever the tables, hotness and scale.
    std::vector<double> logits;
    logits_of(stream, 0, kCalibrationSamples, logits);
    bias = bisect_bias(logits, kClickRate);
    for (int task = 1; task < tasks; ++task) {
      task_bias[size_t(task - 1)] = 0.0;
      task_logits_of(stream, 0, kCalibrationSamples, task, logits);
      task_bias[size_t(task - 1)] = bisect_bias(logits, kTaskClickRate);
    }
  }
};

SyntheticDataset::SyntheticDataset(const DataOptions& options) {
  auto impl = std::make_shared<Impl>();
  Impl& m = *impl;
  if (options.num_dense < 0) throw Error("data.num_dense must be >= 0", "set data.num_dense to e.g. 13");
  if (options.num_tables < 1) throw Error("data.num_tables must be >= 1", "set data.num_tables to e.g. 26");
  if (options.synthetic_train_samples < 0 || options.synthetic_eval_samples < 0) {
    throw Error("data.synthetic_train_samples and data.synthetic_eval_samples must be >= 0",
                "give the stream sizes in samples");
  }
  if (!std::isfinite(options.teacher_scale) || options.teacher_scale < 0) {
    throw Error("data.teacher_scale must be a finite value >= 0", "use e.g. 1.0 (0 makes labels pure noise)");
  }
  m.num_dense = options.num_dense;
  m.num_tables = options.num_tables;
  m.train_samples = options.synthetic_train_samples;
  m.eval_samples = options.synthetic_eval_samples;
  m.seed = options.data_seed;
  m.teacher_scale = options.teacher_scale;
  if (options.synthetic_tasks < 1 || options.synthetic_tasks > kMaxTasks) {
    throw Error("data.synthetic_tasks = " + std::to_string(options.synthetic_tasks) + " is outside [1, " +
                    std::to_string(kMaxTasks) + "]",
                "give the labels per sample: 1 (click) or up to " + std::to_string(kMaxTasks) +
                    " tasks for model.kind = mmoe | ple");
  }
  m.tasks = options.synthetic_tasks;
  m.task_seed.assign(size_t(m.tasks - 1), {});
  m.task_dense_weight.assign(size_t(m.tasks - 1), {});
  m.task_bias.assign(size_t(m.tasks - 1), 0.0);
  if (options.synthetic_history_length < 0 || options.synthetic_history_length > (1 << 16)) {
    throw Error("data.synthetic_history_length = " + std::to_string(options.synthetic_history_length) +
                    " is outside [0, 65536]",
                "give the longest history in events, or 0 for no history table");
  }
  m.history_length = options.synthetic_history_length;
  if (m.history_length > 0) {
    if (options.synthetic_history_vocab < int64_t(kInterestClusters)) {
      throw Error("data.synthetic_history_vocab = " + std::to_string(options.synthetic_history_vocab) +
                      " is below the " + std::to_string(kInterestClusters) + " interest clusters",
                  "use at least " + std::to_string(kInterestClusters) + " items, e.g. 100000");
    }
    m.history_vocab = uint64_t(options.synthetic_history_vocab);
    m.history_zipf.emplace_back((m.history_vocab + kInterestClusters - 1) / kInterestClusters, options.zipf_exponent);
  }
  // Pairs grow as num_tables^2 and singles as num_tables: this keeps their share
  // of the logit similar for any table count.
  m.pair_weight = 1.0 / std::sqrt(double(std::max(1, m.num_tables - 1)));

  const std::vector<int64_t> vocab = parse_per_table(options.vocab_sizes, "vocab_sizes", m.num_tables, 1);
  const std::vector<int64_t> hot = parse_per_table(options.hotness, "hotness", m.num_tables, 1);
  for (int t = 0; t < m.num_tables; ++t) {
    const uint64_t v = uint64_t(vocab[size_t(t)]);
    if (v > (uint64_t(1) << 53)) {
      throw Error("data.vocab_sizes " + std::to_string(v) + " is too large",
                  "use at most 2^53 values per table");
    }
    int found = -1;
    for (size_t i = 0; i < m.samplers.size(); ++i) {
      if (m.samplers[i].size() == v) found = int(i);
    }
    if (found < 0) {
      m.samplers.emplace_back(v, options.zipf_exponent);
      if (options.zipf_exponent_end >= 0) m.end_samplers.emplace_back(v, options.zipf_exponent_end);
      found = int(m.samplers.size()) - 1;
    }
    m.sampler_of_table.push_back(found);
    if (hot[size_t(t)] > 1 << 16) {
      throw Error("data.hotness " + std::to_string(hot[size_t(t)]) + " is too large",
                  "use at most 65536 keys per bag");
    }
    m.hotness.push_back(int(hot[size_t(t)]));
    m.total_hotness += m.hotness.back();
    const uint64_t ts = mix64(m.seed ^ kTeacherSalt, uint64_t(t));
    m.teacher_seed.push_back(ts);
    for (int k = 1; k < m.tasks; ++k) {
      m.task_seed[size_t(k - 1)].push_back(mix64(m.seed ^ kTeacherSalt, (uint64_t(k) << 32) + uint64_t(t)));
    }
    // Tables differ in how much they matter, as Criteo's do.
    const double strength = 0.5 + to_unit_double(mix64(ts, 1));
    // w and e components are uniform in [-1, 1): variance 1/3.
    m.first_order_scale.push_back(strength * kFirstOrderStd * 1.7320508075688772 / double(m.hotness.back()));
    m.pair_scale.push_back(std::sqrt(strength) * kPairStd * 1.7320508075688772 / double(m.hotness.back()));
  }
  for (uint64_t v = 0; v < kRankShrinkCached; ++v) {
    m.rank_shrink.push_back(1.0 / std::sqrt(1.0 + double(v) / kRankScale));
  }
  // Dense features: integer counts, log-normal with medians from 1 to ~33 and a
  // spread of 0.5 to 1.5 in log space, then the same log1p transform as Criteo's.
  const double weight_scale = kDenseStd * std::sqrt(13.0 / double(std::max(1, m.num_dense)));
  m.dense_quantiles.resize(size_t(m.num_dense) * kDenseQuantiles);
  std::vector<double> z(kDenseQuantiles);
  for (size_t q = 0; q < kDenseQuantiles; ++q)
    z[q] = inverse_normal_cdf((double(q) + 0.5) / double(kDenseQuantiles));
  for (int j = 0; j < m.num_dense; ++j) {
    const uint64_t s = mix64(m.seed ^ kShapeSalt, uint64_t(j));
    const double mu = 3.5 * to_unit_double(mix64(s, 1));
    const double sigma = 0.5 + to_unit_double(mix64(s, 2));
    for (size_t q = 0; q < kDenseQuantiles; ++q) {
      m.dense_quantiles[size_t(j) * kDenseQuantiles + q] =
          dense_transform(std::floor(std::exp(mu + sigma * z[q])));
    }
    m.dense_weight.push_back(weight_scale * unit_uniform(mix64(s, 3)));
    for (int k = 1; k < m.tasks; ++k) {
      m.task_dense_weight[size_t(k - 1)].push_back(weight_scale * unit_uniform(mix64(s, 3 + uint64_t(k))));
    }
    m.dense_center.push_back(0.0);
  }
  m.calibrate();
  impl_ = std::move(impl);
}

int SyntheticDataset::num_dense() const { return impl_->num_dense; }
int SyntheticDataset::num_tables() const { return impl_->tables_with_history(); }
int SyntheticDataset::num_tasks() const { return impl_->tasks; }

int64_t SyntheticDataset::size(Stream stream) const {
  return stream == Stream::kTrain ? impl_->train_samples : impl_->eval_samples;
}

void SyntheticDataset::generate(Stream stream, int64_t first, int32_t count, Batch& batch, int64_t /*epoch*/) const {
  const Impl& m = *impl_;
  if (first < 0 || count < 0 || first > size(stream) - count) {
    throw Error("synthetic samples [" + std::to_string(first) + ", " + std::to_string(first + count) +
                    ") are outside the stream of " + std::to_string(size(stream)) + " samples",
                "clamp the range to SyntheticDataset::size()");
  }
  const int tables = m.tables_with_history();
  if (batch.num_dense != m.num_dense || batch.tables.size() != size_t(tables)) {
    if (batch.size != 0) {
      throw Error("synthetic batch has " + std::to_string(batch.num_dense) + " dense and " +
                      std::to_string(batch.tables.size()) + " tables, the dataset " +
                      std::to_string(m.num_dense) + " and " + std::to_string(tables),
                  "reset the batch with the dataset's num_dense() and num_tables()");
    }
    batch.reset(m.num_dense, tables, m.tasks);
  }
  if (batch.num_tasks != m.tasks) {
    if (batch.size != 0) {
      throw Error("synthetic batch has " + std::to_string(batch.num_tasks) + " labels per sample, the dataset " +
                      std::to_string(m.tasks),
                  "reset the batch with the dataset's num_tasks()");
    }
    batch.num_tasks = m.tasks;
  }
  if (count == 0) return;
  if (batch.size == 0) batch.first_sample = first;
  const uint64_t seed = m.stream_seed(stream);
  const size_t b0 = size_t(batch.size);
  const size_t n = size_t(count);
  const size_t K = size_t(m.tasks);
  batch.labels.resize((b0 + n) * K);
  batch.dense.resize((b0 + n) * size_t(m.num_dense));
  thread_local std::vector<uint64_t*> keys;
  thread_local std::vector<double> logits, task_logits;
  keys.resize(size_t(tables));
  logits.resize(n);
  task_logits.resize(n * (K - 1));
  for (int t = 0; t < m.num_tables; ++t) {
    SparseBags& bags = batch.tables[size_t(t)];
    const size_t at = size_t(bags.offsets.back());
    const size_t h = size_t(m.hotness[size_t(t)]);
    bags.keys.resize(at + n * h);
    keys[size_t(t)] = bags.keys.data() + at;
    bags.offsets.reserve(b0 + n + 1);
    for (size_t i = 1; i <= n; ++i) bags.offsets.push_back(int32_t(at + i * h));
  }
  if (m.history_length > 0) {
    SparseBags& bags = batch.tables[size_t(m.num_tables)];
    size_t at = size_t(bags.offsets.back());
    const size_t start = at;
    bags.offsets.reserve(b0 + n + 1);
    for (size_t i = 0; i < n; ++i) {
      at += size_t(m.history_events(Impl::sample_base(seed, first + int64_t(i)))) + 1;
      bags.offsets.push_back(int32_t(at));
    }
    bags.keys.resize(at);
    keys[size_t(m.num_tables)] = bags.keys.data() + start;
  }
  m.fill(seed, first, count, batch.dense.data() + b0 * size_t(m.num_dense), keys.data(), logits.data(),
         K > 1 ? task_logits.data() : nullptr);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t base = Impl::sample_base(seed, first + int64_t(i));
    float* labels = batch.labels.data() + (b0 + i) * K;
    labels[0] = Impl::draw_label(base, Impl::sigmoid(m.bias + logits[i])) ? 1.0f : 0.0f;
    for (size_t k = 1; k < K; ++k) {
      const double p = Impl::sigmoid(m.task_bias[k - 1] + task_logits[i * (K - 1) + k - 1]);
      labels[k] = Impl::draw_task_label(base, int(k), p) ? 1.0f : 0.0f;
    }
  }
  batch.size += count;
}

double SyntheticDataset::teacher_probability(Stream stream, int64_t index, int task) const {
  const Impl& m = *impl_;
  if (task < 0 || task >= m.tasks) throw Error("teacher_probability: no task " + std::to_string(task));
  std::vector<double> logit;
  m.task_logits_of(m.stream_seed(stream), index, 1, task, logit);
  return Impl::sigmoid(logit[0]);
}

double SyntheticDataset::teacher_auc(int64_t max_samples, int task) const {
  const Impl& m = *impl_;
  if (task < 0 || task >= m.tasks) throw Error("teacher_auc: no task " + std::to_string(task));
  const int64_t n = std::max<int64_t>(0, std::min(max_samples, m.eval_samples));
  const uint64_t seed = m.stream_seed(Stream::kEval);
  std::vector<double> probs;
  m.task_logits_of(seed, 0, n, task, probs);
  std::vector<uint8_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    probs[size_t(i)] = Impl::sigmoid(probs[size_t(i)]);
    labels[size_t(i)] = Impl::draw_task_label(Impl::sample_base(seed, i), task, probs[size_t(i)]) ? 1 : 0;
  }
  return exact_auc(probs, labels);
}

namespace {

class SyntheticReader final : public SampleReader {
 public:
  SyntheticReader(SyntheticDataset dataset, Stream stream, int64_t begin, int64_t end)
      : dataset_(std::move(dataset)), stream_(stream), begin_(begin), end_(end), next_(begin) {}

  int32_t read(int32_t max_samples, Batch& batch) override {
    const int32_t count = int32_t(std::max<int64_t>(0, std::min<int64_t>(max_samples, end_ - next_)));
    if (count == 0) return 0;
    dataset_.generate(stream_, next_, count, batch);
    next_ += count;
    stats_.lines += count;
    stats_.samples += count;
    return count;
  }
  void rewind() override { next_ = begin_; }
  ReaderPosition position() const override { return {next_, next_ - begin_}; }
  void seek(const ReaderPosition& position) override {
    if (position.byte_offset < begin_ || position.byte_offset > end_) {
      throw Error("synthetic reader position " + std::to_string(position.byte_offset) +
                      " is outside its shard [" + std::to_string(begin_) + ", " + std::to_string(end_) + ")",
                  "resume with a position() taken from a reader of the same stream and shard");
    }
    next_ = position.byte_offset;
  }
  const ParseStats& stats() const override { return stats_; }

 private:
  SyntheticDataset dataset_;
  Stream stream_;
  int64_t begin_, end_, next_;
  ParseStats stats_;
};

}  // namespace

std::unique_ptr<SampleReader> open_synthetic_reader(const SyntheticDataset& dataset, Stream stream, int shard,
                                                    int num_shards) {
  if (num_shards < 1 || shard < 0 || shard >= num_shards) {
    throw Error(
        "synthetic shard " + std::to_string(shard) + " of " + std::to_string(num_shards) + " does not exist",
        "shards are numbered 0 .. num_shards - 1");
  }
  const int64_t n = dataset.size(stream);
  __extension__ using i128 = __int128;
  const int64_t begin = int64_t(i128(n) * shard / num_shards);
  const int64_t end = int64_t(i128(n) * (shard + 1) / num_shards);
  return std::make_unique<SyntheticReader>(dataset, stream, begin, end);
}

}  // namespace strata::data
