// Which backend runs the neutral kernels (runtime.device): the host (Kokkos) or
// CUDA. model/ and store/ call the kernel-family headers beside this one
// (dense_kernels.hpp, attention_kernels.hpp, embedding_kernels.hpp,
// row_kernels.hpp, sparse_optimizer_kernels.hpp); every
// call goes to the kernels of the device selected here, the host by default.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace strata::backend {

enum class Device { kHost, kCuda };

// "host" | "cuda"; anything else is a strata::Error naming runtime.device.
Device parse_device(const std::string& name);
const char* device_name(Device device);

// True when this build compiled the CUDA backend (STRATA_HAVE_CUDA).
bool cuda_built();
// Empty when CUDA kernels can run here; else why not (no CUDA build, no GPU, no driver).
std::string cuda_unavailable_reason();

// Makes `device` the one every neutral kernel call dispatches to (process-wide;
// call it before the first kernel). kCuda where cuda_unavailable_reason() is not
// empty: strata::Error naming runtime.device and saying why.
void select_device(Device device);
Device active_device();

// The free memory of each GPU of this node, bytes (empty without a CUDA build or a GPU).
std::vector<size_t> gpu_free_bytes();
// The HBM budget rule of runtime.device = cuda: the node's trainers share its GPUs
// round-robin, so a GPU holds ceil(trainers / GPUs) L1 tiers of l1_mb MiB each,
// which must fit the smallest free memory. Empty when they fit, else the message of
// the strata::Error that names store.l1_mb (with no GPU: empty, select_device says why).
std::string hbm_budget_problem(double l1_mb, int trainers_on_node, const std::vector<size_t>& free_bytes);

// Once per process, before MPI_Init: picks the BLAS kernels for this CPU (may
// exec argv[0] again once, see host/blas_kernels.hpp).
void prepare_process(char** argv);
// The host BLAS's threads per process. Every strata rank is a process, and the
// ranks of a node share its cores: OpenBLAS's own default (one thread per core
// in each process) oversubscribes them, and its idle threads spin in sched_yield
// (measured on a 2-core machine, 4 ranks: 5.4 M sched_yield calls in 4 s, and
// the job 1.4x slower). choose_host_blas_threads: `requested` > 0 wins; 0 (auto)
// leaves a count the environment sets (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS:
// returns 0, change nothing), else the cores this process may run on over the
// ranks of its node, at least 1.
int choose_host_blas_threads(int requested, bool environment_sets_threads, int cores, int ranks_on_node);
// Applies it to the BLAS (OpenBLAS, found at run time; another BLAS is left
// alone) and returns the threads the BLAS now runs (0: not OpenBLAS).
int configure_host_blas_threads(int requested, int ranks_on_node);
int host_blas_threads();

// Around everything that runs kernels: the host backend's runtime (Kokkos),
// which no code outside src/backend sees.
void initialize_runtime(int& argc, char** argv);
void finalize_runtime();

}  // namespace strata::backend
