// The fuzz targets in the default test suite, without libFuzzer (a gcc build):
// each target's seed corpus, then a bounded number of inputs mutated from it
// with a fixed seed (bit flips, random bytes, inserted, deleted and repeated
// ranges, splices of two entries, truncation), so every run tries the same
// inputs and a failure reproduces. A crash, or an exception other than
// strata::Error escaping a target, fails the test; `make fuzz` runs the same
// targets under libFuzzer with ASan and UBSan for coverage-guided search.
//
// usage: fuzz_replay_<target> [-runs=N] [-seed=S] CORPUS_DIR...
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

using Input = std::vector<uint8_t>;

std::vector<Input> read_corpus(const std::vector<std::string>& dirs) {
  std::vector<std::filesystem::path> files;
  for (const auto& dir : dirs) {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());  // the same order on every machine
  std::vector<Input> corpus;
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return corpus;
}

// One random edit of `x` (may leave it empty).
void mutate_once(Input& x, const std::vector<Input>& corpus, std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return n == 0 ? size_t(0) : size_t(rng() % n); };
  static const uint8_t kInteresting[] = {0, 1, 0x7f, 0x80, 0xff, '\n', '\t', ',', ';', '|', '=', '[', ']', '-', '9'};
  switch (rng() % 8) {
    case 0:  // flip one bit
      if (!x.empty()) x[pick(x.size())] ^= uint8_t(1u << (rng() % 8));
      break;
    case 1:  // an interesting byte
      if (!x.empty()) x[pick(x.size())] = kInteresting[rng() % sizeof(kInteresting)];
      break;
    case 2: {  // insert random bytes
      const size_t at = pick(x.size() + 1), n = 1 + rng() % 8;
      Input bytes(n);
      for (auto& b : bytes) b = uint8_t(rng());
      x.insert(x.begin() + long(at), bytes.begin(), bytes.end());
      break;
    }
    case 3: {  // delete a range
      if (x.empty()) break;
      const size_t at = pick(x.size()), n = 1 + pick(std::min<size_t>(x.size() - at, 64));
      x.erase(x.begin() + long(at), x.begin() + long(std::min(x.size(), at + n)));
      break;
    }
    case 4: {  // repeat a range
      if (x.empty()) break;
      const size_t at = pick(x.size()), n = 1 + pick(std::min<size_t>(x.size() - at, 64));
      const Input range(x.begin() + long(at), x.begin() + long(std::min(x.size(), at + n)));
      x.insert(x.begin() + long(at), range.begin(), range.end());
      break;
    }
    case 5: {  // splice: the head of this one, the tail of another
      const Input& other = corpus[pick(corpus.size())];
      const size_t keep = pick(x.size() + 1), from = pick(other.size() + 1);
      x.resize(keep);
      x.insert(x.end(), other.begin() + long(from), other.end());
      break;
    }
    case 6:  // truncate
      x.resize(pick(x.size() + 1));
      break;
    default: {  // overwrite a 4-byte word with a boundary value
      if (x.size() < 4) break;
      static const uint32_t kWords[] = {0, 1, 0x7fffffffu, 0x80000000u, 0xffffffffu, 0xffffu};
      const uint32_t w = kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))];
      std::memcpy(x.data() + pick(x.size() - 3), &w, 4);
      break;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  long runs = 2000;
  uint64_t seed = 1;
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("-runs=", 0) == 0) {
      runs = std::atol(arg.c_str() + 6);
    } else if (arg.rfind("-seed=", 0) == 0) {
      seed = std::strtoull(arg.c_str() + 6, nullptr, 10);
    } else {
      dirs.push_back(arg);
    }
  }
  const std::vector<Input> corpus = read_corpus(dirs);
  if (corpus.empty()) {
    std::fprintf(stderr, "no corpus files in the given folders\n");
    return 2;
  }
  for (const Input& x : corpus) LLVMFuzzerTestOneInput(x.data(), x.size());
  std::mt19937_64 rng(seed);
  for (long r = 0; r < runs; ++r) {
    Input x = corpus[rng() % corpus.size()];
    for (int edits = 1 + int(rng() % 4); edits > 0; --edits) mutate_once(x, corpus, rng);
    LLVMFuzzerTestOneInput(x.data(), x.size());
  }
  std::printf("%zu corpus inputs and %ld mutated inputs (seed %llu): no crash\n", corpus.size(), runs,
              static_cast<unsigned long long>(seed));
  return 0;
}
