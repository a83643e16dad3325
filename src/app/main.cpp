// strata's command line: `strata train|device|deck ...`. Errors in the deck or
// the command line are found identically on every rank, so rank 0 prints them
// once and every rank exits cleanly; an error during the run on one rank
// aborts the job, since its peers would wait for it forever.
#include <mpi.h>

#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <sys/wait.h>
#include <filesystem>
#include <string>
#include <vector>

#include "app/ckpt_command.hpp"
#include "app/convert_command.hpp"
#include "app/tune_command.hpp"
#include "backend/device.hpp"
#include "comm/mpi_channel.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "config/deck.hpp"
#include "config/model_set.hpp"
#include "data/hdf5_dataset.hpp"
#include "data/sequence_hdf5.hpp"
#include "runtime/preemption.hpp"
#include "runtime/model_set_job.hpp"
#include "runtime/role_layout.hpp"
#include "runtime/train_job.hpp"
#include "strata/config.hpp"
#if STRATA_HAVE_CUDA
#include "backend/cuda/device_query.hpp"
#endif

namespace {

using strata::kExitNoDevice;
constexpr int kExitUsage = strata::kExitBadInput;  // bad command line, deck or input file

const char* kUsage =
    "usage: strata <command> [options]\n"
    "\n"
    "commands:\n"
    "  train --config DECK [--section.key=value ...]   train a model (run under mpirun)\n"
    "  trace --config DECK --output.trace=FILE [...]   train and write the key-access trace (tiered store)\n"
    "  tune  --config DECK --tune.plugin=grid|random|optuna|PATH [--tune.trials=N ...]\n"
    "                                                  search store budgets, prefetch depth, policy, layout\n"
    "  deck  --config DECK [--section.key=value ...]   print the resolved deck as INI\n"
    "  convert --from criteo|csv --to FILE.h5 --input TEXTFILE [...]   write a text file as a columnar HDF5 dataset\n"
    "  ckpt  info|digest|verify|config FILE            what a checkpoint holds, its params_digest, a full check\n"
    "  report --run DIR                                render a run's metrics as PNG plots\n"
    "  device                                          list CUDA devices (exit 77 when none)\n"
    "\n"
    "'strata train --help' lists every deck key with its default.\n";

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

bool wants_help(const std::vector<std::string>& args) {
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

void print_error(const std::string& message) { std::fprintf(stderr, "strata: error: %s\n", message.c_str()); }

// Text inputs are checked on every rank before roles split, so a typo in a
// path is a clean error rather than an abort from the one producer that opens it.
void check_input_files(const strata::RunOptions& options) {
  if (options.data.source == "synthetic") return;
  for (const auto& [key, path] : {std::pair{"data.train", options.data.train}, std::pair{"data.eval", options.data.eval}}) {
    if (path.empty()) continue;
    if (!std::filesystem::exists(path)) {
      throw strata::Error(std::string(key) + ": file '" + path + "' does not exist", "check the path in the deck");
    }
    if (!std::filesystem::is_regular_file(path)) {
      throw strata::Error(std::string(key) + ": '" + path + "' is not a regular file", "point it at a data file");
    }
    // A bad .h5 (truncated, foreign, wrong shape) is a clean error on every rank.
    if (options.data.source == "hdf5") {
      if (strata::data::is_sequence_hdf5(path)) {
        strata::data::read_sequence_hdf5_info(path);
      } else {
        strata::data::open_hdf5_reader(options.data, path, 0, 1);
      }
    }
  }
}

int command_device() {
#if STRATA_HAVE_CUDA
  auto query = strata::cuda::query_devices();
  if (!query.error.empty()) {
    std::fprintf(stderr, "strata: %s\n", query.error.c_str());
    return kExitNoDevice;
  }
  for (const auto& d : query.devices) {
    std::printf("cuda:%d %s, %.1f GiB, sm_%d, %d SMs\n", d.index, d.name.c_str(), d.memory_bytes / 1073741824.0,
                d.compute_capability, d.multiprocessors);
  }
  std::printf("nccl %d\n", query.nccl_version);
  return query.devices.empty() ? kExitNoDevice : 0;
#else
  std::fprintf(stderr, "strata: built without CUDA (STRATA_ENABLE_CUDA=OFF or no nvcc)\n");
  return kExitNoDevice;
#endif
}

// Plots are matplotlib's job: run the shipped script with Debian's python3.
int command_report(const std::vector<std::string>& args) {
  if (world_rank() != 0) return 0;
  std::string command = std::string(STRATA_PYTHON_EXECUTABLE) + " " STRATA_SOURCE_DIR "/scripts/strata_report.py";
  for (const auto& a : args) {
    std::string quoted = "'";
    for (char c : a) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    command += " " + quoted + "'";
  }
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// train, trace and tune need a deck: there is no implicit default job (README).
void require_deck(const std::string& command, const std::vector<std::string>& args) {
  for (const auto& arg : args) {
    if (arg == "--config" || arg.rfind("--config=", 0) == 0) return;
  }
  throw strata::Error("strata " + command + " needs an input deck (--config DECK)",
                      "add --config inputs/default.ini for the default job, or your own deck; "
                      "'strata " + command + " --help' lists every key");
}

int dispatch(const std::vector<std::string>& words) {
  if (words.empty() || words[0] == "--help" || words[0] == "-h" || words[0] == "help") {
    if (world_rank() == 0) std::printf("%s\n%s", kUsage, strata::deck_help().c_str());
    return words.empty() ? kExitUsage : 0;
  }
  if (words[0] == "--version" || words[0] == "version") {
    if (world_rank() == 0) std::printf("strata %s\n", STRATA_VERSION);
    return 0;
  }
  const std::string command = words[0];
  const std::vector<std::string> args(words.begin() + 1, words.end());
  if (command == "device") return command_device();
  if (command == "report") return command_report(args);
  if (command == "tune") {
    if (wants_help(args)) {
      if (world_rank() == 0) std::printf("usage: strata tune --config DECK [--tune.key=value ...]\n\n%s",
                                         strata::deck_help().c_str());
      return 0;
    }
    try {
      require_deck(command, args);
      if (strata::parse_model_set(args).co_trained()) {
        throw strata::Error("strata tune takes a deck of one model; this deck lists [models]",
                            "tune one of them with a deck of its own (strata deck --config DECK --models.only=NAME "
                            "prints it)");
      }
      return strata::run_tune_command(args);
    } catch (const strata::Error& e) {
      if (world_rank() == 0) print_error(e.what());
      return kExitUsage;
    }
  }
  if (command == "ckpt") {
    if (world_rank() != 0) return 0;
    try {
      return strata::run_ckpt_command(args);
    } catch (const strata::Error& e) {
      print_error(e.what());
      return kExitUsage;
    }
  }
  if (command == "convert") {
    try {
      return strata::run_convert_command(args);
    } catch (const strata::Error& e) {
      if (world_rank() == 0) print_error(e.what());
      return kExitUsage;
    }
  }
  if (command == "train" || command == "deck" || command == "trace") {
    if (wants_help(args)) {
      if (world_rank() == 0) std::printf("usage: strata %s --config DECK [--section.key=value ...]\n\n%s",
                                         command.c_str(), strata::deck_help().c_str());
      return 0;
    }
    strata::ModelSet set;
    try {
      require_deck(command, args);
      set = strata::parse_model_set(args);
      for (const auto& model : set.models) check_input_files(model.options);
      if (command == "trace" && set.models.size() > 1) {
        throw strata::Error("strata trace records one model's key accesses; the deck co-trains " +
                                std::to_string(set.models.size()) + " models",
                            "pick one with --models.only=NAME");
      }
      const strata::RunOptions& options = set.models.front().options;
      if (command == "trace") {
        if (options.output.trace.empty()) {
          throw strata::Error("strata trace needs a trace file", "add --output.trace=FILE");
        }
        // The trace is what the tiered store's planner sees; its budgets do not change it.
        if (options.store.mode != "tiered") {
          throw strata::Error("strata trace records the tiered store's key accesses; store.mode is '" +
                                  options.store.mode + "'",
                              "drop --store.mode (or set store.mode = tiered in the deck)");
        }
      }
    } catch (const strata::Error& e) {
      if (world_rank() == 0) print_error(e.what());
      return kExitUsage;
    }
    if (command == "deck") {
      if (world_rank() == 0 && set.co_trained()) {
        auto joined = [](const std::vector<std::string>& names) {
          std::string text;
          for (const auto& name : names) text += (text.empty() ? "" : ", ") + name;
          return text.empty() ? std::string("(none)") : text;
        };
        std::printf("# [models] names = %s; shared_ingest = %s (%g MiB); l2_pool_mb = %g; share_tables = %s\n",
                    joined(set.names).c_str(), set.shared_ingest ? "true" : "false", set.shared_ingest_mb,
                    set.l2_pool_mb, joined(set.share_tables).c_str());
      }
      for (const auto& model : set.models) {
        if (world_rank() != 0) break;
        if (set.co_trained()) std::printf("# model %s\n", model.name.c_str());
        std::printf("%s", strata::to_ini(model.options).c_str());
      }
      return 0;
    }
    try {
      int world_size = 0;
      MPI_Comm_size(MPI_COMM_WORLD, &world_size);
      if (!set.co_trained()) {
        strata::runtime::RoleLayout(set.models.front().options.layout).check_world_size(world_size);
      } else if (world_size != strata::model_set_world_size(set)) {
        std::string parts;
        for (const auto& model : set.models) {
          const auto& l = model.options.layout;
          parts += (parts.empty() ? "" : " + ") + model.name + " " + std::to_string(l.trainers + l.producers + l.servers);
        }
        throw strata::Error("the MPI job has " + std::to_string(world_size) + " ranks but the deck's models need " +
                                std::to_string(strata::model_set_world_size(set)) + " (" + parts + ")",
                            "run mpirun -n " + std::to_string(strata::model_set_world_size(set)) +
                                ", or change the models' layout keys, or train one with --models.only=NAME");
      }
    } catch (const strata::Error& e) {
      if (world_rank() == 0) print_error(e.what());
      return kExitUsage;
    }
    return strata::runtime::run_model_set_job(set, MPI_COMM_WORLD);
  }
  if (world_rank() == 0) print_error("unknown command '" + command + "'\n\n" + kUsage);
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  // Per-step buffers (batches, row blocks, messages) are megabytes: keep them
  // on the heap instead of mmap/munmap per allocation, which would fault and
  // zero fresh pages on every step.
  strata::backend::prepare_process(argv);
  mallopt(M_MMAP_THRESHOLD, 512 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  strata::comm::prepare_process_for_polite_waits();
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  strata::backend::initialize_runtime(argc, argv);
  int code = 0;
  try {
    code = dispatch(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const strata::comm::PeerFailure& failure) {
    strata::runtime::exit_after_peer_failure(failure.exit_code());
  } catch (const strata::InputError& e) {
    strata::runtime::exit_failed(kExitUsage, e.what(), world_rank());
  } catch (const std::exception& e) {
    strata::runtime::exit_failed(strata::kExitFailed, e.what(), world_rank());
  }
  strata::backend::finalize_runtime();
  MPI_Finalize();
  return code;
}
