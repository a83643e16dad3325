// Kokkos types shared by the host kernels' .cpp files (never include from a header
// outside backend/host: Kokkos is heavy to compile).
#pragma once
#ifndef STRATA_BACKEND_INTERNAL
#error "backend/host/ is the host backend's own: model/, store/ and the rest include the neutral backend/*_kernels.hpp"
#endif

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <type_traits>

namespace strata::backend::host::impl {

using ExecSpace = Kokkos::DefaultHostExecutionSpace;
using Range = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<int64_t>>;

// Non-owning row-major views over caller buffers.
template <class T>
using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, Kokkos::HostSpace,
                            Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class T>
using Vector = Kokkos::View<T*, Kokkos::LayoutRight, Kokkos::HostSpace,
                            Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

// True when the host execution space runs one thread: then a sequential pass is both
// the fastest and trivially race-free.
inline constexpr bool kSerialHost =
#if defined(KOKKOS_ENABLE_SERIAL)
    std::is_same<ExecSpace, Kokkos::Serial>::value;
#else
    false;
#endif

}  // namespace strata::backend::host::impl
