// Host kernels of the sparse optimizers (backend/sparse_optimizer_kernels.hpp):
// SGD and Adagrad (four lanes at a time where SSE2 exists) and lazy Adam on embedding rows.
#pragma once
#ifndef STRATA_BACKEND_INTERNAL
#error "backend/host/ is the host backend's own: model/, store/ and the rest include the neutral backend/*_kernels.hpp"
#endif

#include "backend/sparse_optimizer_kernels.hpp"

namespace strata::backend::host {

void sparse_optimizer_apply_row(const SparseOptimizerParams& p, float* values, float* state, const float* grad,
                                int dim);
void sparse_optimizer_step(const SparseOptimizerParams& p, float* arena, int width, const int32_t* slots, size_t n,
                           int dim, const float* grads);
void scatter_sparse_optimizer_step(const SparseOptimizerParams& p, float* arena, int width, const int32_t* slots,
                                   size_t n, int dim, const float* grads, ScatterOptimizerScratch& scratch);

}  // namespace strata::backend::host
