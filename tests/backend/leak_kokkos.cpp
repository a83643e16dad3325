// Must not compile (backend_no_leak_kokkos): Kokkos is the host backend's alone,
// and a source built as model/ and store/ are cannot see it.
#include <Kokkos_Core.hpp>
