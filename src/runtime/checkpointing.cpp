#include "runtime/checkpointing.hpp"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <functional>

#include "comm/collectives.hpp"
#include "comm/mpi_channel.hpp"
#include "common/error.hpp"
#include "config/deck.hpp"
#include "io/checkpoint_directory.hpp"
#include "io/checkpoint_identity.hpp"
#include "model/model.hpp"
#include "model/optimizers.hpp"
#include "runtime/batch_source.hpp"
#include "strata/config.hpp"

namespace strata::runtime {

namespace {

std::string& agreed_run_id() {
  static std::string id;  // one job at a time per process; set by prepare_checkpoints on every rank
  return id;
}

}  // namespace

const std::string& run_id() { return agreed_run_id(); }

io::CheckpointHeader checkpoint_header(const RunOptions& options, const CheckpointStamp& stamp) {
  const DataShape shape = data_shape(options.data);
  const int dim = options.model.embedding_dim;
  io::CheckpointHeader h;
  h.format_version = io::kCheckpointFormatVersion;
  h.step = stamp.step;
  h.epoch = stamp.epoch;
  h.step_in_epoch = stamp.step_in_epoch;
  h.samples = stamp.samples;
  h.epoch_samples = stamp.epoch_samples;
  h.train_seconds = stamp.train_seconds;
  h.config_ini = to_ini(options);
  h.strata_version = STRATA_VERSION;
  h.producers = options.layout.producers;
  h.trainers = options.layout.trainers;
  h.servers = options.layout.servers;
  h.store_mode = options.store.mode;
  h.num_dense = shape.num_dense;
  h.num_tables = shape.num_tables;
  h.embedding_dim = dim;
  h.row_width = dim + model::make_sparse_optimizer(options.optim)->state_width(dim);
  h.dense_optimizer = options.optim.dense;
  h.sparse_optimizer = options.optim.sparse;
  h.dense_optimizer_steps = stamp.dense_optimizer_steps;
  h.train_seed = options.train.seed;
  h.data_seed = options.data.data_seed;
  h.admission_counters = options.store.min_count > 1 ? options.store.admission_counters : 0;
  h.run_id = run_id();
  h.deck_fingerprint = io::deck_fingerprint(h.config_ini, to_ini(RunOptions{}));
  return h;
}

std::string checkpoint_temporary(const RunOptions& options, int64_t step) {
  return io::temporary_path(options.checkpoint.dir + "/" + io::checkpoint_file_name(step));
}

void publish_checkpoint_file(const RunOptions& options, int64_t step, double seconds) {
  const std::string final_path = options.checkpoint.dir + "/" + io::checkpoint_file_name(step);
  io::publish_checkpoint(io::temporary_path(final_path), final_path);
  const double mib = std::filesystem::file_size(final_path) / 1048576.0;
  io::remove_old_checkpoints(options.checkpoint.dir, options.checkpoint.keep);
  spdlog::info("checkpoint {}: step {}, {:.1f} MiB in {:.2f} s ({:.0f} MiB/s)", final_path, step, mib, seconds,
               mib / std::max(seconds, 1e-9));
}

namespace {

constexpr const char* kResumeKeysNote =
    "keys that may differ on resume: layout.*, train.steps, train.epochs, train.eval*, train.batch_size at the same "
    "global batch, the store's caches, links.*, output.*, checkpoint.*, tune.*, autotune.* (README, Checkpoints)";

// Broadcasts `text` from `root` to every rank of `world`.
void broadcast_text(std::string& text, int root, MPI_Comm world) {
  uint64_t size = text.size();
  comm::broadcast(&size, 1, MPI_UINT64_T, root, world);
  text.resize(size);
  if (size > 0) comm::broadcast(text.data(), static_cast<int>(size), MPI_CHAR, root, world);
}

// Runs `decide` on world rank 0 only; every rank returns its answer, or every
// rank throws the strata::Error it threw.
std::string agree_on_rank_zero(MPI_Comm world, const std::function<std::string()>& decide) {
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  std::string message;  // '1' + answer, or '0' + what failed + '\0' + how to fix
  if (rank == 0) {
    try {
      message = "1" + decide();
    } catch (const Error& e) {
      message = "0" + e.what_failed() + '\0' + e.how_to_fix();
    } catch (const std::exception& e) {
      message = "0" + std::string(e.what()) + '\0';
    }
  }
  broadcast_text(message, 0, world);
  if (message[0] == '1') return message.substr(1);
  const size_t split = message.find('\0', 1);
  throw Error(message.substr(1, split - 1), split == std::string::npos ? std::string() : message.substr(split + 1));
}

std::vector<std::string> split_paths(const std::string& joined) {
  std::vector<std::string> paths;
  for (size_t at = 0; at < joined.size();) {
    const size_t end = joined.find('\0', at);
    paths.push_back(joined.substr(at, end - at));
    at = end == std::string::npos ? joined.size() : end + 1;
  }
  return paths;
}

io::ExpectedShape expected_shape(const RunOptions& options) {
  const int dim = options.model.embedding_dim;
  const DataShape shape = data_shape(options.data);
  io::ExpectedShape expected;
  expected.embedding_dim = dim;
  expected.row_width = dim + model::make_sparse_optimizer(options.optim)->state_width(dim);
  expected.num_tables = shape.num_tables;
  expected.num_dense = shape.num_dense;
  expected.dense_values = static_cast<int64_t>(
      model::make_model(options.model, shape.num_dense, shape.num_tables, options.train.seed, shape.num_tasks)->parameters().size());
  expected.dense_optimizer = options.optim.dense;
  expected.sparse_optimizer = options.optim.sparse;
  return expected;
}

// Rank 0: the candidates of checkpoint.resume, newest first, NUL-separated;
// empty for "auto" with nothing to resume.
std::string resume_candidates(const RunOptions& options) {
  const bool automatic = options.checkpoint.resume == "auto";
  if (automatic && (options.checkpoint.dir.empty() || !std::filesystem::is_directory(options.checkpoint.dir) ||
                    io::complete_checkpoints(options.checkpoint.dir).empty())) {
    spdlog::info("checkpoint.resume = auto: no checkpoint in '{}' yet, starting fresh", options.checkpoint.dir);
    return {};
  }
  std::string joined;
  for (const auto& path :
       io::resume_candidates(automatic ? std::string("latest") : options.checkpoint.resume, options.checkpoint.dir)) {
    joined += (joined.empty() ? "" : std::string(1, '\0')) + path;
  }
  return joined;
}

// Rank 0: why `path` cannot be resumed as damaged or foreign ("" when its
// header, structure, shapes and dense checksums are good). A deck that differs
// in a key that changes the numbers is not damage: strata::Error, final.
std::string check_candidate(const RunOptions& options, const io::ExpectedShape& expected, const std::string& path) {
  io::CheckpointHeader header;
  int64_t rows = 0;
  try {
    io::CheckpointReader reader(MPI_COMM_SELF, path);
    header = reader.header();
    rows = reader.num_rows();
  } catch (const Error& e) {
    return e.what_failed();
  }
  // Trained steps and no rows: a model that trained another model's tables
  // wrote it ([models] share_tables); alone it would resume with fresh tables.
  if (header.step > 0 && rows == 0 && !options.tables_borrowed) {
    throw Error("checkpoint '" + path + "' holds no embedding rows after " + std::to_string(header.step) +
                    " steps: it was written by a model that trained another model's tables (models.share_tables), "
                    "whose checkpoints hold them",
                "resume it in the co-training job with the model that holds its tables, not alone "
                "(--models.only) or in a deck without models.share_tables");
  }
  const std::string run_ini = to_ini(options), defaults_ini = to_ini(RunOptions{});
  const std::string fix = "resume with the checkpoint's values of these keys ('strata ckpt config " + path +
                          "' prints its deck), or start a new run without --resume, in a new checkpoint.dir or "
                          "in this one with --checkpoint.overwrite=true (which removes its checkpoints); " +
                          kResumeKeysNote;
  if (!header.config_ini.empty()) {
    const auto conflicts = io::resume_deck_conflicts(header.config_ini, run_ini, defaults_ini);
    if (!conflicts.empty()) {
      throw Error("checkpoint '" + path + "' was written with a deck that differs from this run's in " +
                      std::to_string(conflicts.size()) + " key(s) that change the trained numbers:" +
                      io::describe_conflicts(conflicts),
                  fix);
    }
  } else if (!header.deck_fingerprint.empty() &&
             header.deck_fingerprint != io::deck_fingerprint(run_ini, defaults_ini)) {
    throw Error("checkpoint '" + path + "' holds no deck, and its deck fingerprint " + header.deck_fingerprint +
                    " is not this run's " + io::deck_fingerprint(run_ini, defaults_ini) +
                    ": a key that changes the trained numbers differs",
                fix);
  }
  try {
    io::validate_checkpoint(path, expected);
  } catch (const Error& e) {
    return e.what_failed();
  }
  return {};
}

// Collective: every rank checks its share of `path`'s row blocks; the failure
// of the lowest failing rank is every rank's answer, "" when all are good.
std::string damaged_rows(const std::string& path, MPI_Comm world) {
  int rank = 0, size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  std::string why;
  try {
    io::CheckpointReader(MPI_COMM_SELF, path).verify_rows(rank, size);
  } catch (const Error& e) {
    why = e.what_failed();
  } catch (const std::exception& e) {
    why = "checkpoint '" + path + "': " + e.what();
  }
  int first = why.empty() ? size : rank;
  comm::allreduce(&first, 1, MPI_INT, MPI_MIN, world);
  if (first == size) return {};
  broadcast_text(why, first, world);
  return why;
}

std::string file_names(const std::vector<std::string>& paths) {
  std::string names;
  for (size_t i = 0; i < paths.size() && i < 3; ++i) {
    names += (i ? ", " : "") + std::filesystem::path(paths[i]).filename().string();
  }
  if (paths.size() > 3) names += ", ...";
  return names;
}

// Rank 0, a fresh start: checkpoint.dir must hold no checkpoint (or, with
// checkpoint.overwrite, is emptied); the new run id.
std::string start_run(const RunOptions& options) {
  const std::string& dir = options.checkpoint.dir;
  if (!dir.empty()) {
    const std::vector<std::string> existing = io::complete_checkpoints(dir);
    if (!existing.empty() && !options.checkpoint.overwrite) {
      std::string owner;
      try {
        const std::string id = io::CheckpointReader(MPI_COMM_SELF, existing.front()).header().run_id;
        if (!id.empty()) owner = " of run " + id;
      } catch (const Error&) {
      }
      throw Error("checkpoint.dir '" + dir + "' already holds " + std::to_string(existing.size()) +
                      " checkpoint(s)" + owner + " (" + file_names(existing) +
                      "); a fresh run would overwrite and remove them",
                  "continue that run with --resume=latest, point checkpoint.dir at a new directory, or pass "
                  "--checkpoint.overwrite=true to remove them first");
    }
    if (options.checkpoint.overwrite) {
      const int removed = io::remove_all_checkpoints(dir);
      if (removed > 0) {
        spdlog::warn("checkpoint.overwrite = true: removed {} checkpoint file(s) from '{}' before starting", removed,
                     dir);
      }
    }
  }
  const std::string id = io::new_run_id();
  spdlog::info("run id {} (a fresh start)", id);
  return id;
}

// Rank 0, a resume: the run id of the checkpoint (a new one for a file older
// than run ids); checkpoint.dir may hold no checkpoint of another run id (or,
// with checkpoint.overwrite, those are removed).
std::string continue_run(const RunOptions& options, const ResumePoint& resume) {
  std::string id = resume.header.run_id;
  if (id.empty()) {
    id = io::new_run_id();
    spdlog::info("{} was written before checkpoints carried run ids: this run continues it as run {}", resume.path,
                 id);
  }
  const std::string& dir = options.checkpoint.dir;
  if (!dir.empty()) {
    std::vector<std::string> others;
    std::string other_id;
    for (const std::string& path : io::complete_checkpoints(dir)) {
      std::string theirs;
      try {
        theirs = io::CheckpointReader(MPI_COMM_SELF, path).header().run_id;
      } catch (const Error&) {
        continue;  // unreadable: no run to protect
      }
      if (!theirs.empty() && theirs != id) others.push_back(path), other_id = theirs;
    }
    if (!others.empty() && !options.checkpoint.overwrite) {
      throw Error("checkpoint.dir '" + dir + "' holds " + std::to_string(others.size()) +
                      " checkpoint(s) of another run (run " + other_id + ": " + file_names(others) +
                      "); this run continues run " + id + " from " + resume.path + " and would overwrite them",
                  "point checkpoint.dir at the directory of the run you resume or at a new directory, or pass "
                  "--checkpoint.overwrite=true to remove the other run's checkpoints first");
    }
    for (const std::string& path : others) {
      std::error_code error;
      if (!std::filesystem::remove(path, error) && error) {
        throw Error("cannot remove '" + path + "' (checkpoint.overwrite = true): " + error.message(),
                    "check the permissions of checkpoint.dir");
      }
      spdlog::warn("checkpoint.overwrite = true: removed {} of run {}", path, other_id);
    }
  }
  spdlog::info("run id {}: continuing from {}", id, resume.path);
  return id;
}

}  // namespace

std::string choose_resume_checkpoint(const RunOptions& options, MPI_Comm world) {
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  const std::vector<std::string> candidates =
      split_paths(agree_on_rank_zero(world, [&] { return resume_candidates(options); }));
  if (candidates.empty()) return {};  // checkpoint.resume = auto and nothing to resume
  const io::ExpectedShape expected = rank == 0 ? expected_shape(options) : io::ExpectedShape{};
  std::string failures;
  for (const std::string& path : candidates) {
    std::string why = agree_on_rank_zero(world, [&] { return check_candidate(options, expected, path); });
    if (why.empty()) why = damaged_rows(path, world);
    if (why.empty()) {
      if (rank == 0 && path != candidates.front()) spdlog::warn("resuming from {} (the newer ones are damaged)", path);
      return path;
    }
    if (rank == 0) spdlog::warn("checkpoint {} is not usable, trying an older one: {}", path, why);
    failures += "\n  " + path + ": " + why;
  }
  throw Error("no usable checkpoint for checkpoint.resume = '" + options.checkpoint.resume + "'" + failures,
              "point --resume (checkpoint.resume) at a complete checkpoint file or its directory");
}

ResumePoint prepare_checkpoints(const RunOptions& options, MPI_Comm world) {
  const std::string& dir = options.checkpoint.dir;
  if (!dir.empty()) {
    agree_on_rank_zero(world, [&] {
      std::error_code error;
      std::filesystem::create_directories(dir, error);
      if (error) {
        throw Error("checkpoint.dir '" + dir + "' cannot be created: " + error.message(),
                    "point checkpoint.dir at a writable directory");
      }
      return std::string();
    });
  }
  ResumePoint resume;
  if (!options.checkpoint.resume.empty()) resume.path = choose_resume_checkpoint(options, world);
  if (resume.active()) resume.header = io::CheckpointReader(MPI_COMM_SELF, resume.path).header();
  agreed_run_id() =
      agree_on_rank_zero(world, [&] { return resume.active() ? continue_run(options, resume) : start_run(options); });
  return resume;
}

}  // namespace strata::runtime
