// Run-time choice between a generic x86-64 build of a hot loop and an AVX2 build of the
// same source, for binaries compiled without -mavx2 (Debian's default). The AVX2 build
// has no FMA, so both build the same multiplies and adds in the same order and give
// bit-identical results: only the vector width differs.
#pragma once
#ifndef STRATA_BACKEND_INTERNAL
#error "backend/host/ is the host backend's own: model/, store/ and the rest include the neutral backend/*_kernels.hpp"
#endif

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__AVX2__)
#define STRATA_HOST_AVX2_CLONE 1
#define STRATA_TARGET_AVX2 __attribute__((target("avx2")))
#else
#define STRATA_HOST_AVX2_CLONE 0
#define STRATA_TARGET_AVX2
#endif

#if defined(__GNUC__)
#define STRATA_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define STRATA_ALWAYS_INLINE inline
#endif

namespace strata::backend::host::impl {

inline bool cpu_has_avx2() {
#if STRATA_HOST_AVX2_CLONE
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
#else
  return false;
#endif
}

}  // namespace strata::backend::host::impl
