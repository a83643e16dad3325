// CheckpointReader: opening validates the file completely (signature, format,
// version, header ranges, every dataset's type and shape against the header and
// against the others, checksum blocks covering the rows, sizes that fit in the
// file) before anything is sized from it; reads verify XXH3 checksums.
#include "io/checkpoint_reader.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>

#include "common/error.hpp"
#include "io/checkpoint_format.hpp"
#include "io/checkpoint_hdf5.hpp"
#include "strata/config.hpp"

namespace strata::io {

namespace fmt = checkpoint_format;
using checkpoint_hdf5::BlockRecord;
using checkpoint_hdf5::dataset_dims;
using checkpoint_hdf5::read_slab;
using checkpoint_hdf5::xxh3;
using data::Hdf5Handle;
using data::hdf5_check;
using data::hdf5_check_status;
using data::hdf5_failure;
using data::hdf5_has_attribute;
using data::hdf5_has_link;
using data::hdf5_read_int_attribute;
using data::hdf5_read_string_attribute;
using data::Hdf5QuietErrors;

namespace {

constexpr const char* kDamagedFix =
    "the file is damaged or incomplete: resume from an older checkpoint (--resume=latest or a directory falls back "
    "to the previous one by itself) or start without --resume";
constexpr const char* kForeignFix =
    "--resume takes a checkpoint written by strata (ckpt-<step>.h5), its directory, or 'latest'";
// Bytes per read call: MPI-IO counts are ints.
constexpr int64_t kPieceBytes = int64_t(256) << 20;

enum class Element { kFloat32, kUint32, kUint64, kCompound };

const char* element_name(Element element) {
  switch (element) {
    case Element::kFloat32: return "float32";
    case Element::kUint32: return "uint32";
    case Element::kUint64: return "uint64";
    case Element::kCompound: return "a compound record";
  }
  return "?";
}

size_t element_bytes(Element element, size_t compound_bytes) {
  switch (element) {
    case Element::kFloat32:
    case Element::kUint32: return 4;
    case Element::kUint64: return 8;
    case Element::kCompound: return compound_bytes;
  }
  return 1;
}

// An open dataset with its validated dimensions.
struct Column {
  Hdf5Handle set;
  std::vector<int64_t> dims;
  std::string name;  // "/group/dataset", for messages
  uint64_t xxh3 = 0; // its xxh3_64 attribute (whole-dataset checksums only)
  int64_t rows() const { return dims.empty() ? 0 : dims[0]; }
  int64_t elements() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
};

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string text = "(";
  for (size_t d = 0; d < dims.size(); ++d) text += (d ? ", " : "") + (dims[d] < 0 ? std::string("any") : std::to_string(dims[d]));
  return text + ")";
}

}  // namespace

class CheckpointReader::Impl {
 public:
  Impl(MPI_Comm comm, const std::string& path) : path_(path) {
    const Hdf5QuietErrors quiet;
    open_file(comm);
    read_header();
    open_dense();
    open_trainer();
    open_sparse();
    open_producers();
    if (logical_bytes_ > file_bytes_) {
      damaged("its datasets hold " + std::to_string(logical_bytes_) + " bytes but the file has only " +
              std::to_string(file_bytes_) + ": it is truncated or its shapes are damaged");
    }
    read_blocks();
  }

  const std::string& path() const { return path_; }
  const CheckpointHeader& header() const { return header_; }
  uint64_t file_bytes() const { return file_bytes_; }

  int64_t num_dense_values() const { return dense_values_.rows(); }

  std::vector<model::ParameterSlice> dense_slices() const {
    std::vector<model::ParameterSlice> slices;
    for (const Layer& layer : layers_) slices.push_back(layer.slice);
    return slices;
  }

  std::vector<float> dense_values() const { return read_floats(dense_values_); }
  std::vector<float> dense_optimizer_state() const { return read_floats(dense_state_); }

  TrainerState trainer_state() const {
    const Hdf5QuietErrors quiet;
    Hdf5Handle type = checkpoint_hdf5::trainer_record_type();
    unsigned char record[fmt::kTrainerRecordBytes] = {};
    read_slab(trainer_.set.get(), type.get(), 0, 1, record, what_reading(trainer_), kDamagedFix);
    check_sum(trainer_, xxh3(record, sizeof(record)));
    return checkpoint_hdf5::unpack_trainer(record);
  }

