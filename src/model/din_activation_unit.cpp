// DinActivationUnit: tiles, plan, and the exchanges of a shared step (see the header).
#include "model/din_activation_unit.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "common/error.hpp"
#include "model/exchange_payload.hpp"

namespace strata::model {

namespace {

void add_into(float* sum, const float* part, size_t n) {
  for (size_t i = 0; i < n; ++i) sum[i] += part[i];
}

}  // namespace

DinActivationUnit::DinActivationUnit(const Mlp& mlp, int dim) : dim_(dim) {
  size_t end = 0;
  max_width_ = mlp.in();
  for (const Linear& layer : mlp.layers()) {
    if (!layers_.empty() && layer.weight_offset() != end)
      throw Error("DinActivationUnit: the activation unit's parameters are not one slice",
                  "register the activation unit's layers one after another");
    if (layers_.empty()) param_begin_ = layer.weight_offset();
    layers_.push_back(&layer);
    end = layer.bias_offset() + size_t(layer.out());
    acts_width_ += size_t(layer.out());
    max_width_ = std::max(max_width_, layer.out());
  }
  if (layers_.empty() || layers_.back()->out() != 1 || mlp.in() != 4 * dim)
    throw Error("DinActivationUnit: the activation unit must map 4 dim inputs to one score",
                "build it as Mlp(params, name, 4 * dim, widths ending in 1)");
  param_count_ = end - param_begin_;
}

void DinActivationUnit::set_group(SequenceGroup* group, const SequenceParallelOptions& options) {
  group_ = group != nullptr && group->size() > 1 ? group : nullptr;
  options_ = options;
}

SequenceParallelStats DinActivationUnit::take_stats() {
  SequenceParallelStats out = stats_;
  stats_ = {};
  return out;
}

void DinActivationUnit::plan_alone(int batch, const int32_t* offsets) {
  const int me = group_ != nullptr ? group_->rank() : 0;
  offsets_.assign(size_t(me) + 1, {});
  offsets_[size_t(me)].assign(offsets, offsets + batch + 1);
  units_.clear();
  chain_stages_ = 0;
  for (int b = 0; b < batch; ++b) {
    if (events(me, b) > 0) units_.push_back({me, b, 0, events(me, b), me});
  }
}

void DinActivationUnit::plan_shared(int batch, const int32_t* offsets) {
  const int k = group_->size();
  std::vector<char> mine;
  append(mine, &batch, 1);
  append(mine, offsets, size_t(batch) + 1);
  for (int m = 0; m < k; ++m) parts_.to(m) = mine;
  parts_.send(*group_);
  offsets_.assign(size_t(k), {});
  for (int m = 0; m < k; ++m) {
    const char* in = parts_.from(m);
    int b = 0;
    take(in, &b, 1);
    offsets_[size_t(m)].resize(size_t(b) + 1);
    take(in, offsets_[size_t(m)].data(), size_t(b) + 1);
  }

  // Long histories: k chunks of about equal events, cut on tiles, chunk c on member
  // home + c; the rest whole, largest first, to the least loaded member.
  units_.clear();
  chain_stages_ = 0;
  std::vector<double> load(size_t(k), 0.0);
  std::vector<Unit> whole;
  int splits = 0;
  for (int m = 0; m < k; ++m) {
    for (int b = 0; b + 1 < int(offsets_[size_t(m)].size()); ++b) {
      const int n = events(m, b);
      if (n == 0) continue;
      if (n <= options_.min_len || n <= kTile) {
        whole.push_back({m, b, 0, n, -1});
        continue;
      }
      ++splits;
      const int tiles = (n + kTile - 1) / kTile;
      int e0 = 0, chunks = 0;
      for (int c = 0; c < k; ++c) {
        const int e1 = c + 1 == k ? n : std::min(n, int((int64_t(tiles) * (c + 1) / k) * kTile));
        if (e1 > e0) {
          Unit u{m, b, e0, e1, (m + c) % k};
          u.chunk = chunks;
          if (chunks++ > 0) {
            u.prev_executor = units_.back().executor;
            units_.back().next_executor = u.executor;
          }
          units_.push_back(u);
          load[size_t(u.executor)] += e1 - e0;
        }
        e0 = e1;
      }
      chain_stages_ = std::max(chain_stages_, chunks - 1);
    }
  }
  std::stable_sort(whole.begin(), whole.end(), [](const Unit& a, const Unit& b) { return a.e1 > b.e1; });
  for (Unit& u : whole) {
    u.executor = int(std::min_element(load.begin(), load.end()) - load.begin());
    load[size_t(u.executor)] += u.e1;
    units_.push_back(u);
  }
  const double total = std::accumulate(load.begin(), load.end(), 0.0);
  const double worst = *std::max_element(load.begin(), load.end());
  const double max_mean = total > 0 ? worst / (total / k) : 1.0;
  stats_.steps += 1;
  stats_.max_mean_sum += max_mean;
  stats_.max_mean_worst = std::max(stats_.max_mean_worst, max_mean);
  stats_.split_sequences += splits;
}

template <class Visit>
void DinActivationUnit::for_each_sent_unit(Visit&& visit) {
  const int me = group_->rank();
  for (int src = 0; src < group_->size(); ++src) {
    if (src == me) continue;
    const char* in = parts_.from(src);
    for (size_t i = 0; i < units_.size(); ++i) {
      if (units_[i].home == src && units_[i].executor == me) visit(i, units_[i], in);
    }
  }
}

void DinActivationUnit::fill_inputs(const UnitState& state, int t0, int r) {
  const int D = dim_;
  const float* cand = state.candidate.data();
  tile_inputs_.resize(size_t(kTile) * 4 * D);
  for (int j = 0; j < r; ++j) {
    const float* e = event_row_of(state, t0 + j);
    float* z = &tile_inputs_[size_t(j) * 4 * D];
    for (int d = 0; d < D; ++d) {
      z[d] = e[d];
      z[D + d] = cand[d];
      z[2 * D + d] = e[d] - cand[d];
      z[3 * D + d] = e[d] * cand[d];
    }
  }
}

void DinActivationUnit::run_forward(const Unit& u, UnitState& state, const float* rows, const int32_t* index,
                                    const float* cand, float* scores) {
  const int n = u.e1 - u.e0, D = dim_;
  state.candidate.assign(cand, cand + D);
  state.row_base = rows;
  state.row_index = index;
  state.acts.resize(size_t(n) * acts_width_);
  for (int t0 = 0; t0 < n; t0 += kTile) {
    const int r = std::min(kTile, n - t0);
    fill_inputs(state, t0, r);
    const float* input = tile_inputs_.data();
    float* act = state.acts.data();
    for (const Linear* layer : layers_) {
      float* out = act + size_t(t0) * layer->out();
      layer->forward(*params_, input, r, out);
      input = out;
      act += size_t(n) * layer->out();
    }
  }
  std::memcpy(scores, state.acts.data() + size_t(n) * (acts_width_ - 1), sizeof(float) * n);
}

void DinActivationUnit::run_backward(DenseParameters& params, const Unit& u, UnitState& state, const float* dscores,
                                     float* devent, float* sum) {
  const int n = u.e1 - u.e0, D = dim_, L = int(layers_.size());
  const size_t P = param_count_;
  tile_grad_a_.resize(size_t(kTile) * max_width_);
  tile_grad_b_.resize(size_t(kTile) * max_width_);
  tile_dinputs_.resize(size_t(kTile) * 4 * D);
  tile_dc_.resize(size_t(D));
  state.partials.clear();
  const float* cand = state.candidate.data();
  const float* layer_grads = params.grads().data() + param_begin_;
  // Layer l's outputs start after the layers before it, (n, width) each.
  act_at_.assign(size_t(L), 0);
  for (int l = 1; l < L; ++l) act_at_[size_t(l)] = act_at_[size_t(l) - 1] + size_t(n) * layers_[size_t(l) - 1]->out();
  for (int t0 = 0; t0 < n; t0 += kTile) {
    const int r = std::min(kTile, n - t0);
    fill_inputs(state, t0, r);
    std::memcpy(tile_grad_a_.data(), dscores + t0, sizeof(float) * r);
    float* grad = tile_grad_a_.data();
    float* spare = tile_grad_b_.data();
    for (int l = L; l-- > 0;) {
      const Linear& layer = *layers_[size_t(l)];
      const float* input = l == 0 ? tile_inputs_.data()
                                  : state.acts.data() + act_at_[size_t(l) - 1] +
                                        size_t(t0) * layers_[size_t(l) - 1]->out();
      const float* y = state.acts.data() + act_at_[size_t(l)] + size_t(t0) * layer.out();
      float* grad_in = l == 0 ? tile_dinputs_.data() : spare;
      layer.backward(params, input, y, grad, r, grad_in);
      spare = grad;
      grad = grad_in;
    }
    // The tile's partial: the layers' gradients (in params.grads() now), then its share of the candidate's.
    float* dc = tile_dc_.data();
    std::fill_n(dc, D, 0.0f);
    for (int j = 0; j < r; ++j) {
      const float* dz = &tile_dinputs_[size_t(j) * 4 * D];
      const float* e = event_row_of(state, t0 + j);
      float* de = devent + size_t(t0 + j) * D;
      for (int d = 0; d < D; ++d) {
        de[d] = dz[d] + dz[2 * D + d] + dz[3 * D + d] * cand[d];
        dc[d] += dz[D + d] - dz[2 * D + d] + dz[3 * D + d] * e[d];
      }
    }
    if (sum == nullptr) {
      state.partials.insert(state.partials.end(), layer_grads, layer_grads + P);
      state.partials.insert(state.partials.end(), dc, dc + D);
    } else if (t0 == 0) {  // a history's sum starts with its first tile's partial
      std::memcpy(sum, layer_grads, sizeof(float) * P);
      std::memcpy(sum + P, dc, sizeof(float) * D);
    } else {
      add_into(sum, layer_grads, P);
      add_into(sum + P, dc, size_t(D));
    }
  }
}

void DinActivationUnit::forward(const DenseParameters& params, int batch, const int32_t* offsets,
                                const float* item_rows, const int32_t* event_row, const float* candidate,
                                bool training, float* scores) {
  params_ = &params;
  batch_ = batch;
  const bool shared = training && group_ != nullptr;
  if (shared) {
    plan_shared(batch, offsets);
  } else {
    plan_alone(batch, offsets);
  }
  plan_is_shared_ = shared;
  const int me = shared ? group_->rank() : (group_ != nullptr ? group_->rank() : 0), D = dim_;
  states_.resize(std::max(states_.size(), units_.size()));
  double sent = 0;
  if (shared) {
    // Each unit's candidate, then its events' rows gathered straight into the part
    // (a long history's rows are the home's largest per-event buffer: no second copy).
    for (const Unit& u : units_) {
      if (u.home != me || u.executor == me) continue;
      std::vector<char>& part = parts_.to(u.executor);
      append(part, candidate + size_t(u.seq) * D, size_t(D));
      const int32_t first = offsets_[size_t(me)][size_t(u.seq)] + u.e0;
      part.reserve(part.size() + sizeof(float) * size_t(u.e1 - u.e0) * D);
      for (int j = 0; j < u.e1 - u.e0; ++j) append(part, item_rows + size_t(event_row[first + j]) * D, size_t(D));
    }
    parts_.send(*group_);
    sent += parts_.bytes_to_others(me);
  }
  // This member's units in plan order: its own rows, or what their home sent.
  for (size_t i = 0; i < units_.size(); ++i) {
    const Unit& u = units_[i];
    if (u.executor != me || u.home != me) continue;
    run_forward(u, states_[i], item_rows, event_row + offsets_[size_t(me)][size_t(u.seq)] + u.e0,
                candidate + size_t(u.seq) * D, scores + offsets_[size_t(me)][size_t(u.seq)] + u.e0);
  }
  if (!shared) return;
  for_each_sent_unit([&](size_t i, const Unit& u, const char*& in) {
    const int n = u.e1 - u.e0;
    UnitState& state = states_[i];
    cand_.resize(size_t(D));
    state.rows.resize(size_t(n) * D);
    take(in, cand_.data(), size_t(D));
    take(in, state.rows.data(), state.rows.size());
    scores_.resize(size_t(n));
    run_forward(u, state, state.rows.data(), nullptr, cand_.data(), scores_.data());
    append(parts_.to(u.home), scores_.data(), scores_.size());
  });
  parts_.send(*group_);
  sent += parts_.bytes_to_others(me);
  stats_.bytes_forward += sent;
  for (int e = 0; e < group_->size(); ++e) {
    const char* in = parts_.from(e);
    for (const Unit& u : units_) {
      if (u.home == me && u.executor == e && e != me)
        take(in, scores + offsets_[size_t(me)][size_t(u.seq)] + u.e0, size_t(u.e1 - u.e0));
    }
  }
}

void DinActivationUnit::backward(DenseParameters& params, const float* dscores, float* devent, float* dcandidate) {
  const bool shared = plan_is_shared_;
  const int me = group_ != nullptr ? group_->rank() : 0, D = dim_;
  const size_t P = param_count_, S = partial_size();
  const std::vector<int32_t>& mine = offsets_[size_t(me)];
  // The batch's gradient: the samples' sums added in sample order, starting with the first.
  total_.resize(P);
  bool started = false;
  std::fill_n(dcandidate, size_t(batch_) * D, 0.0f);
  auto add_sample = [&](int b, const float* sum) {
    if (started) {
      add_into(total_.data(), sum, P);
    } else {
      std::memcpy(total_.data(), sum, sizeof(float) * P);
      started = true;
    }
    std::memcpy(dcandidate + size_t(b) * D, sum + P, sizeof(float) * D);
  };
  auto finish = [&] {
    float* grads = params.grads().data() + param_begin_;
    if (started) {
      std::memcpy(grads, total_.data(), sizeof(float) * P);
    } else {
      std::fill_n(grads, P, 0.0f);
    }
  };
  if (!shared) {  // every unit a whole history, in sample order
    sum_.resize(S);
    for (size_t i = 0; i < units_.size(); ++i) {
      const Unit& u = units_[i];
      run_backward(params, u, states_[i], dscores + mine[size_t(u.seq)],
                   devent + size_t(mine[size_t(u.seq)]) * D, sum_.data());
      add_sample(u.seq, sum_.data());
    }
    finish();
    return;
  }

  double sent = 0;
  for (const Unit& u : units_) {
    if (u.home == me && u.executor != me)
      append(parts_.to(u.executor), dscores + mine[size_t(u.seq)] + u.e0, size_t(u.e1 - u.e0));
  }
  parts_.send(*group_);
  sent += parts_.bytes_to_others(me);
  // A whole history or a first chunk starts its sum; a later chunk keeps its tiles'
  // partials until the running sum arrives.
  auto sum_of_unit = [&](const Unit& u, UnitState& state) -> float* {
    if (u.chunk > 0) return nullptr;
    state.sum.resize(S);
    return state.sum.data();
  };
  for (size_t i = 0; i < units_.size(); ++i) {
    const Unit& u = units_[i];
    if (u.executor == me && u.home == me)
      run_backward(params, u, states_[i], dscores + mine[size_t(u.seq)] + u.e0,
                   devent + size_t(mine[size_t(u.seq)] + u.e0) * D, sum_of_unit(u, states_[i]));
  }
  // Units from other homes: their events' gradients wait in replies_ for the last send.
  replies_.assign(size_t(group_->size()), {});
  for_each_sent_unit([&](size_t i, const Unit& u, const char*& in) {
    const int n = u.e1 - u.e0;
    scores_.resize(size_t(n));
    take(in, scores_.data(), size_t(n));
    devent_out_.resize(size_t(n) * D);
    run_backward(params, u, states_[i], scores_.data(), devent_out_.data(), sum_of_unit(u, states_[i]));
    append(replies_[size_t(u.home)], devent_out_.data(), devent_out_.size());
  });
  // The running sums along each split history's chunks, stage by stage.
  for (int stage = 0; stage < chain_stages_; ++stage) {
    std::vector<int> expected(size_t(group_->size()), 0);
    for (size_t i = 0; i < units_.size(); ++i) {
      const Unit& u = units_[i];
      if (u.executor != me) continue;
      if (u.chunk == stage && u.next_executor >= 0) append(parts_.to(u.next_executor), states_[i].sum.data(), S);
      if (u.chunk == stage + 1) expected[size_t(u.prev_executor)] += int(S * sizeof(float));
    }
    parts_.send(*group_, &expected);
    sent += parts_.bytes_to_others(me);
    for (int src = 0; src < group_->size(); ++src) {
      const char* in = parts_.from(src);
      for (size_t i = 0; i < units_.size(); ++i) {
        const Unit& u = units_[i];
        if (u.executor != me || u.chunk != stage + 1 || u.prev_executor != src) continue;
        UnitState& state = states_[i];
        state.sum.resize(S);
        take(in, state.sum.data(), S);
        for (size_t t = 0; t * S < state.partials.size(); ++t) add_into(state.sum.data(), &state.partials[t * S], S);
      }
    }
  }
  // Back to the homes: the events' gradients, then the sums of the units that end a history.
  for (size_t i = 0; i < units_.size(); ++i) {
    const Unit& u = units_[i];
    if (u.executor != me || u.home == me || u.next_executor >= 0) continue;
    append(replies_[size_t(u.home)], states_[i].sum.data(), S);
  }
  for (int m = 0; m < group_->size(); ++m) parts_.to(m).swap(replies_[size_t(m)]);
  parts_.send(*group_);
  sent += parts_.bytes_to_others(me);
  stats_.bytes_backward += sent;

  std::vector<const float*> sum_of(size_t(batch_), nullptr);
  for (size_t i = 0; i < units_.size(); ++i) {
    const Unit& u = units_[i];
    if (u.home == me && u.executor == me && u.next_executor < 0) sum_of[size_t(u.seq)] = states_[i].sum.data();
  }
  size_t ending = 0;
  for (const Unit& u : units_) ending += u.home == me && u.executor != me && u.next_executor < 0;
  remote_sums_.resize(ending * S);
  float* next_sum = remote_sums_.data();
  for (int e = 0; e < group_->size(); ++e) {
    if (e == me) continue;
    const char* in = parts_.from(e);
    for (const Unit& u : units_) {
      if (u.home == me && u.executor == e)
        take(in, devent + size_t(mine[size_t(u.seq)] + u.e0) * D, size_t(u.e1 - u.e0) * D);
    }
    for (const Unit& u : units_) {
      if (u.home != me || u.executor != e || u.next_executor >= 0) continue;
      take(in, next_sum, S);
      sum_of[size_t(u.seq)] = next_sum;
      next_sum += S;
    }
  }
  for (int b = 0; b < batch_; ++b) {
    if (sum_of[size_t(b)] != nullptr) add_sample(b, sum_of[size_t(b)]);
  }
  finish();
}

}  // namespace strata::model
