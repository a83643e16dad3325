// GEMM on the host through KokkosBlas::gemm, which hands float LayoutRight host views to
// the system BLAS (OpenBLAS here) by swapping the operands into column-major form.
#include <KokkosBlas3_gemm.hpp>

#include "backend/host/host_kernels.hpp"
#include "backend/host/impl/host_views.hpp"

namespace strata::backend::host {

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
          const float* b, float beta, float* c) {
  if (m <= 0 || n <= 0) return;
  impl::Matrix<float> cv(c, m, n);
  if (k <= 0) {
    // BLAS returns early on an empty inner dimension; the math says c = beta * c.
    Kokkos::parallel_for(impl::Range(0, int64_t(m) * n), KOKKOS_LAMBDA(int64_t i) {
      c[i] = beta == 0.0f ? 0.0f : beta * c[i];
    });
    return;
  }
  impl::Matrix<const float> av(a, trans_a ? k : m, trans_a ? m : k);
  impl::Matrix<const float> bv(b, trans_b ? n : k, trans_b ? k : n);
  KokkosBlas::gemm(trans_a ? "T" : "N", trans_b ? "T" : "N", alpha, av, bv, beta, cv);
}

}  // namespace strata::backend::host
