# Finds every dependency of strata (all from Debian packages, see scripts/deps.sh)
# and papers over the packaging bugs listed in docs/STACK.md.

find_package(MPI REQUIRED COMPONENTS C CXX)

set(HDF5_PREFER_PARALLEL TRUE)
find_package(HDF5 REQUIRED COMPONENTS C)
if(NOT HDF5_IS_PARALLEL)
  message(FATAL_ERROR "strata needs parallel HDF5 (Debian: libhdf5-openmpi-dev); found a serial one at ${HDF5_INCLUDE_DIRS}")
endif()

find_package(Boost 1.74 REQUIRED COMPONENTS program_options)

find_package(Kokkos REQUIRED)
find_package(KokkosKernels REQUIRED)
# Trilinos' exported Kokkos::kokkos names an include dir that does not exist.
cmake_path(NORMAL_PATH Kokkos_INCLUDE_DIRS OUTPUT_VARIABLE STRATA_KOKKOS_INCLUDE)
set_target_properties(Kokkos::kokkos PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${STRATA_KOKKOS_INCLUDE}")
if(NOT TARGET Kokkos::kokkoskernels)
  add_library(Kokkos::kokkoskernels INTERFACE IMPORTED)
  target_link_libraries(Kokkos::kokkoskernels INTERFACE trilinos_kokkoskernels Kokkos::kokkos)
endif()

set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)

find_package(nlohmann_json 3 REQUIRED)
find_package(spdlog REQUIRED)
find_package(fmt REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)

find_path(XXHASH_INCLUDE_DIR xxhash.h REQUIRED)
find_library(XXHASH_LIBRARY xxhash REQUIRED)
add_library(strata::xxhash UNKNOWN IMPORTED)
set_target_properties(strata::xxhash PROPERTIES IMPORTED_LOCATION "${XXHASH_LIBRARY}"
                      INTERFACE_INCLUDE_DIRECTORIES "${XXHASH_INCLUDE_DIR}")

# Embedded Python: Debian's interpreter (it has python3-optuna), never the pyenv one on PATH.
set(STRATA_HAVE_PYTHON OFF)
if(NOT STRATA_ENABLE_PYTHON STREQUAL "OFF")
  set(Python3_EXECUTABLE /usr/bin/python3)
  if(STRATA_ENABLE_PYTHON STREQUAL "ON")
    find_package(Python3 3.11 REQUIRED COMPONENTS Interpreter Development.Embed)
  else()
    find_package(Python3 3.11 COMPONENTS Interpreter Development.Embed)
  endif()
  if(Python3_FOUND)
    set(STRATA_HAVE_PYTHON ON)
  endif()
endif()
set(STRATA_PYTHON_EXECUTABLE /usr/bin/python3)

# CUDA: compiled and linked whenever nvcc exists, even on machines without a GPU.
set(STRATA_HAVE_CUDA OFF)
if(NOT STRATA_ENABLE_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)  # else cudart is linked twice
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} REQUIRED)
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
    set(STRATA_HAVE_CUDA ON)
  elseif(STRATA_ENABLE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "STRATA_ENABLE_CUDA=ON but no CUDA compiler was found (is nvcc on PATH?)")
  endif()
endif()

message(STATUS "strata: CUDA backend ${STRATA_HAVE_CUDA}, embedded Python ${STRATA_HAVE_PYTHON} (${STRATA_PYTHON_EXECUTABLE})")
