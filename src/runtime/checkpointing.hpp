// The runtime side of checkpoints (the file layout is io/checkpoint_*): what
// every rank must agree on to write one, where it goes, and which one a run
// resumes from.
//
// Protocol at a step boundary s (after step s, before step s + 1):
//  1. trainers agree (with the per-step all-reduce) to checkpoint;
//  2. tiered: each trainer sends its dirty L1 rows to its producer (they stay
//     cached, clean); every trainer sends its producer a CheckpointStamp;
//  3. each producer, once it has every stamp (and every flushed L1), writes its
//     L2 down to the servers and answers "ready": it is parked, not inside a
//     server request, so the servers may stop serving;
//  4. trainers send the servers a kCheckpoint round with the stamp;
//  5. every rank writes its part of the HDF5 file collectively (trainer 0 the
//     dense part, servers their rows, producers their reader positions), the
//     file is closed, and world rank 0 renames it from .tmp to its final name.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

#include "config/options.hpp"
#include "io/checkpoint_file.hpp"

namespace strata::runtime {

struct CheckpointStamp {
  int64_t step = 0;            // steps completed
  int64_t epoch = 0;           // epoch of the next step
  int64_t step_in_epoch = 0;   // steps of that epoch completed
  int64_t samples = 0;         // samples trained in total
  int64_t epoch_samples = 0;   // samples of that epoch trained (synthetic data: where it continues)
  double train_seconds = 0;    // training time before this checkpoint
  int64_t dense_optimizer_steps = 0;
  int32_t preempted = 0;       // written for SIGTERM/SIGUSR1: the job stops after it
  int32_t reserved = 0;
};

// The file attributes of a checkpoint (the same on every rank).
io::CheckpointHeader checkpoint_header(const RunOptions& options, const CheckpointStamp& stamp);

// dir/ckpt-<step>.h5.tmp: where every rank writes before the rename.
std::string checkpoint_temporary(const RunOptions& options, int64_t step);
// World rank 0, after the collective close: renames into place, drops old ones, logs.
void publish_checkpoint_file(const RunOptions& options, int64_t step, double seconds);

// Collective over `world`: rank 0 resolves checkpoint.resume (a file, a
// directory or "latest"), validates candidates newest first against this run's
// shapes, logs every fallback, and broadcasts the chosen path. strata::Error on
// every rank when none is usable. "auto" is "latest" when checkpoint.dir
// holds a complete checkpoint and a fresh start (empty path) when it holds none.
std::string choose_resume_checkpoint(const RunOptions& options, MPI_Comm world);

// The run that resumes from `path`, with its header (same on every rank).
struct ResumePoint {
  std::string path;
  io::CheckpointHeader header;
  bool active() const { return !path.empty(); }
};

}  // namespace strata::runtime
