// DinActivationUnit: DIN's activation unit (the MLP that scores every history event
// against the candidate) computed in fixed tiles of events, alone or shared by the
// layout.sp trainers of an SP group, with the same bits either way.
//
// Why tiles. OpenBLAS gives a row different bits when the GEMM has a different row
// count (docs/PARALLEL.md), so one GEMM over all of a trainer's events could not be
// split over trainers exactly. Here every GEMM covers one tile: kTile consecutive
// events of one history, the tiles anchored at the history's first event (its last
// tile may be shorter). A tile's shape never depends on the batch or the layout, so a
// trainer that is sent a history's events computes the numbers its home would have.
//
// The sums. A tile's weight and bias gradients (and its share of the candidate's
// gradient) form one partial; a history's gradient is its tiles' partials added in
// order from zero, and the batch's is the histories' added in sample order from
// zero. A history split over the group is cut on tile boundaries into contiguous
// chunks; the running sum travels point to point from chunk to chunk
// (SequenceGroup::pass), so the additions are the same as on one trainer.
//
// A training step with a group: the members exchange their histories' event counts
// and all derive the same plan (histories longer than layout.sp_min_len are cut into
// k chunks of about equal events, chunk c run by member home + c; the shorter ones go
// whole to the least-loaded member, largest first); the home sends each unit its
// events' rows and the candidate's, gets the scores back; in the backward it sends
// the scores' gradients and gets each event's gradient, and per history the summed
// partial. Evaluation stays local.
#pragma once

#include <cstdint>
#include <vector>

#include "model/dense_parameters.hpp"
#include "model/mlp.hpp"
#include "model/sequence_group.hpp"
#include "model/sequence_parallel.hpp"

namespace strata::model {

class DinActivationUnit {
 public:
  static constexpr int kTile = 64;  // events per GEMM (a history's last tile may be shorter)

  // mlp: the activation unit's layers, (4 dim) -> ... -> 1, registered in params.
  DinActivationUnit(const Mlp& mlp, int dim);

  // layout.sp > 1: share the training steps' work with the group (null or one member: alone).
  void set_group(SequenceGroup* group, const SequenceParallelOptions& options);
  bool shared() const { return group_ != nullptr; }

  // Scores of every event of the batch. Sample b's events are [offsets[b], offsets[b + 1]),
  // event j's row is item_rows + event_row[j] * dim, sample b's candidate row is
  // candidate + b * dim. Collective over the group when training (evaluation stays
  // local). Keeps what backward needs.
  void forward(const DenseParameters& params, int batch, const int32_t* offsets, const float* item_rows,
               const int32_t* event_row, const float* candidate, bool training, float* scores);

  // After a training forward: dscores (events) in. Writes the activation unit's
  // gradients into params.grads(), each event's input gradient into devent
  // (events, dim) as d e + d (e - c) + c * d (e * c), and each sample's summed
  // candidate gradient (d c - d (e - c) + e * d (e * c) over its events) into
  // dcandidate (batch, dim), zero for a sample without events. Collective.
  void backward(DenseParameters& params, const float* dscores, float* devent, float* dcandidate);

  SequenceParallelStats take_stats();

 private:
  // Events [e0, e1) of sample `seq` of member home's batch, run by executor.
  struct Unit {
    int home, seq, e0, e1, executor;
    int chunk = -1;          // a split history: its place among the history's chunks; -1 for a whole one
    int prev_executor = -1;  // a split history: the executor of the chunk before (sends the running sum)
    int next_executor = -1;  // a split history: the executor of the chunk after
  };
  // What a unit's executor keeps from forward to backward. Not the first layer's
  // inputs [e, c, e - c, e * c]: the backward rebuilds them tile by tile from the
  // rows (the same operations, so the same bits), which keeps a quarter of the
  // per-event bytes a long history costs.
  struct UnitState {
    std::vector<float> candidate;  // (dim)
    std::vector<float> rows;       // a unit another home sent: its events' rows (events, dim)
    const float* row_base = nullptr;     // event j's row: row_base + row_index[j] * dim, or + j * dim
    const int32_t* row_index = nullptr;  // null: the rows are consecutive (rows above)
    std::vector<float> acts;       // every layer's outputs, layer after layer, (events, width) each
    std::vector<float> partials;   // a chunk after the first: its tiles' partials, until the running sum arrives
    std::vector<float> sum;        // (shared steps) its history's running sum (partial_size())
  };

  int events(int home, int seq) const {
    return offsets_[size_t(home)][size_t(seq) + 1] - offsets_[size_t(home)][size_t(seq)];
  }
  size_t partial_size() const { return param_count_ + size_t(dim_); }
  void plan_alone(int batch, const int32_t* offsets);
  void plan_shared(int batch, const int32_t* offsets);
  // Forward of one unit whose event j's row is rows + index[j] * dim (rows + j * dim
  // without an index) and whose candidate is `cand`. rows and index must stay valid
  // until the unit's backward.
  void run_forward(const Unit& u, UnitState& state, const float* rows, const int32_t* index, const float* cand,
                   float* scores);
  // Backward of one unit: dscores (events) in, devent (events, dim) out; the tiles'
  // partials summed into sum (partial_size()), or kept in state.partials when sum is null.
  void run_backward(DenseParameters& params, const Unit& u, UnitState& state, const float* dscores, float* devent,
                    float* sum);

  // visit(i, unit, in) for each unit that another home sent this member (in the last
  // exchange), home by home in plan order; in points at its part and is read forward.
  template <class Visit>
  void for_each_sent_unit(Visit&& visit);

  std::vector<const Linear*> layers_;
  int dim_;
  size_t param_begin_, param_count_;  // the unit's slice of the flat parameters
  size_t acts_width_ = 0;             // sum of the layers' widths
  int max_width_ = 0;

  SequenceGroup* group_ = nullptr;
  SequenceParallelOptions options_;
  std::vector<std::vector<int32_t>> offsets_;  // every member's per-sample event offsets, this step
  std::vector<Unit> units_;
  int chain_stages_ = 0;  // the most chunks of a split history, less one
  std::vector<UnitState> states_;  // this member's units, in plan order
  const DenseParameters* params_ = nullptr;  // of the last forward
  int batch_ = 0;
  bool plan_is_shared_ = false;  // the last forward's plan spans the group (a training step)
  SequenceParallelStats stats_;

  // Scratch, reused.
  // Events [t0, t0 + r) of a unit as the first layer's input rows [e, c, e - c, e * c] into tile_inputs_.
  void fill_inputs(const UnitState& state, int t0, int r);
  const float* event_row_of(const UnitState& state, int j) const {
    return state.row_base + size_t(state.row_index != nullptr ? state.row_index[j] : j) * dim_;
  }

  std::vector<float> tile_inputs_, tile_grad_a_, tile_grad_b_, tile_dinputs_, tile_dc_, sum_, total_;
  std::vector<size_t> act_at_;
  std::vector<float> cand_, scores_, devent_out_, remote_sums_;
  GroupParts parts_;
  std::vector<std::vector<char>> replies_;  // per home: what goes back after the running sums
};

}  // namespace strata::model
