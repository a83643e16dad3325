#include "app/tune_command.hpp"

#include <mpi.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "comm/collectives.hpp"
#include "comm/mpi_channel.hpp"
#include "comm/wire.hpp"
#include "common/error.hpp"
#include "config/deck.hpp"
#include "model/optimizers.hpp"
#include "runtime/output_dir.hpp"
#include "runtime/role_layout.hpp"
#include "runtime/train_job.hpp"
#include "runtime/window_estimate.hpp"
#include "store/l1_device_tier.hpp"
#include "store/producer_staging.hpp"
#include "tune/prune_rules.hpp"
#include "tune/trial_log.hpp"
#include "tune/trial_overrides.hpp"
#include "tune/tuner.hpp"

namespace strata {
namespace {

// What rank 0 tells every rank about the next trial.
struct TrialOrder {
  bool run = false;                  // false: the search is over
  int64_t number = -1;
  std::string skip_reason;           // non-empty: pruned or failed before running
  bool failed = false;               // skip_reason is a failure, not a pruning
  std::vector<std::string> args;     // the trial's full command line
};

std::vector<char> encode(const TrialOrder& order) {
  std::vector<char> bytes;
  comm::ByteWriter writer(bytes);
  writer.put<uint8_t>(order.run ? 1 : 0);
  writer.put<int64_t>(order.number);
  writer.put<uint8_t>(order.failed ? 1 : 0);
  writer.put_string(order.skip_reason);
  writer.put<uint64_t>(order.args.size());
  for (const auto& a : order.args) writer.put_string(a);
  return bytes;
}

TrialOrder decode(const std::vector<char>& bytes) {
  comm::ByteReader reader(bytes.data(), bytes.size(), "trial order");
  TrialOrder order;
  order.run = reader.get<uint8_t>() != 0;
  order.number = reader.get<int64_t>();
  order.failed = reader.get<uint8_t>() != 0;
  order.skip_reason = reader.get_string();
  const auto n = reader.get<uint64_t>();
  for (uint64_t i = 0; i < n; ++i) order.args.push_back(reader.get_string());
  return order;
}

TrialOrder broadcast(const TrialOrder& order) {
  std::vector<char> bytes = encode(order);
  uint64_t size = bytes.size();
  comm::check_mpi(MPI_Bcast(&size, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD), "MPI_Bcast");
  bytes.resize(size);
  comm::check_mpi(MPI_Bcast(bytes.data(), static_cast<int>(size), MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
  return decode(bytes);
}

// "--key=value" -> "key" (empty for anything else).
std::string key_of(const std::string& arg) {
  if (arg.rfind("--", 0) != 0) return {};
  const size_t eq = arg.find('=');
  return arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
}

// The base command line with every key in `overrides` removed, then the
// overrides appended: Boost refuses a key given twice.
std::vector<std::string> with_overrides(const std::vector<std::string>& base, const std::vector<std::string>& overrides) {
  std::vector<std::string> keys;
  for (const auto& o : overrides) keys.push_back(key_of(o));
  auto overridden = [&](const std::string& key) {
    return !key.empty() && std::find(keys.begin(), keys.end(), key) != keys.end();
  };
  std::vector<std::string> out;
  for (size_t i = 0; i < base.size(); ++i) {
    const std::string key = key_of(base[i]);
    if (overridden(key)) {
      if (base[i].find('=') == std::string::npos && i + 1 < base.size()) ++i;  // "--key value"
      continue;
    }
    out.push_back(base[i]);
  }
  out.insert(out.end(), overrides.begin(), overrides.end());
  return out;
}

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

// Rank 0: turns the plugin's next trial into an order (with its pre-run checks).
TrialOrder next_order(Tuner& tuner, const RunOptions& base, const std::vector<std::string>& args, int world_size,
                      int nodes, std::optional<Trial>& trial) {
  TrialOrder order;
  trial = tuner.ask();
  if (!trial) return order;
  order.run = true;
  order.number = trial->number;
  char dir[64];
  std::snprintf(dir, sizeof(dir), "/trial-%05lld", static_cast<long long>(trial->number));
  const int64_t steps = base.tune.warmup_steps + base.tune.trial_steps;
  std::vector<std::string> fixed = overrides(*trial);
  fixed.push_back("--train.steps=" + std::to_string(steps));
  fixed.push_back("--train.eval=false");
  fixed.push_back("--output.dir=" + base.output.dir + dir);
  fixed.push_back("--output.progress_every=1000000000");
  order.args = with_overrides(args, fixed);
  order.skip_reason = prune_reason(*trial, base.tune, world_size);
  if (!order.skip_reason.empty()) return order;
  try {
    RunOptions options = parse_run_options(order.args);
    runtime::check_model_reads_data(options);
    if (options.store.mode == "tiered") {
      const int dim = options.model.embedding_dim;
      const int width = dim + model::make_sparse_optimizer(options.optim)->state_width(dim);
      const int64_t l1_rows = store::L1DeviceTier::rows_for_budget(options.store.l1_mb, width);
      const int64_t window = runtime::largest_window_rows(options, steps);
      if (window > l1_rows) {
        order.skip_reason = "store.l1_mb = " + format_number(options.store.l1_mb) + " holds " +
                            std::to_string(l1_rows) + " rows but a prefetch window needs " + std::to_string(window);
      }
      // Every budget fits the machine on its own (the deck checks that); the
      // layout's ranks together must fit it too.
      const double memory = physical_memory_mib();
      const double budgets = (double(options.layout.trainers) * options.store.l1_mb +
                              double(options.layout.producers) * options.store.l2_mb) / double(std::max(nodes, 1));
      if (order.skip_reason.empty() && memory > 0 && budgets > memory) {
        order.skip_reason = "the layout's budgets do not fit in memory: " + std::to_string(options.layout.trainers) +
                            " trainers x store.l1_mb = " + format_number(options.store.l1_mb) + " MiB + " +
                            std::to_string(options.layout.producers) + " producers x store.l2_mb = " +
                            format_number(options.store.l2_mb) + " MiB is " + std::to_string(int64_t(budgets + 0.5)) +
                            " MiB per node, more than its " + std::to_string(int64_t(memory)) + " MiB";
      }
    }
  } catch (const Error& e) {
    // A configuration the engine refuses (e.g. more producers than trainers)
    // is infeasible, not a failed run: told as pruned, so that samplers learn
    // to avoid it (Optuna's TPE ignores failed trials and would ask again).
    order.skip_reason = "invalid configuration: " + e.what_failed();
  }
  return order;
}

}  // namespace

int run_tune_command(const std::vector<std::string>& args) {
  const RunOptions base = parse_run_options(args);
  int world_size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  const int on_node = comm::ranks_on_node(MPI_COMM_WORLD);
  const int nodes = (world_size + on_node - 1) / std::max(on_node, 1);  // the job's ranks are spread over these
  const bool root = world_rank() == 0;
  std::unique_ptr<Tuner> tuner;
  std::unique_ptr<TrialLog> log;
  // The plugin lives on rank 0; if it cannot start, every rank must hear why.
  TrialOrder startup;
  if (root) {
    try {
      // A new search never adds to another's trials.csv or reuses its trial-NNNNN
      // folders; one that continues an Optuna study gets new trial numbers from it
      // and appends (jobs/tune_sweep.sh run again).
      const bool continues_study =
          base.tune.plugin == "optuna" && !base.tune.study.empty() && std::filesystem::exists(base.tune.study);
      if (base.output.overwrite || !continues_study) {
        runtime::claim_output_dir(base.output.dir, base.output.overwrite, "strata tune",
                                  ", or continue the search's own Optuna study (--tune.plugin=optuna "
                                  "--tune.study=FILE) to add trials to it");
      }
      runtime::check_model_reads_data(base);  // no knob fixes a model that cannot read the data
      tuner = std::make_unique<Tuner>(base.tune, SearchSpace::from_options(base.tune));
      log = std::make_unique<TrialLog>(base.output.dir, tuner->space(), tuner->objective());
      startup.run = true;
    } catch (const Error& e) {
      startup.skip_reason = e.what();
    }
  }
  startup = broadcast(startup);
  if (!startup.run) throw Error(startup.skip_reason);
  if (root) {
    spdlog::info("strata tune: plugin {}, {} trials of {} + {} warm-up steps on {} ranks; trials in {}",
                 base.tune.plugin, base.tune.trials, base.tune.trial_steps, base.tune.warmup_steps, world_size,
                 log->csv_path());
  }
  while (true) {
    std::optional<Trial> trial;
    TrialOrder order;
    if (root) {
      try {
        order = next_order(*tuner, base, args, world_size, nodes, trial);
      } catch (...) {
        broadcast(TrialOrder{});  // release the other ranks, then report
        throw;
      }
    }
    order = broadcast(order);
    if (!order.run) break;
    TrialOutcome outcome;
    const auto start = std::chrono::steady_clock::now();
    if (!order.skip_reason.empty()) {
      outcome = order.failed ? TrialOutcome::failed(order.skip_reason) : TrialOutcome::pruned(order.skip_reason);
    } else {
      RunOptions options = parse_run_options(order.args);
      options.measure_after_steps = base.tune.warmup_steps;
      options.output.trace.clear();  // a trial neither traces nor checkpoints
      options.checkpoint = CheckpointOptions{};
      runtime::TrainJobResult result = runtime::run_train_job_with_result(options, MPI_COMM_WORLD);
      if (root) {
        // A run that ended early (its error is in the log above) has no summary.
        const double value =
            result.exit_code == 0 && result.summary.is_object() ? result.summary.value("measured_samples_per_s", 0.0) : 0.0;
        outcome = result.exit_code != 0
                      ? TrialOutcome::failed("the run exited with code " + std::to_string(result.exit_code) +
                                             " (its error is in the log)")
                  : value > 0 ? TrialOutcome::completed(value)
                              : TrialOutcome::failed("no samples were measured");
      }
    }
    if (!root) continue;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    tuner->tell(*trial, outcome);
    log->record(*trial, outcome, seconds);
    if (outcome.state == TrialOutcome::State::complete) {
      spdlog::info("trial {}: {:.0f} samples/s ({:.1f} s)", trial->number, outcome.value, seconds);
    } else {
      spdlog::info("trial {}: {} ({})", trial->number, to_string(outcome.state), outcome.reason);
    }
    log->write_best_deck([&](const Trial& best) {
      std::vector<std::string> best_args = with_overrides(args, overrides(best));
      RunOptions best_options = parse_run_options(best_args);
      best_options.output.dir = base.output.dir + "/best";
      best_options.output.overwrite = false;  // a run of best.ini must not replace an earlier one unasked
      return to_ini(best_options);
    });
  }
  int completed = 0;
  if (root) {
    if (auto best = log->best()) {
      spdlog::info("best: trial {} at {:.0f} samples/s; deck {}", best->trial.number, best->outcome.value,
                   log->best_deck_path());
      completed = 1;
    }
  }
  // A search in which no trial completed found nothing: every rank fails alike.
  MPI_Bcast(&completed, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!completed) {
    throw Error("no trial of the search completed (each was pruned or failed: see " + base.output.dir +
                    "/trials.csv); no best.ini written",
                "widen the limits that pruned them (tune.l1_limit_mb, tune.l2_limit_mb) or move tune.space_* "
                "inside them, and check the reasons of failed trials in trials.csv");
  }
  return 0;
}

}  // namespace strata
