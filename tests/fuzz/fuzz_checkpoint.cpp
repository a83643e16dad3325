// Fuzz target: a checkpoint file given to --resume (validate_checkpoint, as a resume
// and `strata ckpt verify` call it), and the same bytes as a converted HDF5 dataset.
#include <mpi.h>

#include <cstdint>

#include "common/error.hpp"
#include "config/options.hpp"
#include "data/hdf5_dataset.hpp"
#include "fuzz_util.hpp"
#include "io/checkpoint_validation.hpp"

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  MPI_Init(argc, argv);  // the HDF5 build is parallel: its file driver needs MPI
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = strata::fuzz::write_input(data, size, ".h5");
  try {
    strata::io::validate_checkpoint(path, {}, /*verify_rows=*/true);
  } catch (const strata::Error&) {
  }
  strata::DataOptions options;
  options.source = "hdf5";
  options.train = path;
  try {
    strata::data::open_hdf5_reader(options, path, 0, 1);
  } catch (const strata::Error&) {
  }
  return 0;
}
