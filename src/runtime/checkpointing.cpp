#include "runtime/checkpointing.hpp"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "comm/mpi_channel.hpp"
#include "common/error.hpp"
#include "config/deck.hpp"
#include "io/checkpoint_directory.hpp"
#include "model/model.hpp"
#include "model/optimizers.hpp"
#include "runtime/batch_source.hpp"
#include "strata/config.hpp"

namespace strata::runtime {

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

// Rank 0: the newest candidate that validates, falling back along the list and
// saying so; empty for "auto" with nothing to resume. Throws strata::Error.
std::string pick_checkpoint(const RunOptions& options) {
  const bool automatic = options.checkpoint.resume == "auto";
  if (automatic && (options.checkpoint.dir.empty() || !std::filesystem::is_directory(options.checkpoint.dir) ||
                    io::complete_checkpoints(options.checkpoint.dir).empty())) {
    spdlog::info("checkpoint.resume = auto: no checkpoint in '{}' yet, starting fresh", options.checkpoint.dir);
    return {};
  }
  const auto candidates =
      io::resume_candidates(automatic ? std::string("latest") : options.checkpoint.resume, options.checkpoint.dir);
  const int dim = options.model.embedding_dim;
  const DataShape shape = data_shape(options.data);
  io::ExpectedShape expected;
  expected.embedding_dim = dim;
  expected.row_width = dim + model::make_sparse_optimizer(options.optim)->state_width(dim);
  expected.num_tables = shape.num_tables;
  expected.num_dense = shape.num_dense;
  expected.dense_values = static_cast<int64_t>(
      model::make_model(options.model, shape.num_dense, shape.num_tables, options.train.seed)->parameters().size());
  expected.dense_optimizer = options.optim.dense;
  expected.sparse_optimizer = options.optim.sparse;
  std::string failures;
  for (const auto& path : candidates) {
    try {
      io::validate_checkpoint(path, expected);
      if (path != candidates.front()) spdlog::warn("resuming from {} (the newer ones are damaged)", path);
      return path;
    } catch (const Error& e) {
      spdlog::warn("checkpoint {} is not usable, trying an older one: {}", path, e.what());
      failures += "\n  " + path + ": " + e.what_failed();
    }
  }
  throw Error("no usable checkpoint for checkpoint.resume = '" + options.checkpoint.resume + "'" + failures,
              "point --resume (checkpoint.resume) at a complete checkpoint file or its directory");
}

}  // namespace

std::string choose_resume_checkpoint(const RunOptions& options, MPI_Comm world) {
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  std::string message;  // "1" + path, or "0" + error
  if (rank == 0) {
    try {
      message = "1" + pick_checkpoint(options);
    } catch (const Error& e) {
      message = "0" + std::string(e.what());
    }
  }
  uint64_t size = message.size();
  comm::check_mpi(MPI_Bcast(&size, 1, MPI_UINT64_T, 0, world), "MPI_Bcast");
  message.resize(size);
  comm::check_mpi(MPI_Bcast(message.data(), static_cast<int>(size), MPI_CHAR, 0, world), "MPI_Bcast");
  if (message[0] != '1') throw Error(message.substr(1));
  return message.substr(1);  // empty: checkpoint.resume = auto and nothing to resume
}

}  // namespace strata::runtime