  int64_t num_rows() const { return num_rows_; }

  SparseRows read_rows(int64_t begin, int64_t end) const {
    const Hdf5QuietErrors quiet;
    if (begin < 0 || end < begin || end > num_rows_) {
      throw Error(where() + ": rows [" + std::to_string(begin) + ", " + std::to_string(end) + ") asked for, it has " +
                      std::to_string(num_rows_),
                  "ask for a range inside [0, num_rows())");
    }
    const int64_t width = header_.row_width, dim = header_.embedding_dim, state_width = width - dim;
    SparseRows out;
    out.width = int(width);
    out.ids.resize(size_t(end - begin));
    out.values.resize(size_t((end - begin) * width));
    out.counts.resize(size_t(end - begin));
    if (begin == end) return out;
    // The block holding `begin`, then every block up to `end`, each read whole and verified.
    auto block = std::upper_bound(blocks_.begin(), blocks_.end(), begin,
                                  [](int64_t row, const BlockRecord& b) { return row < b.first_row; }) - 1;
    std::vector<uint32_t> tables;     // (block rows)
    std::vector<uint64_t> keys;       // (block rows)
    std::vector<float> values;        // (block rows, dim)
    std::vector<float> state;         // (block rows, width - dim)
    std::vector<uint64_t> counts;     // (block rows)
    for (; block != blocks_.end() && block->first_row < end; ++block) {
      const int64_t first = block->first_row, rows = block->rows;
      tables.resize(size_t(rows));
      keys.resize(size_t(rows));
      values.resize(size_t(rows * dim));
      state.resize(size_t(rows * state_width));
      counts.resize(size_t(rows));
      read_block(table_, H5T_NATIVE_UINT32, first, rows, tables.data(), tables.size() * 4, block->xxh3[0]);
      read_block(key_, H5T_NATIVE_UINT64, first, rows, keys.data(), keys.size() * 8, block->xxh3[1]);
      read_block(values_, H5T_NATIVE_FLOAT, first, rows, values.data(), values.size() * 4, block->xxh3[2]);
      read_block(state_, H5T_NATIVE_FLOAT, first, rows, state.data(), state.size() * 4, block->xxh3[3]);
      read_block(counts_, H5T_NATIVE_UINT64, first, rows, counts.data(), counts.size() * 8, block->xxh3[4]);
      const int64_t lo = std::max(first, begin), hi = std::min(first + rows, end);
      for (int64_t row = lo; row < hi; ++row) {
        const size_t in = size_t(row - first), at = size_t(row - begin);
        if (int64_t(tables[in]) >= header_.num_tables) {
          damaged("row " + std::to_string(row) + " is in table " + std::to_string(tables[in]) + " of " +
                  std::to_string(header_.num_tables));
        }
        out.ids[at] = {tables[in], keys[in]};
        out.counts[at] = counts[in];
        float* row_out = out.values.data() + at * size_t(width);
        std::copy(values.begin() + ptrdiff_t(in * size_t(dim)), values.begin() + ptrdiff_t((in + 1) * size_t(dim)),
                  row_out);
        std::copy(state.begin() + ptrdiff_t(in * size_t(state_width)),
                  state.begin() + ptrdiff_t((in + 1) * size_t(state_width)), row_out + dim);
      }
    }
    return out;
  }

  std::vector<ProducerState> producers(std::vector<uint64_t>* admission_xxh3 = nullptr) const {
    const Hdf5QuietErrors quiet;
    const int64_t count = producers_.rows();
    std::vector<unsigned char> records(size_t(count) * fmt::kProducerRecordBytes);  // (producers) packed
    Hdf5Handle type = checkpoint_hdf5::producer_record_type();
    read_slab(producers_.set.get(), type.get(), 0, count, records.data(), what_reading(producers_), kDamagedFix);
    check_sum(producers_, xxh3(records.data(), records.size()));
    std::vector<ProducerState> states;
    for (int64_t i = 0; i < count; ++i) {
      uint64_t hash = 0;
      states.push_back(checkpoint_hdf5::unpack_producer(records.data() + size_t(i) * fmt::kProducerRecordBytes, &hash));
      if (states.back().producer != i) {
        damaged("record " + std::to_string(i) + " of /producers/state is producer " +
                std::to_string(states.back().producer) + " (records are one per producer, in order)");
      }
      if (admission_xxh3) admission_xxh3->push_back(hash);
    }
    return states;
  }

