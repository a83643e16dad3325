// OpenBLAS picks its kernels from the CPU model at load time, and a release
// that does not know a new model (0.3.21 and Intel family 6 model 207, seen on
// these machines) falls back to its generic SSE3 "Prescott" kernels: 5x slower
// GEMMs on an AVX-512 CPU. Before MPI starts, strata checks which kernels were
// chosen and, when they are generic although the CPU has AVX-512 or AVX2,
// restarts itself once with OPENBLAS_CORETYPE naming the matching kernels.
// An OPENBLAS_CORETYPE set by the user is always left alone.
#pragma once
#ifndef STRATA_BACKEND_INTERNAL
#error "backend/host/ is the host backend's own: model/, store/ and the rest include the neutral backend/*_kernels.hpp"
#endif

namespace strata::backend::host {

// Returns normally when nothing needs to change; otherwise exec()s argv[0]
// again (the process keeps its pid, environment and arguments).
void ensure_tuned_blas_kernels(char** argv);

// The kernel set OpenBLAS uses ("" when the BLAS is not OpenBLAS).
const char* blas_kernel_name();

// OpenBLAS's thread count: set_blas_threads does nothing and blas_threads
// returns 0 when the BLAS is not OpenBLAS.
void set_blas_threads(int threads);
int blas_threads();

}  // namespace strata::backend::host
