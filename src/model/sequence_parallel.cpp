// Sequence-parallel attention: plan, exchange, run the kernels on packed units (see the header).
#include "model/sequence_parallel.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "common/error.hpp"
#include "model/exchange_payload.hpp"

namespace strata::model {

namespace {

// Query-key pairs of the causal block of queries [q0, q1) (per head).
double causal_pairs(int q0, int q1) { return (double(q1) * (q1 + 1) - double(q0) * (q0 + 1)) / 2.0; }

// Rows [r0, r1) of a (rows, width) buffer starting at row `first`, columns [c0, c0 + n).
void append_rows(std::vector<char>& out, const float* buffer, int64_t first, int width, int r0, int r1, int c0,
                 int n) {
  for (int r = r0; r < r1; ++r) append(out, buffer + (first + r) * width + c0, size_t(n));
}

void take_rows(const char*& in, float* buffer, int64_t first, int width, int r0, int r1, int c0, int n) {
  for (int r = r0; r < r1; ++r) take(in, buffer + (first + r) * width + c0, size_t(n));
}

}  // namespace

SequenceParallelMode parse_sequence_parallel_mode(const std::string& mode) {
  if (mode == "ring") return SequenceParallelMode::kRing;
  if (mode == "alltoall") return SequenceParallelMode::kAllToAll;
  throw Error("bad value '" + mode + "' for layout.sp_mode", "allowed values: ring, alltoall");
}

SequenceParallelAttention::SequenceParallelAttention(SequenceGroup& group, backend::AttentionKind kind, int heads,
                                                     int head_dim, const SequenceParallelOptions& options)
    : group_(group), kind_(kind), heads_(heads), head_dim_(head_dim), options_(options) {
  if (options_.mode == SequenceParallelMode::kAllToAll && heads % group.size() != 0)
    throw Error("layout.sp_mode = alltoall splits heads, but " + std::to_string(heads) +
                    " heads are not a multiple of layout.sp = " + std::to_string(group.size()),
                "set the model's heads (model.sasrec_heads, model.hstu_heads) to a multiple of layout.sp, or "
                "layout.sp_mode = ring");
}

void SequenceParallelAttention::plan(int batch, const int32_t* offsets) {
  const int k = group_.size();
  // Every member sends every member its offsets.
  std::vector<char> mine;
  append(mine, &batch, 1);
  append(mine, offsets, size_t(batch) + 1);
  send_.clear();
  send_bytes_.assign(size_t(k), int(mine.size()));
  for (int m = 0; m < k; ++m) send_.insert(send_.end(), mine.begin(), mine.end());
  group_.exchange(send_, send_bytes_, receive_, receive_bytes_);
  offsets_.assign(size_t(k), {});
  const char* in = receive_.data();
  for (int m = 0; m < k; ++m) {
    int b = 0;
    take(in, &b, 1);
    offsets_[m].resize(size_t(b) + 1);
    take(in, offsets_[m].data(), size_t(b) + 1);
  }

  // Units: long histories split over the group, the rest whole to the least loaded.
  forward_units_.clear();
  backward_units_.clear();
  ring_stages_ = 0;
  std::vector<double> load(size_t(k), 0.0);
  struct Pooled {
    Unit unit;
    double cost;
    bool both;  // a whole history: forward and backward on the same member
  };
  std::vector<Pooled> pool;
  const int bq = kernel_options_.query_block;
  int splits = 0;
  for (int m = 0; m < k; ++m) {
    for (int b = 0; b + 1 < int(offsets_[m].size()); ++b) {
      const int L = length(m, b);
      if (L == 0) continue;
      const double pairs = causal_pairs(0, L);
      if (L <= options_.min_len || k == 1) {
        pool.push_back({{m, b, 0, heads_, 0, L, -1}, 3.0 * heads_ * pairs, true});
        continue;
      }
      const int rotate = splits++ % k;
      if (options_.mode == SequenceParallelMode::kAllToAll) {
        for (int c = 0; c < k; ++c) {
          const int e = (c + rotate) % k, h0 = c * heads_ / k, h1 = (c + 1) * heads_ / k;
          const Unit u{m, b, h0, h1, 0, L, e};
          forward_units_.push_back(u);
          backward_units_.push_back(u);
          load[size_t(e)] += 3.0 * (h1 - h0) * pairs;
        }
        continue;
      }
      // Ring: chunk c ends near L sqrt((c + 1) / k) (equal causal work), on a query block;
      // the non-empty chunks are linked in order for the K/V prefix passes.
      int q0 = 0, chunks = 0;
      for (int c = 0; c < k; ++c) {
        int q1 = L;
        if (c + 1 < k) {
          const double x = double(L) * std::sqrt(double(c + 1) / k);
          q1 = std::clamp(int(std::lround(x / bq)) * bq, q0, L);
        }
        if (q1 > q0) {
          const int e = (c + rotate) % k;
          Unit u{m, b, 0, heads_, q0, q1, e};
          u.chunk = chunks;
          if (chunks++ > 0) {
            u.prev_executor = forward_units_.back().executor;
            forward_units_.back().next_executor = e;
          }
          forward_units_.push_back(u);
          load[size_t(e)] += heads_ * causal_pairs(q0, q1);
        }
        q0 = q1;
      }
      ring_stages_ = std::max(ring_stages_, chunks - 1);
      for (int h = 0; h < heads_; ++h) pool.push_back({{m, b, h, h + 1, 0, L, -1}, 2.0 * pairs, false});
    }
  }
  std::stable_sort(pool.begin(), pool.end(), [](const Pooled& a, const Pooled& b) { return a.cost > b.cost; });
  for (Pooled& p : pool) {
    const int e = int(std::min_element(load.begin(), load.end()) - load.begin());
    p.unit.executor = e;
    load[size_t(e)] += p.cost;
    if (p.both) forward_units_.push_back(p.unit);
    backward_units_.push_back(p.unit);
  }
  const double total = std::accumulate(load.begin(), load.end(), 0.0);
  const double worst = *std::max_element(load.begin(), load.end());
  last_max_mean_ = total > 0 ? worst / (total / k) : 1.0;
  stats_.steps += 1;
  stats_.max_mean_sum += last_max_mean_;
  stats_.max_mean_worst = std::max(stats_.max_mean_worst, last_max_mean_);
  stats_.split_sequences += splits;
}

SequenceParallelStats SequenceParallelAttention::take_stats() {
  SequenceParallelStats out = stats_;
  stats_ = {};
  return out;
}

void SequenceParallelAttention::run_forward_unit(const Unit& u, UnitRows& rows, std::vector<char>& reply,
                                                 const float* bias, int num_buckets) {
  const int nh = u.h1 - u.h0, nw = nh * head_dim_, L = length(u.home, u.seq);
  ob_.assign(size_t(u.q1) * nw, 0.0f);
  const int32_t offs[2] = {0, u.q1};
  const backend::JaggedAttentionShape shape{1, nh, head_dim_, offs};
  backend::AttentionOptions opts = kernel_options_;
  opts.first_query = u.q0;
  if (kind_ == backend::AttentionKind::kHstu) {
    opts.hstu_norm = L;  // the whole history's length, as its home divides by
    backend::hstu_attention_forward(shape, rows.q.data(), rows.k.data(), rows.v.data(), bias, num_buckets, ob_.data(),
                                    scratch_, opts);
  } else {
    lb_.assign(size_t(u.q1) * nh, 0.0f);
    backend::causal_attention_forward(shape, rows.q.data(), rows.k.data(), rows.v.data(), ob_.data(), lb_.data(),
                                      scratch_, opts);
  }
  append_rows(reply, ob_.data(), 0, nw, u.q0, u.q1, 0, nw);
  if (kind_ == backend::AttentionKind::kCausalSoftmax) append_rows(reply, lb_.data(), 0, nh, u.q0, u.q1, 0, nh);
}

void SequenceParallelAttention::run_backward_unit(const Unit& u, const char*& in, std::vector<char>& reply,
                                                  const float* bias, int num_buckets) {
  const int nh = u.h1 - u.h0, nw = nh * head_dim_, L = u.q1;
  const size_t rows = size_t(L) * nw;
  for (auto* b : {&qb_, &kb_, &vb_, &gb_, &dqb_, &dkb_, &dvb_}) b->resize(rows);
  take_rows(in, qb_.data(), 0, nw, 0, L, 0, nw);
  take_rows(in, kb_.data(), 0, nw, 0, L, 0, nw);
  take_rows(in, vb_.data(), 0, nw, 0, L, 0, nw);
  take_rows(in, gb_.data(), 0, nw, 0, L, 0, nw);
  const int32_t offs[2] = {0, L};
  const backend::JaggedAttentionShape shape{1, nh, head_dim_, offs};
  if (kind_ == backend::AttentionKind::kHstu) {
    // Without the bias gradient: the home sums it over its whole batch (see the header).
    backend::hstu_attention_backward(shape, qb_.data(), kb_.data(), vb_.data(), bias, num_buckets, gb_.data(),
                                  dqb_.data(), dkb_.data(), dvb_.data(), nullptr, scratch_, kernel_options_);
  } else {
    ob_.resize(rows);
    lb_.resize(size_t(L) * nh);
    take_rows(in, ob_.data(), 0, nw, 0, L, 0, nw);
    take_rows(in, lb_.data(), 0, nh, 0, L, 0, nh);
    backend::causal_attention_backward(shape, qb_.data(), kb_.data(), vb_.data(), ob_.data(), lb_.data(), gb_.data(),
                                    dqb_.data(), dkb_.data(), dvb_.data(), scratch_, kernel_options_);
  }
  append_rows(reply, dqb_.data(), 0, nw, 0, L, 0, nw);
  append_rows(reply, dkb_.data(), 0, nw, 0, L, 0, nw);
  append_rows(reply, dvb_.data(), 0, nw, 0, L, 0, nw);
}

void SequenceParallelAttention::forward(const float* q, const float* k, const float* v, const float* bias,
                                        int num_buckets, float* out, float* lse) {
  const int me = group_.rank(), members = group_.size(), W = heads_ * head_dim_;
  const bool softmax = kind_ == backend::AttentionKind::kCausalSoftmax;
  // The home sends each unit's own rows of Q, K and V.
  for (const Unit& u : forward_units_) {
    if (u.home != me) continue;
    const int64_t s0 = offsets_[size_t(me)][size_t(u.seq)];
    const int c0 = u.h0 * head_dim_, n = (u.h1 - u.h0) * head_dim_;
    std::vector<char>& part = parts_.to(u.executor);
    for (const float* x : {q, k, v}) append_rows(part, x, s0, W, u.q0, u.q1, c0, n);
  }
  parts_.send(group_);
  double sent = parts_.bytes_to_others(me);
  // This member's units, in plan order, each with its rows in place (zeros before q0
  // until the prefix arrives; the kernel reads no query row before q0).
  size_t mine = 0;
  for (const Unit& u : forward_units_) mine += u.executor == me;
  unit_rows_.resize(std::max(unit_rows_.size(), mine));
  std::vector<UnitRows*> rows_of(forward_units_.size(), nullptr);
  for (size_t i = 0, j = 0; i < forward_units_.size(); ++i) {
    const Unit& u = forward_units_[i];
    if (u.executor != me) continue;
    UnitRows& r = unit_rows_[j++];
    const size_t size = size_t(u.q1) * size_t((u.h1 - u.h0) * head_dim_);
    for (auto* x : {&r.q, &r.k, &r.v}) x->assign(size, 0.0f);
    rows_of[i] = &r;
  }
  for (int src = 0; src < members; ++src) {
    const char* in = parts_.from(src);
    for (size_t i = 0; i < forward_units_.size(); ++i) {
      const Unit& u = forward_units_[i];
      if (u.home != src || u.executor != me) continue;
      const int nw = (u.h1 - u.h0) * head_dim_;
      for (auto* x : {&rows_of[i]->q, &rows_of[i]->k, &rows_of[i]->v}) {
        take_rows(in, x->data(), 0, nw, u.q0, u.q1, 0, nw);
      }
    }
  }
  // Ring: stage s, the executor of each history's chunk s passes the K/V rows it
  // holds ([0, q1) of chunk s) to the executor of chunk s + 1.
  for (int stage = 0; stage < ring_stages_; ++stage) {
    for (size_t i = 0; i < forward_units_.size(); ++i) {
      const Unit& u = forward_units_[i];
      if (u.executor != me || u.chunk != stage || u.next_executor < 0) continue;
      const int nw = (u.h1 - u.h0) * head_dim_;
      for (auto* x : {&rows_of[i]->k, &rows_of[i]->v}) {
        append_rows(parts_.to(u.next_executor), x->data(), 0, nw, 0, u.q1, 0, nw);
      }
    }
    // What arrives is known from the plan: the prefix of each chunk s + 1 this member runs.
    std::vector<int> expected(size_t(members), 0);
    for (const Unit& u : forward_units_) {
      if (u.executor == me && u.chunk == stage + 1) {
        expected[size_t(u.prev_executor)] += 2 * u.q0 * (u.h1 - u.h0) * head_dim_ * int(sizeof(float));
      }
    }
    parts_.send(group_, &expected);
    sent += parts_.bytes_to_others(me);
    for (int src = 0; src < members; ++src) {
      const char* in = parts_.from(src);
      for (size_t i = 0; i < forward_units_.size(); ++i) {
        const Unit& u = forward_units_[i];
        if (u.executor != me || u.chunk != stage + 1 || u.prev_executor != src) continue;
        const int nw = (u.h1 - u.h0) * head_dim_;
        for (auto* x : {&rows_of[i]->k, &rows_of[i]->v}) take_rows(in, x->data(), 0, nw, 0, u.q0, 0, nw);
      }
    }
  }
  for (size_t i = 0; i < forward_units_.size(); ++i) {
    const Unit& u = forward_units_[i];
    if (u.executor == me) run_forward_unit(u, *rows_of[i], parts_.to(u.home), bias, num_buckets);
  }
  parts_.send(group_);
  sent += parts_.bytes_to_others(me);
  stats_.bytes_forward += sent;
  for (int e = 0; e < members; ++e) {
    const char* in = parts_.from(e);
    for (const Unit& u : forward_units_) {
      if (u.home != me || u.executor != e) continue;
      const int64_t s0 = offsets_[size_t(me)][size_t(u.seq)];
      take_rows(in, out, s0, W, u.q0, u.q1, u.h0 * head_dim_, (u.h1 - u.h0) * head_dim_);
      if (softmax) take_rows(in, lse, s0, heads_, u.q0, u.q1, u.h0, u.h1 - u.h0);
    }
  }
}

void SequenceParallelAttention::backward(const float* q, const float* k, const float* v, const float* out,
                                         const float* lse, const float* bias, int num_buckets, const float* dout,
                                         float* dq, float* dk, float* dv, float* dbias) {
  const int me = group_.rank(), members = group_.size(), W = heads_ * head_dim_;
  const bool softmax = kind_ == backend::AttentionKind::kCausalSoftmax;
  for (const Unit& u : backward_units_) {
    if (u.home != me) continue;
    const int64_t s0 = offsets_[size_t(me)][size_t(u.seq)];
    const int c0 = u.h0 * head_dim_, n = (u.h1 - u.h0) * head_dim_;
    std::vector<char>& part = parts_.to(u.executor);
    for (const float* x : {q, k, v, dout}) append_rows(part, x, s0, W, 0, u.q1, c0, n);
    if (softmax) {
      append_rows(part, out, s0, W, 0, u.q1, c0, n);
      append_rows(part, lse, s0, heads_, 0, u.q1, u.h0, u.h1 - u.h0);
    }
  }
  parts_.send(group_);
  double sent = parts_.bytes_to_others(me);
  for (int src = 0; src < members; ++src) {
    const char* in = parts_.from(src);
    for (const Unit& u : backward_units_)
      if (u.home == src && u.executor == me) run_backward_unit(u, in, parts_.to(src), bias, num_buckets);
  }
  parts_.send(group_);
  sent += parts_.bytes_to_others(me);
  stats_.bytes_backward += sent;
  for (int e = 0; e < members; ++e) {
    const char* in = parts_.from(e);
    for (const Unit& u : backward_units_) {
      if (u.home != me || u.executor != e) continue;
      const int64_t s0 = offsets_[size_t(me)][size_t(u.seq)];
      const int c0 = u.h0 * head_dim_, n = (u.h1 - u.h0) * head_dim_;
      for (float* x : {dq, dk, dv}) take_rows(in, x, s0, W, 0, u.q1, c0, n);
    }
  }
  if (kind_ == backend::AttentionKind::kHstu && dbias != nullptr) {
    const std::vector<int32_t>& offsets = offsets_[size_t(me)];
    const backend::JaggedAttentionShape shape{int(offsets.size()) - 1, heads_, head_dim_, offsets.data()};
    backend::hstu_attention_bias_backward(shape, q, k, v, bias, num_buckets, dout, dbias, scratch_, kernel_options_);
  }
}

}  // namespace strata::model
