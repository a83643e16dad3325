// SequenceParallelAttention: the attention of a sequence model (sasrec's causal softmax,
// hstu's pointwise SiLU attention) computed by the layout.sp trainers of an SP group,
// bit-identical to every trainer computing its own batch alone (layout.sp = 1).
//
// Why only the attention moves. Every other step of these models is a GEMM over all of
// a trainer's tokens (projections, their weight gradients), and OpenBLAS gives a row
// different bits when the GEMM has a different row count or the row another place
// (docs/PARALLEL.md gives the measurement): moving tokens to another trainer
// would change the arithmetic. The attention kernels instead work per (sequence, head)
// in score blocks anchored at the sequence's first token, whose GEMM shapes do not
// depend on the batch, so a trainer that receives one sequence's Q, K, V (some heads,
// some query blocks) computes exactly the numbers its home trainer would have.
//
// Each member is the home of its own batch (its producer's, as with sp = 1). A step:
//   plan      the members exchange their batches' lengths and all derive the same plan:
//             a history longer than layout.sp_min_len is split over the k members (ring:
//             k query chunks, boundaries on query-block multiples, chosen so each chunk
//             has ~1/k of the causal work; alltoall: H/k heads each), shorter ones go
//             whole to the least-loaded member (largest first), so the attention work
//             (sum over a member's units of its query-key pairs) is balanced.
//   forward   the home sends each unit's Q, K and V rows. A unit needs the K, V rows
//             before it as well: in ring mode a chunk's come from the executor of the
//             chunk before it, point to point along the chunks (SequenceGroup::pass;
//             stage s: chunk s's executor passes the K/V prefix it holds, its own rows
//             included, to chunk s + 1's), so each row leaves its home once; whole
//             units have none before them. The executor runs the forward kernel from
//             the unit's first query block (AttentionOptions::first_query: the same
//             blocks in the same order) and sends the output rows (and softmax
//             log-sum-exp) back.
//   backward  per (sequence, heads) unit, whole sequences only, so the sums over query
//             blocks (dK, dV) and over key blocks (dQ) stay on one trainer in the kernel's
//             order; ring mode gives each head of a long sequence its own unit. hstu's
//             relative-position bias gradient is one sum over the whole batch in (sample,
//             head, key block, query block) order: the home computes it alone with
//             hstu_attention_bias_backward, the same additions in the same order.
// The rest of the step (and every evaluation) runs on the home exactly as with sp = 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/attention_kernels.hpp"
#include "model/sequence_group.hpp"

namespace strata::model {

enum class SequenceParallelMode { kRing, kAllToAll };

struct SequenceParallelOptions {
  int min_len = 256;                                  // histories longer than this are split over the group
  SequenceParallelMode mode = SequenceParallelMode::kRing;  // how a long history is split
};

// "ring" | "alltoall"; strata::Error naming layout.sp_mode otherwise.
SequenceParallelMode parse_sequence_parallel_mode(const std::string& mode);

// What the plans of the steps since the last take_stats looked like.
struct SequenceParallelStats {
  double steps = 0;                // plans made (training steps)
  double max_mean_sum = 0;         // sum over the steps of max / mean attention work per member
  double max_mean_worst = 0;       // the largest of them
  double split_sequences = 0;      // histories split over the group (summed over the steps)
  double bytes_forward = 0;        // bytes this member sent in attention forwards (every layer)
  double bytes_backward = 0;       // bytes this member sent in attention backwards (every layer)
};

class SequenceParallelAttention {
 public:
  // heads x head_dim is the width of Q, K, V rows; query_block the kernels' (a ring
  // chunk starts on a multiple of it).
  SequenceParallelAttention(SequenceGroup& group, backend::AttentionKind kind, int heads, int head_dim,
                            const SequenceParallelOptions& options);

  // Collective: every member, at the start of a training step, with its own batch's
  // jagged history offsets (batch + 1 entries).
  void plan(int batch, const int32_t* offsets);

  // Collective, per layer, after plan(): out (N, heads * head_dim) over this member's
  // batch; lse (N, heads) for softmax attention (ignored for hstu); bias (num_buckets)
  // hstu's relative-position bias.
  void forward(const float* q, const float* k, const float* v, const float* bias, int num_buckets, float* out,
               float* lse);

  // Collective, per layer: dq, dk, dv (N, heads * head_dim) overwritten; for hstu dbias
  // (num_buckets) too. out and lse are the forward's (softmax only).
  void backward(const float* q, const float* k, const float* v, const float* out, const float* lse,
                const float* bias, int num_buckets, const float* dout, float* dq, float* dk, float* dv,
                float* dbias);

  // max / mean attention work per member of the last plan (1 = perfectly balanced).
  double last_max_mean() const { return last_max_mean_; }
  SequenceParallelStats take_stats();

 private:
  // Queries [q0, q1) and heads [h0, h1) of sequence seq of member home's batch, run by executor.
  struct Unit {
    int home, seq, h0, h1, q0, q1, executor;
    int chunk = -1;          // ring: its place among its history's non-empty chunks; -1 for a whole unit
    int prev_executor = -1;  // ring: the executor of the chunk before (it sends the K/V prefix), else -1
    int next_executor = -1;  // ring: the executor of the chunk after, else -1
  };
  // One forward unit's rows on its executor: Q rows [q0, q1), K and V rows [0, q1).
  struct UnitRows {
    std::vector<float> q, k, v;
  };

  int length(int home, int seq) const { return offsets_[home][seq + 1] - offsets_[home][seq]; }
  void run_forward_unit(const Unit& u, UnitRows& rows, std::vector<char>& reply, const float* bias, int num_buckets);
  void run_backward_unit(const Unit& u, const char*& in, std::vector<char>& reply, const float* bias,
                         int num_buckets);

  SequenceGroup& group_;
  backend::AttentionKind kind_;
  int heads_, head_dim_;
  SequenceParallelOptions options_;
  backend::AttentionOptions kernel_options_;
  backend::AttentionScratch scratch_;
  std::vector<std::vector<int32_t>> offsets_;  // every member's history offsets, this step
  std::vector<Unit> forward_units_, backward_units_;
  int ring_stages_ = 0;  // the most chunks of a split history, less one: the prefix passes of a forward
  std::vector<UnitRows> unit_rows_;  // (this member's forward units) reused
  double last_max_mean_ = 1;
  SequenceParallelStats stats_;
  // Exchange buffers, reused.
  GroupParts parts_;
  std::vector<char> send_, receive_;  // the plan's exchange
  std::vector<int> send_bytes_, receive_bytes_;
  std::vector<float> qb_, kb_, vb_, ob_, lb_, gb_, dqb_, dkb_, dvb_;  // one unit's packed rows
};

}  // namespace strata::model
