#include "backend/host/blas_kernels.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace strata::backend::host {

const char* blas_kernel_name() {
  // Looked up at run time: the system BLAS may be another implementation.
  using CoreName = char* (*)();
  auto core_name = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return core_name ? core_name() : "";
}

void set_blas_threads(int threads) {
  using SetThreads = void (*)(int);
  auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (set != nullptr && threads > 0) set(threads);
}

int blas_threads() {
  using GetThreads = int (*)();
  auto get = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  return get ? get() : 0;
}

void ensure_tuned_blas_kernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;  // the user's (or our earlier) choice
  const char* core = blas_kernel_name();
  const bool generic = std::strcmp(core, "Prescott") == 0 || std::strcmp(core, "Core2") == 0 ||
                       std::strcmp(core, "Nehalem") == 0 || std::strcmp(core, "Katmai") == 0;
  if (!generic) return;
  __builtin_cpu_init();
  const char* wanted = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") ? "SkylakeX"
                       : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")      ? "Haswell"
                                                                                             : nullptr;
  if (!wanted) return;
  setenv("OPENBLAS_CORETYPE", wanted, 1);
  if (std::getenv("OMPI_COMM_WORLD_RANK") == nullptr || std::strcmp(std::getenv("OMPI_COMM_WORLD_RANK"), "0") == 0) {
    std::fprintf(stderr, "strata: OpenBLAS chose its generic %s kernels on a CPU with %s; restarting with "
                         "OPENBLAS_CORETYPE=%s (set OPENBLAS_CORETYPE yourself to choose)\n", core,
                 std::strcmp(wanted, "SkylakeX") == 0 ? "AVX-512" : "AVX2", wanted);
  }
  execv("/proc/self/exe", argv);
  // exec failed: carry on with the generic kernels.
}

}  // namespace strata::backend::host
