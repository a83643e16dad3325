// bench_read_speed: rows/s of a producer reading Criteo data as text (parse,
// transform, hash) and as strata's columnar HDF5 dataset (strata convert), in
// batches of 1024; 1 reader over the whole file, then 2 shards read in sequence.
// Every run also checks its result: the HDF5 readers must deliver the same rows
// (labels, dense bits, keys) as the text reader. Prints the ratio last.
//
//   bench_read_speed [--lines 1000000] [--input FILE.tsv] [--dir DIR] [--batch 1024]
//                    [--repeats 3] [--chunk-rows 65536] [--deflate 1] [--deflate-below 0.2] [--checksum] [--keep]
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "app/convert_command.hpp"
#include "common/error.hpp"
#include "data/hdf5_dataset.hpp"
#include "data/sample_reader.hpp"

namespace {

namespace fs = std::filesystem;
using strata::data::Batch;
using strata::data::SampleReader;

struct Settings {
  int64_t lines = 1000000;   // generated lines (when no --input)
  std::string input;         // an existing Criteo TSV instead
  std::string dir;           // scratch directory (default $TMPDIR or /tmp)
  int32_t batch = 1024;      // samples per read()
  int repeats = 3;           // timed passes per measurement; the best counts
  std::string chunk_rows = "65536";
  std::string deflate = "1";
  std::string deflate_below = "0.2";
  bool checksum = false;      // convert with --checksum
  bool keep = false;         // keep the generated files
};

// splitmix64: a fast, seedable generator (the data only needs to look realistic).
struct Random {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }
};

// Criteo-like columns: per-column missing rates and spreads of the integer counts,
// per-table vocabulary sizes (those of the Criteo Kaggle set) and missing rates.
constexpr double kDenseMissing[13] = {0.45, 0.0, 0.21, 0.22, 0.03, 0.22, 0.04, 0.0, 0.04, 0.45, 0.04, 0.77, 0.22};
constexpr double kDenseLogScale[13] = {1.5, 3.0, 2.5, 1.8, 6.0, 3.5, 2.5, 2.5, 3.5, 0.8, 1.5, 1.2, 2.0};
constexpr int64_t kVocab[26] = {1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
                                27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572};
constexpr double kCatMissing[26] = {0, 0, 0.03, 0.03, 0, 0.12, 0, 0, 0, 0.03, 0, 0.03, 0,
                                    0, 0, 0.03, 0, 0, 0.44, 0.44, 0.03, 0, 0.76, 0.03, 0.44, 0.44};

void generate(const std::string& path, int64_t lines) {
  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (!out) throw strata::Error("cannot write '" + path + "'", "pass --dir with a writable directory");
  std::vector<char> buffer(1 << 20);
  std::setvbuf(out, buffer.data(), _IOFBF, buffer.size());
  Random random{2024};
  char line[1024];
  for (int64_t i = 0; i < lines; ++i) {
    int at = std::snprintf(line, sizeof(line), "%d", random.uniform() < 0.26 ? 1 : 0);
    for (int j = 0; j < 13; ++j) {
      line[at++] = '\t';
      if (random.uniform() < kDenseMissing[j]) continue;
      // Heavy-tailed counts: exp of a scaled uniform^2; I2 is sometimes negative as in Criteo.
      const double u = random.uniform();
      int64_t value = int64_t(std::exp(kDenseLogScale[j] * 2.0 * u * u)) - 1;
      if (j == 1 && random.uniform() < 0.1) value = -int64_t(random.next() % 3) - 1;
      at += std::snprintf(line + at, sizeof(line) - size_t(at), "%lld", static_cast<long long>(value));
    }
    for (int t = 0; t < 26; ++t) {
      line[at++] = '\t';
      if (random.uniform() < kCatMissing[t]) continue;
      // Skewed popularity: a few values dominate, as in click logs.
      const double u = random.uniform();
      const auto id = uint64_t(double(kVocab[t]) * u * u * u * u);
      const uint64_t mixed = (id + uint64_t(t) * 0x9e3779b97f4a7c15ULL) * 0xbf58476d1ce4e5b9ULL;
      at += std::snprintf(line + at, sizeof(line) - size_t(at), "%08x", unsigned(mixed >> 32));
    }
    line[at++] = '\n';
    std::fwrite(line, 1, size_t(at), out);
  }
  if (std::fclose(out) != 0) throw strata::Error("cannot write '" + path + "'", "check free space in --dir");
}

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// What a pass delivered: rows and an order-sensitive digest of every value.
struct Pass {
  int64_t rows = 0;
  uint64_t digest = 0;
  double wall_s = 0;
  double cpu_s = 0;
};