  std::vector<uint32_t> admission_counters(int producer) const {
    const Hdf5QuietErrors quiet;
    if (!admission_.set.valid()) return {};
    if (producer < 0 || producer >= producers_.rows()) {
      throw Error(where() + ": no producer " + std::to_string(producer) + " (it holds " +
                      std::to_string(producers_.rows()) + ")",
                  "ask for a producer in 0 .. header().producers - 1");
    }
    std::vector<uint64_t> hashes;
    producers(&hashes);
    std::vector<uint32_t> counters(static_cast<size_t>(admission_.dims[1]));  // (4 * admission_counters)
    read_slab(admission_.set.get(), H5T_NATIVE_UINT32, producer, 1, counters.data(), what_reading(admission_),
              kDamagedFix);
    if (xxh3(counters.data(), counters.size() * 4) != hashes[size_t(producer)]) {
      damaged("row " + std::to_string(producer) + " of /producers/admission does not match its checksum in "
              "/producers/state (the bytes changed after they were written)");
    }
    return counters;
  }

  void verify(bool rows) const {
    const std::vector<float> values = dense_values();
    dense_optimizer_state();
    for (const Layer& layer : layers_) {
      const std::vector<float> layer_values = read_floats(layer.column);
      if (!layer_values.empty() &&
          std::memcmp(layer_values.data(), values.data() + layer.slice.offset, layer_values.size() * 4) != 0) {
        damaged(layer.column.name + " disagrees with /dense/values at offset " + std::to_string(layer.slice.offset));
      }
    }
    trainer_state();
    for (int p = 0; p < producers_.rows(); ++p) admission_counters(p);
    if (rows) verify_rows(0, 1);
  }

  void verify_rows(int part, int parts) const {
    if (parts < 1 || part < 0 || part >= parts) {
      throw Error(where() + ": share " + std::to_string(part) + " of " + std::to_string(parts) + " rows asked for",
                  "ask for a share in 0 .. parts - 1");
    }
    const size_t blocks = blocks_.size();
    const size_t first = blocks * size_t(part) / size_t(parts), last = blocks * size_t(part + 1) / size_t(parts);
    for (size_t b = first; b < last; ++b) read_rows(blocks_[b].first_row, blocks_[b].first_row + blocks_[b].rows);
  }

 private:
  struct Layer {
    model::ParameterSlice slice;
    Column column;
  };

  std::string where() const { return "checkpoint '" + path_ + "'"; }

  [[noreturn]] void damaged(const std::string& what) const { throw Error(where() + ": " + what, kDamagedFix); }

  std::string what_reading(const Column& column) const { return where() + ": cannot read " + column.name; }

  void check_sum(const Column& column, uint64_t computed) const {
    if (computed != column.xxh3) {
      damaged(column.name + " does not match its xxh3_64 checksum (the bytes changed after they were written)");
    }
  }

