// Attention over jagged batches of sequences (SASRec's causal softmax, HSTU's
// pointwise SiLU with a relative bias): the neutral interface model/ calls.
// The layout, the memory bound and the determinism contract are the host
// kernels' (host/attention.hpp), which the selected device's table runs (the
// CUDA table too, until its kernels land: issue 16).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata::backend {

struct JaggedAttentionShape {
  int batch = 0;                     // B: sequences in the batch
  int heads = 1;                     // H: attention heads
  int dim = 0;                       // D: width of one head
  const int32_t* offsets = nullptr;  // (B + 1) token offsets, offsets[0] == 0, non-decreasing
};

struct AttentionOptions {
  int query_block = 64;  // queries per block (rows of a score block)
  int key_block = 64;    // keys per block (columns of a score block); rounded up to a multiple of 8
  float scale = 0.0f;    // multiplier of Q K^T; 0 means 1 / sqrt(dim)
  int hstu_norm = 0;     // HSTU divides A by this (HSTU's 1/N: the max sequence length); 0 means by each L_i
  // Forward kernels only: queries before this one (a multiple of query_block) are
  // skipped and their output rows left alone, so a caller holding a sequence's first
  // q_end rows of K and V computes the rows [first_query, q_end) of its output exactly
  // as the whole sequence would (sequence parallel, model/sequence_parallel.hpp).
  int first_query = 0;
};

struct AttentionScratch {
  std::vector<float> blocks;       // score blocks and per-row statistics, independent of L
  std::vector<float> bias_table;   // (max_len) HSTU bias by reversed distance
  std::vector<double> bias_grad;   // (max_len) HSTU bias gradient by reversed distance
};

enum class AttentionKind { kCausalSoftmax, kHstu };

size_t attention_scratch_bytes(AttentionKind kind, int dim, int max_len, const AttentionOptions& options = {});

void causal_attention_forward(const JaggedAttentionShape& shape, const float* q, const float* k, const float* v,
                              float* out, float* lse, AttentionScratch& scratch, const AttentionOptions& options = {});
void causal_attention_backward(const JaggedAttentionShape& shape, const float* q, const float* k, const float* v,
                               const float* out, const float* lse, const float* dout, float* dq, float* dk,
                               float* dv, AttentionScratch& scratch, const AttentionOptions& options = {});
void hstu_attention_forward(const JaggedAttentionShape& shape, const float* q, const float* k, const float* v,
                            const float* bias, int num_buckets, float* out, AttentionScratch& scratch,
                            const AttentionOptions& options = {});
void hstu_attention_backward(const JaggedAttentionShape& shape, const float* q, const float* k, const float* v,
                             const float* bias, int num_buckets, const float* dout, float* dq, float* dk, float* dv,
                             float* dbias, AttentionScratch& scratch, const AttentionOptions& options = {});
void hstu_attention_bias_backward(const JaggedAttentionShape& shape, const float* q, const float* k, const float* v,
                                  const float* bias, int num_buckets, const float* dout, float* dbias,
                                  AttentionScratch& scratch, const AttentionOptions& options = {});

}  // namespace strata::backend
