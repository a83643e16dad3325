#include "app/tune_command.hpp"

#include <mpi.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "comm/collectives.hpp"
#include "comm/mpi_channel.hpp"
#include "comm/wire.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "common/exit_codes.hpp"
#include "common/stall_error.hpp"
#include "config/deck.hpp"
#include "model/optimizers.hpp"
#include "config/model_set.hpp"
#include "runtime/model_set_job.hpp"
#include "runtime/output_dir.hpp"
#include "runtime/preemption.hpp"
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

// Rank 0's next order to every rank. The others wait politely: rank 0 may
// think for a while (the window estimate reads the data), and ranks spinning
// in a blocking MPI_Bcast would take the cores it thinks on.
void broadcast_politely(void* data, int count, MPI_Datatype type) {
  comm::broadcast(data, count, type, 0, MPI_COMM_WORLD);
}

TrialOrder broadcast(const TrialOrder& order) {
  std::vector<char> bytes = encode(order);
  uint64_t size = bytes.size();
  broadcast_politely(&size, 1, MPI_UINT64_T);
  bytes.resize(size);
  broadcast_politely(bytes.data(), static_cast<int>(size), MPI_BYTE);
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

// largest_window_rows reads the trial's data once over; trials that differ only
// in what cannot change the rows a window holds (learning rates and the other
// optimizer settings, outputs) share one reading.
int64_t largest_window_rows_once(const RunOptions& options, int64_t steps) {
  static std::map<std::string, int64_t> known;
  RunOptions key_options = options;
  key_options.optim = OptimizerOptions{};
  key_options.output = OutputOptions{};
  key_options.tune = TuneOptions{};
  const std::string key = to_ini(key_options) + "\nsteps = " + std::to_string(steps);
  auto found = known.find(key);
  if (found == known.end()) found = known.emplace(key, runtime::largest_window_rows(options, steps)).first;
  return found->second;
}

// Rank 0: turns the plugin's next trial into an order (with its pre-run checks).
// `side_by_side` trials share the node (tune.co_train), so their budgets add up.
TrialOrder next_order(Tuner& tuner, const RunOptions& base, const std::vector<std::string>& args, int world_size,
                      int nodes, int side_by_side, std::optional<Trial>& trial) {
  TrialOrder order;
  trial = tuner.ask();
  if (!trial) return order;
  order.run = true;
  order.number = trial->number;
  char dir[64];
  std::snprintf(dir, sizeof(dir), "/trial-%05lld", static_cast<long long>(trial->number));
  const int64_t steps = base.tune.warmup_steps + base.tune.trial_steps;
  const bool quality = base.tune.objective != "samples_per_s";
  std::vector<std::string> fixed = overrides(*trial);
  fixed.push_back("--train.steps=" + std::to_string(steps));
  // A quality objective is measured on the held-out data after the steps.
  fixed.push_back(quality ? "--train.eval=true" : "--train.eval=false");
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
      const int64_t window = largest_window_rows_once(options, steps);
      if (window > l1_rows) {
        order.skip_reason = "store.l1_mb = " + format_number(options.store.l1_mb) + " holds " +
                            std::to_string(l1_rows) + " rows but a prefetch window needs " + std::to_string(window);
      }
      // Every budget fits the machine on its own (the deck checks that); the
      // layout's ranks together (and the trials beside it) must fit it too.
      const double memory = physical_memory_mib();
      const double budgets = side_by_side *
                             (double(options.layout.trainers) * options.store.l1_mb +
                              double(options.layout.producers) * options.store.l2_mb) / double(std::max(nodes, 1));
      if (order.skip_reason.empty() && memory > 0 && budgets > memory) {
        order.skip_reason = "the layout's budgets do not fit in memory: " +
                            (side_by_side > 1 ? std::to_string(side_by_side) + " co-trained trials x (" : "") +
                            std::to_string(options.layout.trainers) + " trainers x store.l1_mb = " +
                            format_number(options.store.l1_mb) + " MiB + " + std::to_string(options.layout.producers) +
                            " producers x store.l2_mb = " + format_number(options.store.l2_mb) + " MiB" +
                            (side_by_side > 1 ? ")" : "") + " is " + std::to_string(int64_t(budgets + 0.5)) +
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

int layout_ranks(const RunOptions& options) {
  return options.layout.producers + options.layout.trainers + options.layout.servers;
}

// tune.co_train > 1: what a search must be for its trials to train side by side.
void check_co_train(const RunOptions& base, int world_size) {
  const int n = base.tune.co_train;
  if (n == 1) return;
  const std::string named = "tune.co_train = " + std::to_string(n);
  if (base.tune.objective == "samples_per_s") {
    throw Error(named + " trains its trials side by side on the same cores, so each one's samples/s would "
                    "measure the others (tune.objective = samples_per_s)",
                "set tune.objective = eval_auc or eval_logloss, or tune.co_train = 1 to time trials alone");
  }
  if (!base.tune.space_layout.empty()) {
    throw Error(named + " gives every trial the deck's layout, but tune.space_layout = " + base.tune.space_layout +
                    " changes it",
                "leave tune.space_layout empty with tune.co_train > 1, or search layouts with tune.co_train = 1");
  }
  const int ranks = layout_ranks(base);
  if (world_size != n * ranks) {
    throw Error(named + " needs " + std::to_string(n) + " x the layout's " + std::to_string(ranks) +
                    " ranks (producers + trainers + servers) = " + std::to_string(n * ranks) +
                    " ranks, but the job has " + std::to_string(world_size),
                "run mpirun -n " + std::to_string(n * ranks) + ", or set tune.co_train = " +
                    std::to_string(std::max(1, world_size / std::max(ranks, 1))));
  }
}

std::vector<TrialOrder> broadcast(const std::vector<TrialOrder>& pass) {
  uint64_t count = pass.size();
  broadcast_politely(&count, 1, MPI_UINT64_T);
  std::vector<TrialOrder> out;
  for (uint64_t i = 0; i < count; ++i) out.push_back(broadcast(i < pass.size() ? pass[i] : TrialOrder{}));
  return out;
}

// The options a trial trains with: its order's command line, neither tracing nor checkpointing.
RunOptions trial_options(const TrialOrder& order, const RunOptions& base) {
  RunOptions options = parse_run_options(order.args);
  options.measure_after_steps = base.tune.warmup_steps;
  options.output.trace.clear();
  options.checkpoint = CheckpointOptions{};
  return options;
}

std::string trial_model_name(int64_t number) {
  char name[32];
  std::snprintf(name, sizeof(name), "trial_%05lld", static_cast<long long>(number));
  return name;
}

// Runs one pass of trials: alone (one order), or side by side as the co-trained
// models of one job, sharing its producers' pass over the data. Returns, on rank
// 0, each trial's summary (null when its run ended without one) and the exit code.
std::pair<std::vector<nlohmann::json>, int> run_pass(const std::vector<TrialOrder>& pass, const RunOptions& base);

// A trial that throws (a non-finite loss, a bad file) ends the search as it
// would end strata train: every rank of the job hears of it and exits with its
// code, instead of the other ranks waiting for ranks that left (trials.csv and
// an Optuna study keep the trials before it).
std::pair<std::vector<nlohmann::json>, int> run_pass_or_exit(const std::vector<TrialOrder>& pass,
                                                             const RunOptions& base) {
  try {
    return run_pass(pass, base);
  } catch (const StallError&) {
    throw;  // reported by the stall path
  } catch (const InputError& e) {
    runtime::exit_failed(kExitBadInput, e.what(), world_rank());
  } catch (const Error& e) {
    runtime::exit_failed(kExitFailed, e.what(), world_rank());
  }
}

std::pair<std::vector<nlohmann::json>, int> run_pass(const std::vector<TrialOrder>& pass, const RunOptions& base) {
  std::vector<nlohmann::json> summaries(pass.size());
  if (base.tune.co_train == 1) {
    runtime::TrainJobResult result = runtime::run_train_job_with_result(trial_options(pass[0], base), MPI_COMM_WORLD);
    summaries[0] = result.summary;
    return {summaries, result.exit_code};
  }
  ModelSet set;
  for (const TrialOrder& order : pass) {
    set.models.push_back({trial_model_name(order.number), trial_options(order, base)});
    set.names.push_back(set.models.back().name);
  }
  set.output_dir = base.output.dir + "/pass-" + trial_model_name(pass[0].number).substr(6);
  // A short last pass leaves ranks without a trial: they wait for the others.
  const int used = static_cast<int>(pass.size()) * layout_ranks(base);
  int world_size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm job = MPI_COMM_WORLD;  // a full pass (making a communicator costs a blocking agreement over all ranks)
  if (used < world_size) {
    comm::arrive_together(MPI_COMM_WORLD);
    comm::check_mpi(MPI_Comm_split(MPI_COMM_WORLD, world_rank() < used ? 0 : MPI_UNDEFINED, world_rank(), &job),
                    "MPI_Comm_split");
  }
  runtime::ModelSetResult result;
  if (job != MPI_COMM_NULL) {
    result = runtime::run_model_set_job_with_result(set, job);
    if (job != MPI_COMM_WORLD) MPI_Comm_free(&job);
  }
  comm::barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    const nlohmann::json& models = result.summary.is_object() ? result.summary["models"] : nlohmann::json();
    for (size_t t = 0; t < pass.size(); ++t) {
      if (models.is_object() && models.contains(set.names[t])) summaries[t] = models[set.names[t]];
    }
  }
  return {summaries, result.exit_code};
}

// What a trial's run gives the search: its objective, or why it failed.
// A co-trained trial is judged by its own summary, whatever became of the others of its pass.
TrialOutcome outcome_of(const nlohmann::json& summary, int exit_code, const std::string& objective) {
  if (!summary.is_object()) {
    return TrialOutcome::failed(exit_code != 0 ? "the run exited with code " + std::to_string(exit_code) +
                                                     " (its error is in the log)"
                                               : std::string("the run wrote no summary"));
  }
  if (summary.value("preempted", false)) return TrialOutcome::failed("the run was preempted before its last step");
  if (objective == "samples_per_s") {
    const double value = summary.value("measured_samples_per_s", 0.0);
    return value > 0 ? TrialOutcome::completed(value) : TrialOutcome::failed("no samples were measured");
  }
  if (summary.value("eval_samples", 0.0) <= 0) {
    return TrialOutcome::failed("tune.objective = " + objective +
                                " needs held-out data, but no evaluation sample was read (data.eval, or the "
                                "synthetic source's data.synthetic_eval_samples)");
  }
  return TrialOutcome::completed(summary.value(objective, 0.0));
}

}  // namespace

int run_tune_command(const std::vector<std::string>& args) {
  const RunOptions base = parse_run_options(args);
  int world_size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  const int on_node = comm::ranks_on_node(MPI_COMM_WORLD);
  const int nodes = (world_size + on_node - 1) / std::max(on_node, 1);  // the job's ranks are spread over these
  const int co_train = base.tune.co_train;
  const int trial_world = world_size / co_train;  // the ranks one trial runs on
  const bool root = world_rank() == 0;
  const Objective objective = Objective::named(base.tune.objective);
  std::unique_ptr<Tuner> tuner;
  std::unique_ptr<TrialLog> log;
  // The plugin lives on rank 0; if it cannot start, every rank must hear why.
  TrialOrder startup;
  if (root) {
    try {
      check_co_train(base, world_size);
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
      tuner = std::make_unique<Tuner>(base.tune, SearchSpace::from_options(base.tune), objective);
      log = std::make_unique<TrialLog>(base.output.dir, tuner->space(), tuner->objective());
      startup.run = true;
    } catch (const Error& e) {
      startup.skip_reason = e.what();
    }
  }
  startup = broadcast(startup);
  if (!startup.run) throw Error(startup.skip_reason);
  if (root) {
    spdlog::info("strata tune: plugin {}, {} trials of {} + {} warm-up steps on {} ranks{}, objective {} ({}); "
                 "trials in {}",
                 base.tune.plugin, base.tune.trials, base.tune.trial_steps, base.tune.warmup_steps, world_size,
                 co_train > 1 ? ", " + std::to_string(co_train) + " co-trained at a time" : std::string(),
                 objective.name, to_string(objective.direction), log->csv_path());
  }
  const auto search_start = std::chrono::steady_clock::now();
  int told = 0;
  auto report = [&](const Trial& trial, const TrialOutcome& outcome, double seconds) {
    tuner->tell(trial, outcome);
    log->record(trial, outcome, seconds);
    ++told;
    if (outcome.state == TrialOutcome::State::complete) {
      spdlog::info("trial {}: {} {:.6g} ({:.1f} s)", trial.number, objective.name, outcome.value, seconds);
    } else {
      spdlog::info("trial {}: {} ({})", trial.number, to_string(outcome.state), outcome.reason);
    }
  };
  while (true) {
    // Rank 0 gathers the pass: up to co_train trials that will run (pruned ones
    // are told at once, so the sampler hears of them before its next proposal).
    std::vector<TrialOrder> pass;
    std::vector<Trial> trials;
    if (root) {
      try {
        while (static_cast<int>(pass.size()) < co_train) {
          std::optional<Trial> trial;
          TrialOrder order = next_order(*tuner, base, args, trial_world, nodes, co_train, trial);
          if (!order.run) break;
          if (!order.skip_reason.empty()) {
            report(*trial, order.failed ? TrialOutcome::failed(order.skip_reason)
                                        : TrialOutcome::pruned(order.skip_reason), 0.0);
            continue;
          }
          pass.push_back(std::move(order));
          trials.push_back(*trial);
        }
      } catch (...) {
        broadcast(std::vector<TrialOrder>{});  // release the other ranks, then report
        throw;
      }
    }
    pass = broadcast(pass);
    if (pass.empty()) break;
    const auto start = std::chrono::steady_clock::now();
    const auto [summaries, exit_code] = run_pass_or_exit(pass, base);
    init_logging(world_rank(), "tune", base.output.log_level);  // the trial named this rank's lines
    if (!root) continue;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (size_t t = 0; t < pass.size(); ++t) report(trials[t], outcome_of(summaries[t], exit_code, objective.name), seconds);
    log->write_best_deck([&](const Trial& best) {
      std::vector<std::string> best_args = with_overrides(args, overrides(best));
      RunOptions best_options = parse_run_options(best_args);
      best_options.output.dir = base.output.dir + "/best";
      best_options.output.overwrite = false;  // a run of best.ini must not replace an earlier one unasked
      best_options.tune.co_train = 1;         // a deck for strata train (and a later search of one model)
      return to_ini(best_options);
    });
  }
  int completed = 0;
  if (root) {
    const double hours = std::chrono::duration<double>(std::chrono::steady_clock::now() - search_start).count() / 3600;
    spdlog::info("strata tune: {} trials in {:.1f} s ({:.0f} trials per hour{})", told, hours * 3600,
                 hours > 0 ? told / hours : 0.0,
                 co_train > 1 ? ", " + std::to_string(co_train) + " co-trained at a time" : std::string());
    if (auto best = log->best()) {
      spdlog::info("best: trial {} at {} {:.6g}; deck {}", best->trial.number, objective.name, best->outcome.value,
                   log->best_deck_path());
      completed = 1;
    }
  }
  // A search in which no trial completed found nothing: every rank fails alike.
  comm::broadcast(&completed, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!completed) {
    throw Error("no trial of the search completed (each was pruned or failed: see " + base.output.dir +
                    "/trials.csv); no best.ini written",
                "widen the limits that pruned them (tune.l1_limit_mb, tune.l2_limit_mb) or move tune.space_* "
                "inside them, and check the reasons of failed trials in trials.csv");
  }
  return 0;
}

}  // namespace strata
