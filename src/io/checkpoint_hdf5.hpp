// HDF5 plumbing of the checkpoint file that data/hdf5_handle.hpp does not have:
// float64 and uint64 attributes, the packed compound records, dataset creation
// and row-slab transfers, and the XXH3 checksums. Private to strata_core (it
// includes hdf5.h); the public API is io/checkpoint_file.hpp.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data/hdf5_handle.hpp"
#include "io/checkpoint_format.hpp"
#include "io/checkpoint_records.hpp"

// Checksums hash the bytes as they lie in the file (little-endian); packing and
// hashing in place is only right on a little-endian host.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "checkpoint checksums assume a little-endian host");

namespace strata::io::checkpoint_hdf5 {

using data::Hdf5Handle;

// ---- attributes ------------------------------------------------------------------
void write_double_attribute(hid_t object, const std::string& name, double value);
double read_double_attribute(hid_t object, const std::string& name, const std::string& what, const std::string& fix);
void write_uint64_attribute(hid_t object, const std::string& name, uint64_t value);
uint64_t read_uint64_attribute(hid_t object, const std::string& name, const std::string& what,
                               const std::string& fix);

// ---- packed compound records (checkpoint_format.hpp gives their layout) -----------
// The file type and the memory type are the same packed type, so the bytes
// written are the bytes hashed.
Hdf5Handle trainer_record_type();
Hdf5Handle producer_record_type();
Hdf5Handle block_record_type();

void pack_trainer(const TrainerState& state, unsigned char* out);  // kTrainerRecordBytes
TrainerState unpack_trainer(const unsigned char* in);
void pack_producer(const ProducerState& state, uint64_t admission_xxh3, unsigned char* out);  // kProducerRecordBytes
ProducerState unpack_producer(const unsigned char* in, uint64_t* admission_xxh3);

// One checksum block of the sparse datasets: rows [first_row, first_row + rows)
// and the XXH3-64 of those rows of each sparse column (table, key, values,
// optimizer_state, access_count).
struct BlockRecord {
  int64_t first_row = 0;
  int64_t rows = 0;
  uint64_t xxh3[checkpoint_format::kSparseColumns] = {};
};
void pack_block(const BlockRecord& block, unsigned char* out);  // kBlockRecordBytes
BlockRecord unpack_block(const unsigned char* in);

// ---- datasets ----------------------------------------------------------------------
// Creates dataset `name` of `dims` under `parent`: chunked by `chunk_rows` rows
// (whole in every other dimension) when chunk_rows > 0 and no dimension is 0,
// contiguous otherwise. No fill values are written (every byte is written once)
// and no timestamps (equal states give equal files).
Hdf5Handle create_dataset(hid_t parent, const std::string& name, hid_t file_type, const std::vector<hsize_t>& dims,
                          hsize_t chunk_rows, const std::string& what, const std::string& fix);

// Writes rows [first, first + rows) of `dataset` (whole in every other dimension)
// from `data` with transfer list `transfer`. rows = 0 selects nothing: how a rank
// without data takes part in a collective write.
void write_slab(hid_t dataset, hid_t memory_type, hid_t transfer, int64_t first, int64_t rows, const void* data,
                const std::string& what, const std::string& fix);
// Reads rows [first, first + rows) of `dataset` into `out` (independent transfer).
void read_slab(hid_t dataset, hid_t memory_type, int64_t first, int64_t rows, void* out, const std::string& what,
               const std::string& fix);

// The dimensions of `dataset` (at most 32; strata::Error when unreadable).
std::vector<hsize_t> dataset_dims(hid_t dataset, const std::string& what, const std::string& fix);

// ---- checksums ---------------------------------------------------------------------
uint64_t xxh3(const void* data, size_t bytes);

}  // namespace strata::io::checkpoint_hdf5
