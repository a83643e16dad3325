// validate_checkpoint and the reader against broken files: missing, not HDF5,
// truncated, flipped bytes in metadata and in raw data, foreign HDF5 files, a
// newer format version, datasets that disagree with the header, absurd sizes,
// and a run whose shapes differ. Every case must be a strata::Error naming the
// file and what is wrong. Also: the file is readable by h5dump and h5py.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>

#include <fstream>
#include <functional>
#include <iterator>

#include "checkpoint_fixture.hpp"

namespace strata::io {
namespace {

using testing::CheckpointCase;
using testing::ScratchDirectory;

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// Offset of the first occurrence of `needle` in `haystack` (fails the test when absent).
size_t find_bytes(const std::vector<char>& haystack, const void* needle, size_t size) {
  const char* n = static_cast<const char*>(needle);
  const auto at = std::search(haystack.begin(), haystack.end(), n, n + size);
  EXPECT_NE(at, haystack.end()) << "pattern not found in the file";
  return at == haystack.end() ? 0 : size_t(at - haystack.begin());
}

class CheckpointValidation : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<ScratchDirectory>(MPI_COMM_SELF);
    good_ = dir_->file("ckpt-0000000500.h5");
    c_.world = 1;
    CheckpointWriterOptions options;
    options.block_rows = 16;
    c_.write(MPI_COMM_SELF, good_, options);
    bytes_ = read_bytes(good_);
  }

  // A copy of the good file with `change` applied to its bytes.
  std::string corrupt(const std::string& name, const std::function<void(std::vector<char>&)>& change) {
    std::vector<char> bytes = bytes_;
    change(bytes);
    const std::string path = dir_->file(name);
    write_bytes(path, bytes);
    return path;
  }

  // A copy of the good file edited through HDF5.
  std::string edited(const std::string& name, const std::function<void(hid_t)>& edit) {
    const std::string path = dir_->file(name);
    write_bytes(path, bytes_);
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    EXPECT_GE(file, 0);
    edit(file);
    H5Fclose(file);
    return path;
  }

  static void set_int_attribute(hid_t object, const char* name, int64_t value) {
    const hid_t attribute = H5Aopen(object, name, H5P_DEFAULT);
    ASSERT_GE(attribute, 0) << name;
    EXPECT_GE(H5Awrite(attribute, H5T_NATIVE_INT64, &value), 0);
    H5Aclose(attribute);
  }

  ExpectedShape matching() const {
    return ExpectedShape{int64_t(c_.dense_values().size()), 13, c_.dim, c_.width, c_.num_tables, "adam", "adagrad"};
  }

  // validate_checkpoint(path) must throw an Error that names the file and contains every one of `parts`.
  void expect_rejected(const std::string& path, const std::vector<std::string>& parts, const ExpectedShape& expected,
                       bool verify_rows = false) {
    try {
      validate_checkpoint(path, expected, verify_rows);
      ADD_FAILURE() << "accepted: " << path;
    } catch (const Error& e) {
      const std::string text = e.what();
      EXPECT_NE(text.find(path), std::string::npos) << "the error does not name the file: " << text;
      EXPECT_FALSE(e.how_to_fix().empty()) << text;
      for (const std::string& part : parts) EXPECT_NE(text.find(part), std::string::npos) << text;
    }
  }
  void expect_rejected(const std::string& path, const std::vector<std::string>& parts) {
    expect_rejected(path, parts, matching());
  }

  CheckpointCase c_;
  std::unique_ptr<ScratchDirectory> dir_;
  std::string good_;
  std::vector<char> bytes_;
};

TEST_F(CheckpointValidation, GoodFilePasses) {
  validate_checkpoint(good_, matching(), /*verify_rows=*/true);
  validate_checkpoint(good_, ExpectedShape{});
}