void mix(uint64_t& digest, uint64_t value) { digest = (digest ^ value) * 0x100000001b3ULL + 0x9e3779b97f4a7c15ULL; }

// Reads the reader to its end; with `digest`, mixes every value into pass.digest.
void read_into(SampleReader& reader, int32_t batch_size, int num_dense, int num_tables, bool digest, Pass& pass) {
  Batch batch;
  while (true) {
    batch.reset(num_dense, num_tables);
    const int32_t n = reader.read(batch_size, batch);
    if (n == 0) break;
    pass.rows += n;
    if (!digest) continue;
    // Row by row: shards end with a short batch, so batch boundaries differ, rows do not.
    for (int32_t b = 0; b < n; ++b) {
      mix(pass.digest, uint64_t(batch.labels[size_t(b)]));
      for (int j = 0; j < num_dense; ++j) {
        uint32_t bits;
        std::memcpy(&bits, &batch.dense[size_t(b) * size_t(num_dense) + size_t(j)], sizeof(bits));
        mix(pass.digest, bits);
      }
      for (const auto& bags : batch.tables) {
        for (int32_t k = bags.offsets[size_t(b)]; k < bags.offsets[size_t(b) + 1]; ++k) {
          mix(pass.digest, bags.keys[size_t(k)]);
        }
        mix(pass.digest, uint64_t(bags.offsets[size_t(b) + 1] - bags.offsets[size_t(b)]));
      }
    }
  }
}

// Reads `shards` readers opened by `open` one after another: first an untimed pass
// that digests every value (the check, which also warms the caches), then
// `repeats` timed passes that only read; the fastest counts.
Pass measure(const std::function<std::unique_ptr<SampleReader>(int shard, int shards)>& open, int shards,
             const Settings& settings) {
  Pass checked;
  for (int s = 0; s < shards; ++s) read_into(*open(s, shards), settings.batch, 13, 26, true, checked);
  Pass best;
  for (int r = 0; r < settings.repeats; ++r) {
    Pass pass;
    const double cpu = cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    for (int s = 0; s < shards; ++s) read_into(*open(s, shards), settings.batch, 13, 26, false, pass);
    pass.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    pass.cpu_s = cpu_seconds() - cpu;
    if (pass.rows != checked.rows) throw strata::Error("two passes over the same file differ", "this is a bug");
    if (r == 0 || pass.wall_s < best.wall_s) best = pass;
  }
  best.digest = checked.digest;
  return best;
}

void report(const char* name, const Pass& pass) {
  std::printf("%-28s %9lld rows  %7.3f s  %10.0f rows/s  (%10.0f rows per CPU-s)\n", name,
              static_cast<long long>(pass.rows), pass.wall_s, double(pass.rows) / pass.wall_s,
              double(pass.rows) / pass.cpu_s);
}

Settings parse(int argc, char** argv) {
  Settings s;
  const char* tmp = std::getenv("TMPDIR");
  s.dir = tmp && *tmp ? tmp : "/tmp";
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        throw strata::Error(flag + " needs a value", "see the usage at the top of bench_read_speed.cpp");
      }
      return argv[++i];
    };
    if (flag == "--lines") s.lines = std::stoll(value());
    else if (flag == "--input") s.input = value();
    else if (flag == "--dir") s.dir = value();
    else if (flag == "--batch") s.batch = std::stoi(value());
    else if (flag == "--repeats") s.repeats = std::max(1, std::stoi(value()));
    else if (flag == "--chunk-rows") s.chunk_rows = value();
    else if (flag == "--deflate") s.deflate = value();
    else if (flag == "--deflate-below") s.deflate_below = value();
    else if (flag == "--keep") s.keep = true;
    else if (flag == "--checksum") s.checksum = true;
    else throw strata::Error("unknown option " + flag,
                             "use --lines --input --dir --batch --repeats --chunk-rows --deflate --deflate-below "
                             "--checksum --keep");
  }
  return s;
}

