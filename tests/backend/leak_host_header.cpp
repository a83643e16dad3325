// Must not compile (backend_no_leak_host_header): backend/host/ headers are the
// host backend's own; model/ and store/ include the neutral kernel headers.
#include "backend/host/host_kernels.hpp"
