#include "runtime/output_dir.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>

#include "comm/collectives.hpp"
#include "comm/mpi_channel.hpp"
#include "common/error.hpp"

namespace fs = std::filesystem;

namespace strata::runtime {
namespace {

// The files each command writes into output.dir (io/metrics_writer, tune/trial_log).
constexpr const char* kOutputFiles[] = {"summary.json", "metrics.jsonl", "trials.csv", "best.ini"};

// trial-00042: the folder of one strata tune trial.
bool is_trial_folder(const std::string& name) {
  constexpr size_t kPrefix = 6;  // "trial-"
  return name.size() > kPrefix && name.compare(0, kPrefix, "trial-") == 0 &&
         std::all_of(name.begin() + kPrefix, name.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

std::string listed(const std::vector<std::string>& names) {
  constexpr size_t kShown = 5;
  std::string text;
  for (size_t i = 0; i < names.size() && i < kShown; ++i) text += (i ? ", " : "") + names[i];
  if (names.size() > kShown) text += " and " + std::to_string(names.size() - kShown) + " more";
  return text;
}

}  // namespace

std::vector<std::string> earlier_run_outputs(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code error;
  if (!fs::is_directory(dir, error)) return found;
  for (const char* name : kOutputFiles) {
    if (fs::exists(fs::path(dir) / name, error)) found.emplace_back(name);
  }
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (is_trial_folder(name) && it->is_directory(error)) found.push_back(name + "/");
  }
  std::sort(found.begin(), found.end());
  return found;
}

void claim_output_dir(const std::string& dir, bool overwrite, const std::string& command,
                      const std::string& extra_fix) {
  std::error_code error;
  if (fs::exists(dir, error) && !fs::is_directory(dir, error)) {
    throw Error("output.dir '" + dir + "' exists and is not a directory",
                "point output.dir at a folder (it is created when missing)");
  }
  const std::vector<std::string> found = earlier_run_outputs(dir);
  if (found.empty()) return;
  if (!overwrite) {
    throw Error("output.dir '" + dir + "' already holds the outputs of an earlier run (" + listed(found) + "); " +
                    command + " does not replace them",
                "give a new output.dir (--output.dir=DIR), or add --output.overwrite=true to remove them and "
                "start afresh" + extra_fix);
  }
  for (const std::string& name : found) {
    const fs::path path = fs::path(dir) / (name.back() == '/' ? name.substr(0, name.size() - 1) : name);
    fs::remove_all(path, error);
    if (error) {
      throw Error("output.overwrite: cannot remove '" + path.string() + "': " + error.message(),
                  "check the permissions of output.dir, or give a new output.dir");
    }
  }
}

bool claim_train_output_dir(const RunOptions& options, MPI_Comm world) {
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  int ok = 1;
  if (rank == 0 && options.checkpoint.resume.empty()) {
    try {
      claim_output_dir(options.output.dir, options.output.overwrite, "strata train",
                       ", or --resume to continue that run from its checkpoints");
    } catch (const Error& e) {
      std::fprintf(stderr, "strata: error: %s\n", e.what());
      std::fflush(stderr);
      ok = 0;
    }
  }
  comm::broadcast(&ok, 1, MPI_INT, 0, world);
  return ok != 0;
}

}  // namespace strata::runtime
