// bench_gemm_peak: the machine's SGEMM rate (OpenBLAS, the BLAS strata's host backend
// calls through KokkosBlas) at a large square size and at the DLRM MLP's shapes, with
// 1 and 2 BLAS threads. That rate bounds the dense network: no engine trains the
// MLP faster than its GEMMs run. Given strata's measured samples/s, it prints the
// MLP FLOP rate strata reaches and what fraction of the bound that is.
//
// Usage: bench_gemm_peak [--threads=1,2] [--batches=128,256,512,1024] [--square=1024]
//                        [--seconds=0.6] [--strata=BATCH:SAMPLES_PER_S[:LABEL]]...
// --strata names the per-trainer batch of a strata run (the GEMMs' M) and the
// samples/s it reached; repeat it for several runs. Each figure is the best of three
// trials, so run it on otherwise idle cores.
//
// MLP of the default deck: bottom 13-64-16, top 367-64-32-1. Per layer (in, out) and
// batch B one training step runs three GEMMs of 2*B*in*out FLOPs each:
//   forward  Y (B, out) = X (B, in) W^T     backward dX (B, in) = dY W,  dW (out, in) = dY^T X
// so a sample costs 3 * 2 * sum(in*out) FLOPs (dX of the first layer is counted too,
// the usual convention).
#include <cblas.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Layer {
  int in, out;
};
const std::vector<Layer> kMlp = {{13, 64}, {64, 16}, {367, 64}, {64, 32}, {32, 1}};

struct StrataRun {
  int batch;             // per-trainer batch: the GEMMs' M
  double samples_per_s;  // strata's whole-job training throughput
  std::string label;
};

struct Options {
  std::vector<int> threads = {1, 2};
  std::vector<int> batches = {128, 256, 512, 1024};
  int square = 1024;
  double seconds = 0.6;  // timed time per measurement (three trials)
  std::vector<StrataRun> strata;
};

std::vector<int> parse_ints(const std::string& text) {
  std::vector<int> values;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) values.push_back(std::stoi(item));
  return values;
}

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "bench_gemm_peak: %s\nusage: bench_gemm_peak [--threads=1,2] [--batches=128,256,512,1024] "
               "[--square=1024] [--seconds=0.6] [--strata=BATCH:SAMPLES_PER_S[:LABEL]]...\n",
               why.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto eq = arg.find('=');
    const std::string key = arg.substr(0, eq), value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    try {
      if (key == "--threads") o.threads = parse_ints(value);
      else if (key == "--batches") o.batches = parse_ints(value);
      else if (key == "--square") o.square = std::stoi(value);
      else if (key == "--seconds") o.seconds = std::stod(value);
      else if (key == "--strata") {
        StrataRun run;
        const auto c1 = value.find(':'), c2 = value.find(':', c1 + 1);
        if (c1 == std::string::npos) usage("--strata wants BATCH:SAMPLES_PER_S, got '" + value + "'");
        run.batch = std::stoi(value.substr(0, c1));
        run.samples_per_s = std::stod(value.substr(c1 + 1, c2 - c1 - 1));
        run.label = c2 == std::string::npos ? "" : value.substr(c2 + 1);
        o.strata.push_back(run);
      } else if (key == "--help" || key == "-h") usage("help");
      else usage("unknown argument '" + arg + "'");
    } catch (const std::logic_error&) {
      usage("bad value in '" + arg + "'");
    }
  }
  return o;
}

// One row-major SGEMM C (m, n) = op(A) op(B) with k the inner dimension.
struct Gemm {
  CBLAS_TRANSPOSE ta, tb;
  int m, n, k;
  double flops() const { return 2.0 * m * n * k; }
};

struct Buffers {
  std::vector<float> a, b, c;
  explicit Buffers(size_t elements) : a(elements), b(elements), c(elements) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (auto* v : {&a, &b}) std::generate(v->begin(), v->end(), [&] { return u(rng); });
  }
};

void run(const Gemm& g, Buffers& buf) {
  const int lda = g.ta == CblasNoTrans ? g.k : g.m;
  const int ldb = g.tb == CblasNoTrans ? g.n : g.k;
  cblas_sgemm(CblasRowMajor, g.ta, g.tb, g.m, g.n, g.k, 1.0f, buf.a.data(), lda, buf.b.data(), ldb, 0.0f,
              buf.c.data(), g.n);
}

// GFLOP/s of running `gemms` back to back: the best of three trials of at least
// seconds / 3 each, since on a shared machine a disturbance only ever slows a trial.
double rate(const std::vector<Gemm>& gemms, Buffers& buf, double seconds) {
  double flops = 0.0;
  for (const auto& g : gemms) flops += g.flops();
  for (const auto& g : gemms) run(g, buf);  // warm-up: threads started, caches filled
  using clock = std::chrono::steady_clock;
  double best = 0.0;
  for (int trial = 0; trial < 3; ++trial) {
    const auto start = clock::now();
    long reps = 0;
    double elapsed = 0.0;
    do {
      for (const auto& g : gemms) run(g, buf);
      ++reps;
      elapsed = std::chrono::duration<double>(clock::now() - start).count();
    } while (elapsed < seconds / 3.0);
    best = std::max(best, flops * double(reps) / elapsed * 1e-9);
  }
  return best;
}

