// Host attention kernels over jagged batches of sequences: causal multi-head softmax
// attention (SASRec) and HSTU's pointwise SiLU attention with a relative-position bias.
//
// Jagged layout. A batch of B sequences is stored without padding: token t of the batch
// (t in [0, offsets[B])) is one row of every activation, and sequence b owns the rows
// [offsets[b], offsets[b+1]). Q, K, V, O and their gradients are (total_tokens, heads *
// dim) row-major, head h of token t at t * heads * dim + h * dim (the layout of a linear
// projection's output, so no transposes are needed around the kernels). Attention never
// crosses sequences and, being causal, a query attends to keys at its own position or
// before.
//
// Memory linear in L. The kernels walk each (sequence, head) in blocks of
// options.query_block queries x options.key_block keys and never hold more than a few
// score blocks: the softmax kernels run FlashAttention-2's online softmax (a running max
// and sum per query row; forward keeps only the per-row logsumexp, backward recomputes
// the scores block by block), the HSTU kernels need no row statistics at all. Scratch
// does not grow with L for softmax attention and grows linearly (the bias table and its
// gradient) for HSTU; attention_scratch_bytes says how much. Block products go through
// cblas_sgemm on strided views of the caller's buffers.
//
// Determinism. Every output element is produced by one fixed sequence of operations:
// blocks are visited in a fixed order, the element-wise parts are compiled twice
// (generic x86-64 and AVX2, see impl/cpu_dispatch.hpp) from the same lane-wise code,
// and exp is a polynomial of ours rather than libm's. Same inputs and block sizes give
// bit-identical outputs, with or without AVX2. The kernels are single-threaded: OpenBLAS
// runs GEMMs of up to 2^18 multiply-adds (64 x 64 blocks at dim 64) on the calling
// thread, and bigger ones, when it has threads, it splits only over rows and columns of
// C, which leaves every element's summation order alone. Run several calls on several threads (one scratch
// each) to use more cores; sequences and heads are independent.
//
// A double-precision naive reference of every kernel is in
// tests/backend/attention_test.cpp.
#pragma once
#ifndef STRATA_BACKEND_INTERNAL
#error "backend/host/ is the host backend's own: model/, store/ and the rest include the neutral backend/*_kernels.hpp"
#endif

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/attention_kernels.hpp"

namespace strata::backend::host {

// The types are the neutral interface's (backend/attention_kernels.hpp); these
// are its host implementations.
using backend::AttentionKind;
using backend::AttentionOptions;
using backend::AttentionScratch;
using backend::JaggedAttentionShape;

// Bytes of scratch the kernels of `kind` use for a batch whose longest sequence has
// max_len tokens: constant in max_len for softmax attention, linear for HSTU.
size_t attention_scratch_bytes(AttentionKind kind, int dim, int max_len,
                               const AttentionOptions& options = {});

// ---- causal softmax attention --------------------------------------------------------
// out = softmax(scale * Q K^T + causal mask) V per sequence and head.
//   q, k, v, out: (total_tokens, heads * dim);
//   lse: (total_tokens, heads) per-row logsumexp of the scaled scores, kept for backward.
void causal_attention_forward(const JaggedAttentionShape& shape, const float* q, const float* k,
                              const float* v, float* out, float* lse, AttentionScratch& scratch,
                              const AttentionOptions& options = {});

// dq, dk, dv (total_tokens, heads * dim) overwritten with the gradients given dout, the
// forward's inputs and its out and lse.
void causal_attention_backward(const JaggedAttentionShape& shape, const float* q, const float* k,
                               const float* v, const float* out, const float* lse,
                               const float* dout, float* dq, float* dk, float* dv,
                               AttentionScratch& scratch, const AttentionOptions& options = {});

// ---- HSTU pointwise attention ----------------------------------------------------------
// Per sequence (length L_i) and head, for query i and key j <= i:
//   z_ij = scale * q_i . k_j + bias[min(i - j, num_buckets - 1)],
//   a_ij = SiLU(z_ij) / N   (N = L_i, or options.hstu_norm when set; no softmax),
//   out_i = sum_j a_ij v_j.
// bias (num_buckets) is the learned relative-position bias, shared by heads and
// sequences; nullptr (or num_buckets == 0) means no bias.
void hstu_attention_forward(const JaggedAttentionShape& shape, const float* q, const float* k,
                            const float* v, const float* bias, int num_buckets, float* out,
                            AttentionScratch& scratch, const AttentionOptions& options = {});

// dq, dk, dv (total_tokens, heads * dim) and dbias (num_buckets, when not nullptr)
// overwritten with the gradients given dout. dbias is summed in double over the batch in
// a fixed order and rounded once.
void hstu_attention_backward(const JaggedAttentionShape& shape, const float* q, const float* k,
                             const float* v, const float* bias, int num_buckets,
                             const float* dout, float* dq, float* dk, float* dv, float* dbias,
                             AttentionScratch& scratch, const AttentionOptions& options = {});

// dbias (num_buckets) alone, overwritten with exactly what hstu_attention_backward writes
// for the same inputs (the same score blocks, in the same order, summed in double the
// same way), without the products for dq, dk and dv: a third of the backward's GEMMs.
void hstu_attention_bias_backward(const JaggedAttentionShape& shape, const float* q, const float* k,
                                  const float* v, const float* bias, int num_buckets, const float* dout,
                                  float* dbias, AttentionScratch& scratch, const AttentionOptions& options = {});

// Testing hook: the element-wise parts use their AVX2 build where the CPU has AVX2
// unless this is set to false; both builds give bit-identical results.
void allow_avx2_attention_kernels(bool allow);

}  // namespace strata::backend::host