int run(const Settings& settings) {
  const std::string stem = settings.dir + "/bench_read_speed_" + std::to_string(::getpid());
  const std::string tsv = settings.input.empty() ? stem + ".tsv" : settings.input;
  const std::string h5 = stem + ".h5";
  if (settings.input.empty()) {
    const auto start = std::chrono::steady_clock::now();
    generate(tsv, settings.lines);
    std::printf("generated %lld Criteo-like lines in %.2f s: %s\n", static_cast<long long>(settings.lines),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), tsv.c_str());
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> convert_args = {"--from", "criteo", "--to", h5, "--input", tsv, "--force"};
  for (const auto& [flag, value] : {std::pair<std::string, std::string>{"--chunk-rows", settings.chunk_rows},
                                    {"--deflate", settings.deflate},
                                    {"--deflate-below", settings.deflate_below}}) {
    convert_args.insert(convert_args.end(), {flag, value});
  }
  if (settings.checksum) convert_args.push_back("--checksum");
  strata::run_convert_command(convert_args);
  const double convert_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double text_bytes = double(fs::file_size(tsv));
  const double h5_bytes = double(fs::file_size(h5));
  std::printf(
      "text %.1f MB, hdf5 %.1f MB (%.2fx smaller; chunk %s rows, deflate %s below %s%s), conversion %.2f s\n",
      text_bytes / 1e6, h5_bytes / 1e6, text_bytes / h5_bytes, settings.chunk_rows.c_str(), settings.deflate.c_str(),
      settings.deflate_below.c_str(), settings.checksum ? ", fletcher32" : "", convert_s);
  std::printf("batches of %d, best of %d passes, files in the page cache, 1 thread\n", settings.batch,
              settings.repeats);

  strata::DataOptions criteo;
  criteo.source = "criteo";
  strata::DataOptions hdf5;
  hdf5.source = "hdf5";
  auto open_text = [&](int s, int n) { return strata::data::open_text_reader(criteo, tsv, s, n); };
  auto open_hdf5 = [&](int s, int n) { return strata::data::open_hdf5_reader(hdf5, h5, s, n); };

  const Pass text = measure(open_text, 1, settings);
  report("text, 1 reader", text);
  const Pass h5_one = measure(open_hdf5, 1, settings);
  report("hdf5, 1 reader", h5_one);
  const Pass text_two = measure(open_text, 2, settings);
  report("text, 2 shards in sequence", text_two);
  const Pass h5_two = measure(open_hdf5, 2, settings);
  report("hdf5, 2 shards in sequence", h5_two);

  // Every figure must come from the same rows.
  const bool same = text.rows == h5_one.rows && text.digest == h5_one.digest && text_two.rows == text.rows &&
                    text_two.digest == text.digest && h5_two.digest == text.digest;
  std::printf("check: %s (%lld rows, digest %016llx)\n", same ? "hdf5 rows equal text rows" : "MISMATCH",
              static_cast<long long>(text.rows), static_cast<unsigned long long>(text.digest));
  if (!same) {
    for (const Pass* pass : {&h5_one, &text_two, &h5_two}) {
      std::printf("  got %lld rows, digest %016llx\n", static_cast<long long>(pass->rows),
                  static_cast<unsigned long long>(pass->digest));
    }
  }
  if (!settings.keep) {
    std::error_code ec;
    fs::remove(h5, ec);
    if (settings.input.empty()) fs::remove(tsv, ec);
  }
  const double ratio = (double(h5_one.rows) / h5_one.wall_s) / (double(text.rows) / text.wall_s);
  std::printf("ratio hdf5/text rows/s: %.2f\n", ratio);
  return same ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_read_speed: error: %s\n", e.what());
    return 2;
  }
}