TEST_F(CheckpointValidation, MissingTextAndEmptyFiles) {
  expect_rejected(dir_->file("nothing.h5"), {"does not exist"});
  expect_rejected(dir_->path(), {"is not a regular file"});
  const std::string text = dir_->file("deck.ini");
  std::ofstream(text) << "[model]\nembedding_dim = 4\n";
  expect_rejected(text, {"is not an HDF5 file"});
  const std::string empty = dir_->file("empty.h5");
  std::ofstream{empty};
  expect_rejected(empty, {"is not an HDF5 file", "0 bytes"});
}

TEST_F(CheckpointValidation, TruncatedFiles) {
  expect_rejected(corrupt("half.h5", [](std::vector<char>& b) { b.resize(b.size() / 2); }), {"truncated"});
  expect_rejected(corrupt("short.h5", [](std::vector<char>& b) { b.resize(b.size() - 100); }), {"truncated"});
}

TEST_F(CheckpointValidation, FlippedMetadataBytes) {
  // The superblock (version 2, checksummed) and an object header (OHDR, checksummed).
  expect_rejected(corrupt("superblock.h5", [](std::vector<char>& b) { b[20] ^= 0x10; }),
                  {"HDF5 cannot open it", "checksum"});
  const char ohdr[] = {'O', 'H', 'D', 'R'};
  const size_t header = find_bytes(bytes_, ohdr, 4);
  expect_rejected(corrupt("object-header.h5", [&](std::vector<char>& b) { b[header + 7] ^= 0x01; }),
                  {"root group is unreadable", "checksum"});
}

TEST_F(CheckpointValidation, FlippedRowBytesAreFoundWhenRowsAreRead) {
  // A sparse value in the middle of the file's rows: HDF5 cannot see it (raw data
  // has no checksum of its own), the per-block XXH3 can.
  const SparseRows rows = c_.rows_on(0);
  const size_t row = 37;
  std::vector<float> pattern(rows.values.begin() + ptrdiff_t(row * size_t(c_.width)),
                             rows.values.begin() + ptrdiff_t(row * size_t(c_.width) + size_t(c_.dim)));
  const size_t at = find_bytes(bytes_, pattern.data(), pattern.size() * sizeof(float));
  const std::string path = corrupt("row-flip.h5", [&](std::vector<char>& b) { b[at + 5] ^= 0x04; });
  validate_checkpoint(path, matching());  // rows are not read: not detected (documented)
  expect_rejected(path, {"/sparse/values", "rows [32, 48)", "checksum"}, matching(), /*verify_rows=*/true);
  const CheckpointReader reader(MPI_COMM_SELF, path);
  EXPECT_NO_THROW(reader.read_rows(0, 32));
  EXPECT_THROW(reader.read_rows(40, 41), Error);  // the block is read whole
  EXPECT_THROW(checkpoint_params_digest(path), Error);
}

TEST_F(CheckpointValidation, RowSharesCheckEveryBlockOnce) {
  // 100 rows in blocks of 16: seven blocks, the third ([32, 48)) damaged. However
  // many ranks split the check, exactly the one whose share holds it fails.
  const SparseRows rows = c_.rows_on(0);
  std::vector<float> pattern(rows.values.begin() + ptrdiff_t(37 * size_t(c_.width)),
                             rows.values.begin() + ptrdiff_t(37 * size_t(c_.width) + size_t(c_.dim)));
  const size_t at = find_bytes(bytes_, pattern.data(), pattern.size() * sizeof(float));
  const std::string path = corrupt("share-flip.h5", [&](std::vector<char>& b) { b[at + 1] ^= 0x10; });
  const CheckpointReader good(MPI_COMM_SELF, good_), damaged(MPI_COMM_SELF, path);
  constexpr int kBlocks = 7, kDamagedBlock = 2;
  for (int parts = 1; parts <= 9; ++parts) {
    int failed = 0;
    for (int part = 0; part < parts; ++part) {
      EXPECT_NO_THROW(good.verify_rows(part, parts)) << part << " of " << parts;
      const bool holds = kBlocks * part / parts <= kDamagedBlock && kDamagedBlock < kBlocks * (part + 1) / parts;
      try {
        damaged.verify_rows(part, parts);
        EXPECT_FALSE(holds) << "share " << part << " of " << parts << " missed the damaged block";
      } catch (const Error& e) {
        failed += 1;
        EXPECT_TRUE(holds) << e.what();
        EXPECT_NE(std::string(e.what()).find("rows [32, 48) of /sparse/values"), std::string::npos) << e.what();
      }
    }
    EXPECT_EQ(failed, 1) << parts << " parts";
  }
  EXPECT_THROW(good.verify_rows(2, 2), Error);
  EXPECT_THROW(good.verify_rows(0, 0), Error);
}

