#include "runtime/model_set_job.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>

#include "comm/collectives.hpp"
#include "comm/mpi_channel.hpp"
#include "common/error.hpp"
#include "common/stall_error.hpp"
#include "common/exit_codes.hpp"
#include "io/metrics_writer.hpp"
#include "runtime/output_dir.hpp"
#include "runtime/preemption.hpp"
#include "runtime/shared_ingest.hpp"
#include "runtime/shared_tables.hpp"
#include "runtime/train_job.hpp"

namespace strata::runtime {
namespace {

int model_ranks(const RunOptions& options) {
  return options.layout.trainers + options.layout.producers + options.layout.servers;
}

// What the job's summary.json says of one model (its own summary.json has everything).
nlohmann::json model_entry(const NamedModel& model, const nlohmann::json& summary, int first_rank) {
  nlohmann::json entry = {{"kind", model.options.model.kind},
                          {"first_world_rank", first_rank},
                          {"ranks", model_ranks(model.options)},
                          {"summary", model.name + "/summary.json"}};
  for (const char* key : {"params_digest", "steps", "samples", "samples_per_s", "train_seconds", "train_logloss",
                          "eval_auc", "eval_logloss", "eval_samples", "eval_hr_at_10", "eval_ndcg_at_10",
                          "cpu_us_per_sample", "levels", "bytes_per_sample", "preempted"}) {
    if (summary.contains(key)) entry[key] = summary[key];
  }
  return entry;
}

// A resumed job does not train again a model that finished in an earlier run
// of it (preempted after that model was done): its summary.json says so. The
// job's output.dir was claimed fresh when it started, so that file is this job's.
bool finished_earlier(const NamedModel& model) {
  if (model.options.checkpoint.resume.empty()) return false;
  const std::filesystem::path path = std::filesystem::path(model.options.output.dir) / "summary.json";
  std::ifstream file(path);
  if (!file) return false;
  const nlohmann::json summary = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  return summary.is_object() && summary.value("preempted", true) == false && summary.value("model", "") == model.name;
}

// The exit code every rank returns: the first failure's, else a preemption's, else 0.
int job_exit_code(int mine, MPI_Comm world) {
  int codes[2] = {mine != kExitOk && mine != kExitPreempted ? mine : 0, mine == kExitPreempted ? 1 : 0};
  comm::allreduce(codes, 2, MPI_INT, MPI_MAX, world, {}, comm::kFinishedPace);
  return codes[0] != 0 ? codes[0] : codes[1] != 0 ? kExitPreempted : kExitOk;
}

}  // namespace

int run_model_set_job(const ModelSet& set, MPI_Comm world) {
  if (!set.co_trained()) return run_train_job(set.models.front().options, world);
  return run_model_set_job_with_result(set, world).exit_code;
}

ModelSetResult run_model_set_job_with_result(const ModelSet& set, MPI_Comm world) {
  int rank = 0, size = 0;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  // Every model's checks that need the data and the model, on every rank alike,
  // before any model starts (one model's bad key must not leave the others running).
  for (const NamedModel& model : set.models) {
    try {
      check_model_reads_data(model.options);
    } catch (const Error& e) {
      if (rank == 0) std::fprintf(stderr, "strata: error: model '%s': %s\n", model.name.c_str(), e.what());
      return {kExitBadInput, {}};
    }
  }
  // The job's own folder: its summary.json beside the models' folders.
  int claimed = 1;
  if (rank == 0 && set.models.front().options.checkpoint.resume.empty()) {
    try {
      claim_output_dir(set.output_dir, set.models.front().options.output.overwrite, "strata train",
                       ", or --resume to continue that run from its checkpoints");
    } catch (const Error& e) {
      std::fprintf(stderr, "strata: error: %s\n", e.what());
      claimed = 0;
    }
  }
  comm::broadcast(&claimed, 1, MPI_INT, 0, world);
  if (!claimed) return {kExitBadInput, {}};

  // Model m runs on the world ranks after those of models 0..m-1.
  int mine = -1, first = 0;
  std::vector<int> first_ranks;
  for (size_t m = 0; m < set.models.size(); ++m) {
    first_ranks.push_back(first);
    if (rank >= first && rank < first + model_ranks(set.models[m].options)) mine = static_cast<int>(m);
    first += model_ranks(set.models[m].options);
  }
  if (first != size || mine < 0) {
    throw Error("the MPI job has " + std::to_string(size) + " ranks but the deck's models need " +
                    std::to_string(first),
                "run mpirun -n " + std::to_string(first) + " (each model's layout.trainers + producers + servers, "
                "summed over the models)");
  }
  if (rank == 0) {
    std::string list;
    for (size_t m = 0; m < set.models.size(); ++m) {
      list += (m ? ", " : "") + set.models[m].name + " (" + set.models[m].options.model.kind + ", ranks " +
              std::to_string(first_ranks[m]) + "-" +
              std::to_string(first_ranks[m] + model_ranks(set.models[m].options) - 1) + ")";
    }
    std::printf("strata train: %zu models in one job: %s\n", set.models.size(), list.c_str());
    std::fflush(stdout);
  }
  MPI_Comm job = MPI_COMM_NULL;
  comm::arrive_together(world);
  comm::check_mpi(MPI_Comm_split(world, mine, rank, &job), "MPI_Comm_split");
  NamedModel model = set.models[mine];
  model.options.model_name = model.name;
  if (set.models.size() > 1) model.options.l2_pool_mb = set.l2_pool_mb;
  int job_rank = 0;
  MPI_Comm_rank(job, &job_rank);
  // Shared ingestion: every model's producers on a node make each training
  // sample once for all of them (job ranks: trainers, producers, servers).
  const LayoutOptions& layout = model.options.layout;
  const bool producer = job_rank >= layout.trainers && job_rank < layout.trainers + layout.producers;
  std::optional<SharedIngest> ingest;
  if ((set.shared_ingest || set.l2_pool_mb > 0) && set.models.size() > 1) {
    SharedIngestOptions ingest_options;
    ingest_options.share_samples = set.shared_ingest;
    ingest_options.mb = set.shared_ingest_mb;
    ingest_options.l2_pool_mb = set.l2_pool_mb;
    ingest_options.member = {model.options.store.mode == "tiered", model.options.store.l2_min_mb,
                             model.options.store.l2_max_mb};
    try {
      ingest.emplace(world, producer, ingest_options);
    } catch (const Error& e) {
      // The pool's floors are checked on every producer alike; the others learn it from the exit.
      throw Error("models.l2_pool_mb: " + e.what_failed(), e.how_to_fix());
    }
  }
  // Shared tables: the owner's servers also serve the other sharing models'
  // trainers, which send their rows' requests there instead of to their own servers.
  std::optional<SharedTablesScope> tables;
  if (!set.share_tables.empty()) {
    auto index_of = [&](const std::string& name) {
      size_t m = 0;
      while (set.models[m].name != name) ++m;
      return m;
    };
    const size_t owner = index_of(set.share_tables.front());
    const LayoutOptions& owner_layout = set.models[owner].options.layout;
    const bool sharing =
        std::find(set.share_tables.begin(), set.share_tables.end(), model.name) != set.share_tables.end();
    SharedTablesPlan plan;
    plan.world = world;
    comm::arrive_together(world);
    comm::check_mpi(MPI_Comm_split(world, sharing && job_rank < layout.trainers ? 0 : MPI_UNDEFINED, rank,
                                   &plan.sharing_trainers),
                    "MPI_Comm_split");
    if (sharing && static_cast<size_t>(mine) != owner && job_rank < layout.trainers) {
      plan.borrower = true;
      for (int s = 0; s < owner_layout.servers; ++s) {
        plan.owner_servers.push_back(first_ranks[owner] + owner_layout.trainers + owner_layout.producers + s);
      }
    }
    plan.idle_server = sharing && static_cast<size_t>(mine) != owner && job_rank >= layout.trainers + layout.producers;
    if (static_cast<size_t>(mine) == owner && job_rank >= layout.trainers + layout.producers) {
      for (size_t k = 1; k < set.share_tables.size(); ++k) {
        const size_t guest = index_of(set.share_tables[k]);
        for (int t = 0; t < set.models[guest].options.layout.trainers; ++t) {
          plan.guest_trainers.push_back(first_ranks[guest] + t);
          plan.guest_takes_dump.push_back(t == 0);
        }
      }
    }
    model.options.tables_borrowed = sharing && static_cast<size_t>(mine) != owner;
    tables.emplace(std::move(plan));
  }
  TrainJobResult result;
  if (finished_earlier(model)) {
    if (shared_ingest_cache()) shared_ingest_cache()->retire();  // the others must not wait for it
    if (shared_batch_cache()) shared_batch_cache()->retire();
    // Its ranks wait for the others; its summary stands as written.
    if (job_rank == 0) {
      std::printf("strata train: model %s finished in an earlier run of this job (%s/summary.json): not trained "
                  "again\n", model.name.c_str(), model.options.output.dir.c_str());
      std::fflush(stdout);
      std::ifstream file(std::filesystem::path(model.options.output.dir) / "summary.json");
      result.summary = nlohmann::json::parse(file);
    }
  } else {
    // An error names its model (the ranks of each model's job are numbered from 0).
    try {
      result = run_train_job_with_result(model.options, job);
      // A model that could not start (its error is printed) leaves the models
      // sharing its tables waiting for its requests: the job ends here.
      if (tables && result.exit_code != kExitOk && result.exit_code != kExitPreempted && result.summary.is_null() &&
          std::find(set.share_tables.begin(), set.share_tables.end(), model.name) != set.share_tables.end()) {
        exit_failed(result.exit_code,
                    "model '" + model.name + "' could not start (its error is above), and the models of "
                    "models.share_tables cannot train without it",
                    rank);
      }
    } catch (const StallError&) {
      throw;  // already reported by the stall path
    } catch (const InputError& e) {
      throw InputError("model '" + model.name + "': " + e.what_failed(), e.how_to_fix());
    } catch (const Error& e) {
      throw Error("model '" + model.name + "': " + e.what_failed(), e.how_to_fix());
    }
  }
  if (ingest) ingest->finish();
  if (tables) {
    MPI_Comm sharing_trainers = shared_tables()->sharing_trainers;
    tables.reset();
    if (sharing_trainers != MPI_COMM_NULL) MPI_Comm_free(&sharing_trainers);
  }
  MPI_Comm_free(&job);

  // Each model's summary (its job rank 0 holds it) to world rank 0; a model that
  // ends first waits for the others politely (backing off, not spinning in a
  // blocking collective on cores the others train on).
  const std::string text = job_rank == 0 && !result.summary.is_null() ? result.summary.dump() : std::string();
  const int length = static_cast<int>(text.size());
  const std::vector<char> lengths_bytes = comm::gather_bytes(&length, sizeof(int), 0, world, comm::kFinishedPace);
  const std::vector<char> all_bytes = comm::gather_bytes(text.data(), length, 0, world);
  const std::string all(all_bytes.begin(), all_bytes.end());
  std::vector<int> lengths(rank == 0 ? size : 0), offsets(rank == 0 ? size : 0);
  if (rank == 0) {
    std::memcpy(lengths.data(), lengths_bytes.data(), lengths_bytes.size());
    for (int r = 0, at = 0; r < size; ++r) offsets[r] = at, at += lengths[r];
  }
  const int code = job_exit_code(result.exit_code, world);
  ModelSetResult job_result{code, {}};
  if (rank == 0) {
    nlohmann::json summary = {{"models", nlohmann::json::object()}, {"order", set.names}, {"exit_code", code}};
    double samples = 0, seconds = 0;
    for (size_t m = 0; m < set.models.size(); ++m) {
      const int root = first_ranks[m];
      if (lengths[root] == 0) continue;  // the model ended without a summary (its error is printed)
      const nlohmann::json one = nlohmann::json::parse(all.substr(offsets[root], lengths[root]));
      summary["models"][set.models[m].name] = model_entry(set.models[m], one, root);
      samples += one.value("samples", 0.0);
      seconds = std::max(seconds, one.value("train_seconds", 0.0));
    }
    if (!set.share_tables.empty()) summary["share_tables"] = set.share_tables;
    summary["samples_all_models"] = samples;
    summary["train_seconds_longest"] = seconds;
    std::filesystem::create_directories(set.output_dir);
    io::write_summary(set.output_dir, summary);
    spdlog::info("wrote {}/summary.json ({} models)", set.output_dir, set.models.size());
    job_result.summary = std::move(summary);
  }
  return job_result;
}

}  // namespace strata::runtime