  void open_file(MPI_Comm comm) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::file_status status = fs::status(path_, ec);
    if (!fs::exists(status)) {
      throw Error(where() + " does not exist",
                  "check the path given to --resume (checkpoint.resume); 'strata ckpt info FILE' shows what a file holds");
    }
    if (!fs::is_regular_file(status)) {
      throw Error(where() + " is not a regular file", "name a checkpoint file (ckpt-<step>.h5), or pass a directory to --resume");
    }
    file_bytes_ = uint64_t(fs::file_size(path_, ec));
    const htri_t is_hdf5 = H5Fis_hdf5(path_.c_str());
    if (is_hdf5 <= 0) {
      hdf5_failure();
      throw Error(where() + " is not an HDF5 file (" + std::to_string(file_bytes_) + " bytes without an HDF5 signature)",
                  kForeignFix);
    }
    int initialized = 0;
    MPI_Initialized(&initialized);
    int ranks = 1;
    if (initialized && comm != MPI_COMM_SELF && comm != MPI_COMM_NULL) MPI_Comm_size(comm, &ranks);
    Hdf5Handle access;  // MPI-IO for a parallel open; HDF5's default (sec2) for a serial one
    if (ranks > 1) {
      access = Hdf5Handle(hdf5_check(H5Pcreate(H5P_FILE_ACCESS), where() + ": cannot open", kDamagedFix), H5Pclose);
      hdf5_check_status(H5Pset_fapl_mpio(access.get(), comm, MPI_INFO_NULL), where() + ": cannot open with MPI-IO",
                        "check the MPI installation");
    }
    const hid_t file = H5Fopen(path_.c_str(), H5F_ACC_RDONLY, access.valid() ? access.get() : H5P_DEFAULT);
    if (file < 0) {
      const std::string why = hdf5_failure();
      if (why.find("truncated") != std::string::npos) {
        damaged("it is truncated: the file has " + std::to_string(file_bytes_) +
                " bytes, fewer than its HDF5 superblock says (HDF5: " + why + ")");
      }
      damaged("HDF5 cannot open it (HDF5: " + why + ")");
    }
    file_ = Hdf5Handle(file, H5Fclose);
  }

  int64_t int_attribute(hid_t object, const char* name, int64_t lo, int64_t hi) const {
    const int64_t value = hdf5_read_int_attribute(object, name, where(), kDamagedFix);
    if (value < lo || value > hi) {
      damaged("attribute '" + std::string(name) + "' = " + std::to_string(value) + " is outside [" +
              std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return value;
  }

  void read_header() {
    const hid_t root = file_.get();
    const htri_t has_format = H5Aexists(root, fmt::kFormatAttr);
    if (has_format < 0) damaged("its root group is unreadable (HDF5: " + hdf5_failure() + ")");
    if (has_format == 0) {
      throw Error(where() + " is an HDF5 file but not a strata checkpoint (its root has no '" +
                      std::string(fmt::kFormatAttr) + "' attribute)",
                  kForeignFix);
    }
    const std::string format = hdf5_read_string_attribute(root, fmt::kFormatAttr, where(), kForeignFix);
    if (format != fmt::kFormatName) {
      throw Error(where() + " is an HDF5 file holding a '" + format + "', not a strata checkpoint", kForeignFix);
    }
    const int64_t version = hdf5_read_int_attribute(root, fmt::kVersionAttr, where(), kDamagedFix);
    if (version > kCheckpointFormatVersion) {
      std::string writer = "a newer strata";
      if (hdf5_has_attribute(root, fmt::kStrataVersionAttr)) {
        writer = "strata " + hdf5_read_string_attribute(root, fmt::kStrataVersionAttr, where(), kDamagedFix);
      }
      throw Error(where() + " has checkpoint format version " + std::to_string(version) + " (written by " + writer +
                      "); this strata (" STRATA_VERSION ") reads versions up to " +
                      std::to_string(kCheckpointFormatVersion),
                  "resume with the strata build that wrote it or a newer one, or start without --resume");
    }
    if (version < 1) damaged("format version " + std::to_string(version) + " is not a version");
    constexpr int64_t kAny = std::numeric_limits<int64_t>::max();
    constexpr int64_t kInt = std::numeric_limits<int>::max();
    CheckpointHeader& h = header_;
    h.format_version = int(version);
    h.step = int_attribute(root, fmt::kStepAttr, 0, kAny);
    h.epoch = int_attribute(root, fmt::kEpochAttr, 0, kAny);
    h.step_in_epoch = int_attribute(root, fmt::kStepInEpochAttr, 0, kAny);
    h.samples = int_attribute(root, fmt::kSamplesAttr, 0, kAny);
    h.epoch_samples = int_attribute(root, fmt::kEpochSamplesAttr, 0, kAny);
    h.train_seconds = checkpoint_hdf5::read_double_attribute(root, fmt::kTrainSecondsAttr, where(), kDamagedFix);
    h.config_ini = hdf5_read_string_attribute(root, fmt::kConfigAttr, where(), kDamagedFix);
    h.strata_version = hdf5_read_string_attribute(root, fmt::kStrataVersionAttr, where(), kDamagedFix);
    h.producers = int(int_attribute(root, fmt::kProducersAttr, 0, kInt));
    h.trainers = int(int_attribute(root, fmt::kTrainersAttr, 0, kInt));
    h.servers = int(int_attribute(root, fmt::kServersAttr, 0, kInt));
    h.store_mode = hdf5_read_string_attribute(root, fmt::kStoreModeAttr, where(), kDamagedFix);
    h.num_dense = int(int_attribute(root, fmt::kNumDenseAttr, 0, kInt));
    h.num_tables = int(int_attribute(root, fmt::kNumTablesAttr, 0, kInt));
    h.embedding_dim = int(int_attribute(root, fmt::kEmbeddingDimAttr, 0, kInt));
    h.row_width = int(int_attribute(root, fmt::kRowWidthAttr, 0, kInt));
    h.dense_optimizer = hdf5_read_string_attribute(root, fmt::kDenseOptimizerAttr, where(), kDamagedFix);
    h.sparse_optimizer = hdf5_read_string_attribute(root, fmt::kSparseOptimizerAttr, where(), kDamagedFix);
    h.dense_optimizer_steps = int_attribute(root, fmt::kDenseOptimizerStepsAttr, 0, kAny);
    h.admission_counters = int_attribute(root, fmt::kAdmissionCountersAttr, 0, kAny);
    for (auto [name, field] : {std::pair<const char*, std::string*>{fmt::kRunIdAttr, &h.run_id},
                               {fmt::kDeckFingerprintAttr, &h.deck_fingerprint}}) {
      if (hdf5_has_attribute(root, name)) *field = hdf5_read_string_attribute(root, name, where(), kDamagedFix);
    }
    Hdf5Handle rng = data::hdf5_open_group(root, fmt::kRng, where(), kDamagedFix);
    h.train_seed = checkpoint_hdf5::read_uint64_attribute(rng.get(), fmt::kTrainSeedAttr, where() + ": /rng", kDamagedFix);
    h.data_seed = checkpoint_hdf5::read_uint64_attribute(rng.get(), fmt::kDataSeedAttr, where() + ": /rng", kDamagedFix);
    const std::string problem = header_problem(h);
    if (!problem.empty()) damaged("its header is implausible: " + problem);
  }

  // Opens /group/name and checks its element type and dimensions (-1 = any
  // extent; any_rank: 1 .. kMaxLayerRank dimensions of any extent).
  Column open_column(const std::string& group, const std::string& name, Element element,
                     std::vector<int64_t> expected, size_t compound_bytes = 0, bool any_rank = false) {
    Column column;
    column.name = "/" + group + "/" + name;
    Hdf5Handle parent = data::hdf5_open_group(file_.get(), group, where(), kDamagedFix);
    column.set = data::hdf5_open_dataset(parent.get(), name, where() + ": /" + group, kDamagedFix);
    Hdf5Handle type(hdf5_check(H5Dget_type(column.set.get()), where() + ": " + column.name + " has no type", kDamagedFix),
                    H5Tclose);
    const H5T_class_t type_class = H5Tget_class(type.get());
    const size_t size = H5Tget_size(type.get());
    bool ok = false;
    switch (element) {
      case Element::kFloat32: ok = type_class == H5T_FLOAT && size == 4; break;
      case Element::kUint32: ok = type_class == H5T_INTEGER && size == 4 && H5Tget_sign(type.get()) == H5T_SGN_NONE; break;
      case Element::kUint64: ok = type_class == H5T_INTEGER && size == 8 && H5Tget_sign(type.get()) == H5T_SGN_NONE; break;
      case Element::kCompound: ok = type_class == H5T_COMPOUND && size == compound_bytes; break;
    }
    if (!ok) damaged(column.name + " is not " + element_name(element));
    const std::vector<hsize_t> dims = dataset_dims(column.set.get(), where() + ": " + column.name, kDamagedFix);
    if (any_rank) expected.assign(std::clamp<size_t>(dims.size(), 1, size_t(fmt::kMaxLayerRank)), -1);
    bool shape_ok = dims.size() == expected.size();
    for (size_t d = 0; shape_ok && d < dims.size(); ++d) {
      shape_ok = dims[d] <= hsize_t(fmt::kMaxRows) && (expected[d] < 0 || dims[d] == hsize_t(expected[d]));
    }
    column.dims.assign(dims.begin(), dims.end());
    if (!shape_ok) {
      damaged(column.name + " has shape " + dims_text(column.dims) + ", expected " + dims_text(expected) +
              " from the header and the other datasets");
    }
    // Guards the product below: no checkpoint holds more than 2^40 rows of 2^20 floats.
    uint64_t bytes = element_bytes(element, compound_bytes);
    for (int64_t d : column.dims) {
      if (d != 0 && bytes > (uint64_t(1) << 62) / uint64_t(d)) damaged(column.name + " is implausibly large");
      bytes *= uint64_t(d);
    }
    logical_bytes_ += bytes;
    if (hdf5_has_attribute(column.set.get(), fmt::kXxh3Attr)) {
      column.xxh3 = checkpoint_hdf5::read_uint64_attribute(column.set.get(), fmt::kXxh3Attr,
                                                           where() + ": " + column.name, kDamagedFix);
    }
    return column;
  }

  void require_checksum(const Column& column) const {
    if (!hdf5_has_attribute(column.set.get(), fmt::kXxh3Attr)) damaged(column.name + " has no xxh3_64 attribute");
  }

  void open_dense() {
    dense_values_ = open_column(fmt::kDense, fmt::kDenseValues, Element::kFloat32, {-1});
    require_checksum(dense_values_);
    const int64_t n = dense_values_.rows();
    if (n > fmt::kMaxDenseValues) damaged("/dense/values holds an implausible " + std::to_string(n) + " values");
    dense_state_ = open_column(fmt::kDense, fmt::kDenseOptimizerState, Element::kFloat32, {-1});
    require_checksum(dense_state_);
    const hid_t state = dense_state_.set.get();
    const std::string what = where() + ": " + dense_state_.name;
    const int64_t vectors = hdf5_read_int_attribute(state, fmt::kVectorsAttr, what, kDamagedFix);
    if (vectors < 0 || vectors > fmt::kMaxOptimizerMoments || dense_state_.rows() != vectors * n) {
      damaged(dense_state_.name + " holds " + std::to_string(dense_state_.rows()) + " floats, its 'vectors' = " +
              std::to_string(vectors) + " times the " + std::to_string(n) + " dense values would be " +
              std::to_string(vectors * n));
    }
    const std::string optimizer = hdf5_read_string_attribute(state, fmt::kOptimizerAttr, what, kDamagedFix);
    const int64_t steps = hdf5_read_int_attribute(state, fmt::kStepsAttr, what, kDamagedFix);
    if (optimizer != header_.dense_optimizer || steps != header_.dense_optimizer_steps) {
      damaged(dense_state_.name + " is for optimizer '" + optimizer + "' after " + std::to_string(steps) +
              " steps, the header says '" + header_.dense_optimizer + "' after " +
              std::to_string(header_.dense_optimizer_steps));
    }

    const std::string layers_group = std::string(fmt::kDense) + "/" + fmt::kDenseLayers;
    Hdf5Handle layers = data::hdf5_open_group(file_.get(), layers_group, where(), kDamagedFix);
    H5G_info_t info{};
    hdf5_check_status(H5Gget_info(layers.get(), &info), where() + ": /" + layers_group + " is unreadable", kDamagedFix);
    if (info.nlinks > hsize_t(fmt::kMaxLayers)) damaged("/" + layers_group + " holds an implausible number of layers");
    std::vector<bool> seen(size_t(info.nlinks), false);
    layers_.resize(size_t(info.nlinks));
    for (hsize_t i = 0; i < info.nlinks; ++i) {
      const ssize_t length = H5Lget_name_by_idx(layers.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
      if (length <= 0 || size_t(length) > fmt::kMaxLayerName) damaged("a layer of /" + layers_group + " has no usable name");
      std::string name(size_t(length) + 1, '\0');
      H5Lget_name_by_idx(layers.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(), H5P_DEFAULT);
      name.resize(size_t(length));
      Column column = open_column(layers_group, name, Element::kFloat32, {}, 0, /*any_rank=*/true);
      require_checksum(column);
      const hid_t set = column.set.get();
      const std::string layer_what = where() + ": " + column.name;
      const int64_t index = hdf5_read_int_attribute(set, fmt::kIndexAttr, layer_what, kDamagedFix);
      const int64_t offset = hdf5_read_int_attribute(set, fmt::kOffsetAttr, layer_what, kDamagedFix);
      const int64_t size = column.elements();
      if (index < 0 || index >= int64_t(info.nlinks) ||
          seen[size_t(index)] || offset < 0 || offset > n || size > n - offset) {
        damaged(column.name + " (index " + std::to_string(index) + ", offset " + std::to_string(offset) + ", " +
                std::to_string(size) + " values) does not fit the " + std::to_string(n) + " dense values");
      }
      seen[size_t(index)] = true;
      Layer& layer = layers_[size_t(index)];
      layer.slice.name = name;
      layer.slice.offset = size_t(offset);
      layer.slice.shape = column.dims;
      layer.column = std::move(column);
    }
  }

  void open_trainer() {
    trainer_ = open_column(fmt::kTrainer, fmt::kTrainerState, Element::kCompound, {1}, fmt::kTrainerRecordBytes);
    require_checksum(trainer_);
  }

  void open_sparse() {
    const int64_t dim = header_.embedding_dim, width = header_.row_width;
    table_ = open_column(fmt::kSparse, fmt::kSparseTable, Element::kUint32, {-1});
    num_rows_ = table_.rows();
    const int64_t n = num_rows_;
    key_ = open_column(fmt::kSparse, fmt::kSparseKey, Element::kUint64, {n});
    values_ = open_column(fmt::kSparse, fmt::kSparseValues, Element::kFloat32, {n, dim});
    state_ = open_column(fmt::kSparse, fmt::kSparseOptimizerState, Element::kFloat32, {n, width - dim});
    counts_ = open_column(fmt::kSparse, fmt::kSparseAccessCount, Element::kUint64, {n});
    checksums_ = open_column(fmt::kSparse, fmt::kSparseChecksums, Element::kCompound, {-1}, fmt::kBlockRecordBytes);
    Hdf5Handle group = data::hdf5_open_group(file_.get(), fmt::kSparse, where(), kDamagedFix);
    block_rows_ = int_attribute(group.get(), fmt::kBlockRowsAttr, 1, fmt::kMaxBlockRows);
    const int64_t blocks = checksums_.rows();
    if (blocks > n || blocks < (n + block_rows_ - 1) / block_rows_) {
      damaged("/sparse/checksums has " + std::to_string(blocks) + " blocks for " + std::to_string(n) +
              " rows of at most " + std::to_string(block_rows_) + " each");
    }
  }

  void open_producers() {
    producers_ = open_column(fmt::kProducers, fmt::kProducerState, Element::kCompound, {header_.producers},
                             fmt::kProducerRecordBytes);
    require_checksum(producers_);
    const bool expected = header_.admission_counters > 0 && header_.producers > 0;
    const bool present = hdf5_has_link(file_.get(), std::string(fmt::kProducers) + "/" + fmt::kProducerAdmission);
    if (expected != present) {
      damaged(std::string("/producers/admission is ") + (present ? "present" : "missing") +
              " but the header's admission_counters is " + std::to_string(header_.admission_counters));
    }
    if (expected) {
      admission_ = open_column(fmt::kProducers, fmt::kProducerAdmission, Element::kUint32,
                               {header_.producers, fmt::kSketchRows * header_.admission_counters});
    }
  }

  // The checksum blocks must tile the rows exactly, in order.
  void read_blocks() {
    const int64_t count = checksums_.rows();
    std::vector<unsigned char> records(size_t(count) * fmt::kBlockRecordBytes);  // (blocks) packed
    Hdf5Handle type = checkpoint_hdf5::block_record_type();
    read_in_pieces(checksums_, type.get(), fmt::kBlockRecordBytes, records.data());
    blocks_.reserve(size_t(count));
    int64_t next = 0;
    for (int64_t i = 0; i < count; ++i) {
      blocks_.push_back(checkpoint_hdf5::unpack_block(records.data() + size_t(i) * fmt::kBlockRecordBytes));
      const BlockRecord& b = blocks_.back();
      if (b.first_row != next || b.rows < 1 || b.rows > block_rows_ || b.rows > num_rows_ - next) {
        damaged("/sparse/checksums block " + std::to_string(i) + " covers rows [" + std::to_string(b.first_row) +
                ", " + std::to_string(b.first_row + b.rows) + "), expected a block starting at row " +
                std::to_string(next) + " of at most " + std::to_string(block_rows_) + " rows");
      }
      next += b.rows;
    }
    if (next != num_rows_) {
      damaged("/sparse/checksums covers " + std::to_string(next) + " of the " + std::to_string(num_rows_) + " rows");
    }
  }

  // Reads a whole dataset in calls of bounded size.
  void read_in_pieces(const Column& column, hid_t type, size_t row_bytes, void* out) const {
    const int64_t rows = column.rows();
    const int64_t per_piece = std::max<int64_t>(1, kPieceBytes / int64_t(std::max<size_t>(row_bytes, 1)));
    for (int64_t first = 0; first < rows; first += per_piece) {
      read_slab(column.set.get(), type, first, std::min(per_piece, rows - first),
                static_cast<unsigned char*>(out) + size_t(first) * row_bytes, what_reading(column), kDamagedFix);
    }
  }

  std::vector<float> read_floats(const Column& column) const {
    const Hdf5QuietErrors quiet;
    const int64_t elements = column.elements();
    std::vector<float> floats(static_cast<size_t>(elements));  // the dataset, flat
    const size_t row_bytes = column.rows() == 0 ? 4 : size_t(elements / column.rows()) * 4;
    read_in_pieces(column, H5T_NATIVE_FLOAT, row_bytes, floats.data());
    check_sum(column, xxh3(floats.data(), floats.size() * 4));
    return floats;
  }

  void read_block(const Column& column, hid_t type, int64_t first, int64_t rows, void* out, size_t bytes,
                  uint64_t expected) const {
    read_slab(column.set.get(), type, first, rows, out, what_reading(column), kDamagedFix);
    if (xxh3(out, bytes) != expected) {
      damaged("rows [" + std::to_string(first) + ", " + std::to_string(first + rows) + ") of " + column.name +
              " do not match their checksum in /sparse/checksums (the bytes changed after they were written)");
    }
  }

  std::string path_;
  uint64_t file_bytes_ = 0;
  uint64_t logical_bytes_ = 0;  // what the datasets' shapes say they hold
  Hdf5Handle file_;             // declared first: closed after every dataset
  CheckpointHeader header_;
  Column dense_values_;         // (n)
  Column dense_state_;          // (vectors * n)
  std::vector<Layer> layers_;   // by slice index
  Column trainer_;              // (1)
  Column table_, key_, values_, state_, counts_;  // (rows), (rows), (rows, dim), (rows, width - dim), (rows)
  Column checksums_;            // (blocks)
  std::vector<BlockRecord> blocks_;
  int64_t num_rows_ = 0;
  int64_t block_rows_ = 1;
  Column producers_;            // (producers)
  Column admission_;            // (producers, 4 * admission_counters), or not open
};

CheckpointReader::CheckpointReader(MPI_Comm comm, const std::string& path)
    : impl_(std::make_unique<Impl>(comm, path)) {}

CheckpointReader::~CheckpointReader() = default;

const std::string& CheckpointReader::path() const { return impl_->path(); }
const CheckpointHeader& CheckpointReader::header() const { return impl_->header(); }
uint64_t CheckpointReader::file_bytes() const { return impl_->file_bytes(); }
int64_t CheckpointReader::num_dense_values() const { return impl_->num_dense_values(); }
std::vector<model::ParameterSlice> CheckpointReader::dense_slices() const { return impl_->dense_slices(); }
std::vector<float> CheckpointReader::dense_values() const { return impl_->dense_values(); }
std::vector<float> CheckpointReader::dense_optimizer_state() const { return impl_->dense_optimizer_state(); }
TrainerState CheckpointReader::trainer_state() const { return impl_->trainer_state(); }
int64_t CheckpointReader::num_rows() const { return impl_->num_rows(); }
SparseRows CheckpointReader::read_rows(int64_t begin, int64_t end) const { return impl_->read_rows(begin, end); }
std::vector<ProducerState> CheckpointReader::producers() const { return impl_->producers(); }
std::vector<uint32_t> CheckpointReader::admission_counters(int producer) const {
  return impl_->admission_counters(producer);
}
void CheckpointReader::verify(bool rows) const { impl_->verify(rows); }
void CheckpointReader::verify_rows(int part, int parts) const { impl_->verify_rows(part, parts); }

}  // namespace strata::io