TEST_F(CheckpointValidation, FlippedDenseAndProducerBytesAreFoundByValidation) {
  const std::vector<float> dense = c_.dense_values();
  const size_t at = find_bytes(bytes_, dense.data() + 40, 8 * sizeof(float));
  expect_rejected(corrupt("dense-flip.h5", [&](std::vector<char>& b) { b[at + 2] ^= 0x20; }),
                  {"/dense/values does not match its xxh3_64 checksum"});
  const std::vector<uint32_t> counters = c_.admission(0);
  const size_t sketch = find_bytes(bytes_, counters.data() + 10, 8 * sizeof(uint32_t));
  expect_rejected(corrupt("admission-flip.h5", [&](std::vector<char>& b) { b[sketch] ^= 0x01; }),
                  {"/producers/admission", "checksum"});
}

TEST_F(CheckpointValidation, ForeignHdf5Files) {
  const std::string plain = dir_->file("plain.h5");
  const hid_t file = H5Fcreate(plain.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t dims = 4;
  const hid_t space = H5Screate_simple(1, &dims, nullptr);
  const hid_t set = H5Dcreate2(file, "weights", H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dclose(set);
  H5Sclose(space);
  H5Fclose(file);
  expect_rejected(plain, {"is an HDF5 file but not a strata checkpoint"});

  const std::string other = edited("dataset.h5", [](hid_t f) {
    H5Adelete(f, "format");
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, 23);
    const hid_t attribute = H5Acreate2(f, "format", type, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(attribute, type, "strata columnar dataset");
    H5Aclose(attribute);
    H5Tclose(type);
    H5Sclose(space);
  });
  expect_rejected(other, {"holding a 'strata columnar dataset', not a strata checkpoint"});
}

TEST_F(CheckpointValidation, NewerFormatVersion) {
  const std::string path = edited("v2.h5", [](hid_t f) { set_int_attribute(f, "format_version", 2); });
  expect_rejected(path, {"format version 2", "written by strata 0.1.0-test", "reads versions up to 1"});
  EXPECT_THROW(CheckpointReader(MPI_COMM_SELF, path), Error);
}

TEST_F(CheckpointValidation, DatasetsThatDisagreeWithTheHeader) {
  expect_rejected(edited("dim.h5", [](hid_t f) { set_int_attribute(f, "embedding_dim", 5); }),
                  {"/sparse/values has shape (100, 4), expected (100, 5)"}, ExpectedShape{});
  expect_rejected(edited("producers.h5", [](hid_t f) { set_int_attribute(f, "producers", 3); }),
                  {"/producers/state has shape (1), expected (3)"}, ExpectedShape{});
  expect_rejected(edited("steps.h5", [](hid_t f) { set_int_attribute(f, "dense_optimizer_steps", 7); }),
                  {"/dense/optimizer_state is for optimizer 'adam' after 500 steps, the header says 'adam' after 7"},
                  ExpectedShape{});
  expect_rejected(edited("no-keys.h5", [](hid_t f) { H5Ldelete(f, "sparse/key", H5P_DEFAULT); }),
                  {"dataset 'key' is missing"}, ExpectedShape{});
  expect_rejected(edited("no-admission.h5", [](hid_t f) { set_int_attribute(f, "admission_counters", 0); }),
                  {"/producers/admission is present but the header's admission_counters is 0"}, ExpectedShape{});
}

TEST_F(CheckpointValidation, AbsurdSizesAreRefusedBeforeAllocating) {
  expect_rejected(edited("tables.h5", [](hid_t f) { set_int_attribute(f, "num_tables", int64_t(1) << 40); }),
                  {"num_tables", "is outside"}, ExpectedShape{});
  expect_rejected(edited("width.h5", [](hid_t f) { set_int_attribute(f, "row_width", int64_t(1) << 30); }),
                  {"row_width"}, ExpectedShape{});
  expect_rejected(edited("blocks.h5", [](hid_t f) {
                    const hid_t sparse = H5Gopen2(f, "sparse", H5P_DEFAULT);
                    set_int_attribute(sparse, "block_rows", 0);
                    H5Gclose(sparse);
                  }),
                  {"block_rows"}, ExpectedShape{});
  expect_rejected(edited("vectors.h5", [](hid_t f) {
                    const hid_t set = H5Dopen2(f, "dense/optimizer_state", H5P_DEFAULT);
                    set_int_attribute(set, "vectors", 1000000);
                    H5Dclose(set);
                  }),
                  {"/dense/optimizer_state holds"}, ExpectedShape{});
}

TEST_F(CheckpointValidation, ShapesOfAnotherRun) {
  ExpectedShape dense = matching();
  dense.dense_values += 1;
  expect_rejected(good_, {"the dense size", "is 145, this run has 146"}, dense);
  ExpectedShape dim = matching();
  dim.embedding_dim = 8;
  expect_rejected(good_, {"embedding_dim is 4, this run has 8"}, dim);
  ExpectedShape width = matching();
  width.row_width = 8;
  expect_rejected(good_, {"row_width", "is 12, this run has 8"}, width);
  ExpectedShape tables = matching();
  tables.num_tables = 26;
  expect_rejected(good_, {"num_tables is 5, this run has 26"}, tables);
  ExpectedShape optimizer = matching();
  optimizer.sparse_optimizer = "sgd";
  expect_rejected(good_, {"sparse_optimizer is 'adagrad', this run uses 'sgd'"}, optimizer);
}

// The layout docs/CHECKPOINT.md promises, as h5dump and h5py see it.
TEST_F(CheckpointValidation, ReadableWithH5dumpAndH5py) {
  if (std::system("command -v h5dump > /dev/null 2>&1") != 0) GTEST_SKIP() << "h5dump is not installed";
  EXPECT_EQ(std::system(("h5dump -H '" + good_ + "' > /dev/null").c_str()), 0);
  if (std::system("/usr/bin/python3 -c 'import h5py' > /dev/null 2>&1") != 0) GTEST_SKIP() << "h5py is not installed";
  const std::string script =
      "import h5py, sys\n"
      "f = h5py.File(sys.argv[1], 'r')\n"
      "assert f.attrs['format'] == b'strata-checkpoint', f.attrs['format']\n"
      "assert f.attrs['step'] == 500 and f.attrs['embedding_dim'] == 4\n"
      "assert f['rng'].attrs['train_seed'] == 0xfedcba9876543210\n"
      "assert f['dense/layers/bottom.0.weight'].shape == (8, 13)\n"
      "bias, values = f['dense/layers/bottom.0.bias'][:], f['dense/values'][104:112]\n"
      "assert (bias.view('u4') == values.view('u4')).all()  # bit for bit (NaN payloads too)\n"
      "assert f['dense/optimizer_state'].shape == (2 * 145,)\n"
      "assert f['sparse/values'].shape == (100, 4) and f['sparse/optimizer_state'].shape == (100, 8)\n"
      "assert f['sparse/key'].dtype == 'uint64' and f['sparse/table'].dtype == 'uint32'\n"
      "assert f['sparse/checksums']['rows'].sum() == 100\n"
      "assert f['producers/state']['byte_offset'][0] == 123456789012\n"
      "assert f['producers/admission'].shape == (1, 64)\n"
      "assert f['trainer/state']['last_levels'][0][1] == 0.25\n";
  const std::string script_path = dir_->file("check.py");
  std::ofstream(script_path) << script;
  EXPECT_EQ(std::system(("/usr/bin/python3 '" + script_path + "' '" + good_ + "'").c_str()), 0);
}

}  // namespace
}  // namespace strata::io