// The three GEMMs of one training step of the whole MLP at batch b.
std::vector<Gemm> mlp_step(int b) {
  std::vector<Gemm> gemms;
  for (const auto& l : kMlp) {
    gemms.push_back({CblasNoTrans, CblasTrans, b, l.out, l.in});    // Y = X W^T
    gemms.push_back({CblasNoTrans, CblasNoTrans, b, l.in, l.out});  // dX = dY W
    gemms.push_back({CblasTrans, CblasNoTrans, l.out, l.in, b});    // dW = dY^T X
  }
  return gemms;
}

// CPU seconds the whole machine spent busy (/proc/stat: all but idle, iowait, steal).
double machine_busy_seconds() {
  std::ifstream stat("/proc/stat");
  std::string cpu;
  double f[8] = {};
  stat >> cpu;
  for (double& x : f) stat >> x;
  return (f[0] + f[1] + f[2] + f[5] + f[6]) / double(sysconf(_SC_CLK_TCK));
}

double own_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec) + 1e-6 * u.ru_utime.tv_usec + double(u.ru_stime.tv_sec) + 1e-6 * u.ru_stime.tv_usec;
}

double mlp_flops_per_sample() {
  double sum = 0.0;
  for (const auto& l : kMlp) sum += double(l.in) * l.out;
  return 3.0 * 2.0 * sum;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  int max_batch = o.square;
  for (int b : o.batches) max_batch = std::max(max_batch, b);
  for (const auto& r : o.strata) max_batch = std::max(max_batch, r.batch);
  Buffers buf(size_t(std::max(max_batch, 367)) * size_t(std::max(max_batch, 367)));
  const double busy0 = machine_busy_seconds(), own0 = own_cpu_seconds();
  const auto wall0 = std::chrono::steady_clock::now();

  std::printf("# bench_gemm_peak: OpenBLAS %s\n", openblas_get_config());
  std::printf("# MLP 13-64-16 / 367-64-32-1: %.0f FLOPs per sample (forward + backward)\n",
              mlp_flops_per_sample());
  // mlp_rate[t][batch]: GFLOP/s of one MLP training step's GEMMs.
  std::vector<std::vector<std::pair<int, double>>> mlp_rate(o.threads.size());
  std::vector<double> square_rate(o.threads.size());
  for (size_t ti = 0; ti < o.threads.size(); ++ti) {
    const int t = o.threads[ti];
    openblas_set_num_threads(t);
    const int s = o.square;
    square_rate[ti] = rate({{CblasNoTrans, CblasNoTrans, s, s, s}}, buf, o.seconds);
    std::printf("threads %d  sgemm %dx%dx%d: %8.1f GFLOP/s\n", t, s, s, s, square_rate[ti]);
    std::vector<int> batches = o.batches;
    for (const auto& r : o.strata) batches.push_back(r.batch);
    std::sort(batches.begin(), batches.end());
    batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
    for (int b : batches) {
      std::printf("threads %d  batch %5d  layer GEMMs (M,N,K) GFLOP/s:", t, b);
      for (const auto& g : mlp_step(b)) {
        if (g.ta == CblasNoTrans && g.tb == CblasTrans)  // forward shape of each layer
          std::printf("  %d-%d %.1f", g.k, g.n, rate({g}, buf, o.seconds / 4));
      }
      const double r = rate(mlp_step(b), buf, o.seconds);
      mlp_rate[ti].push_back({b, r});
      std::printf("\nthreads %d  batch %5d  whole MLP step (fwd+bwd): %8.1f GFLOP/s = %9.0f samples/s bound\n", t,
                  b, r, r * 1e9 / mlp_flops_per_sample());
    }
  }

  // The 2-thread figures need both cores: say so when other processes took some.
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  const double others = std::max(0.0, (machine_busy_seconds() - busy0 - (own_cpu_seconds() - own0)) / wall);
  std::printf("# other processes used %.2f cores during these %.0f s%s\n", others, wall,
              others > 0.3 ? ": WARNING, the figures above are disturbed; rerun on idle cores" : "");

  for (const auto& run : o.strata) {
    const double reached = run.samples_per_s * mlp_flops_per_sample() * 1e-9;
    std::printf("strata %-14s batch/trainer %5d: %9.0f samples/s -> MLP %6.2f GFLOP/s", run.label.c_str(),
                run.batch, run.samples_per_s, reached);
    for (size_t ti = 0; ti < o.threads.size(); ++ti) {
      for (const auto& [b, r] : mlp_rate[ti]) {
        if (b != run.batch) continue;
        std::printf(" | %4.1f%% of %d-thread MLP GEMM %.1f, %4.1f%% of %d-thread peak %.1f", 100.0 * reached / r,
                    o.threads[ti], r, 100.0 * reached / square_rate[ti], o.threads[ti], square_rate[ti]);
      }
    }
    std::printf("\n");
  }
  return 0;
}
