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
// directory or "latest") and checks each candidate, newest first: its deck must
// match this run's in every key that changes the numbers (a difference is an
// error naming each key, io/checkpoint_identity.hpp), its structure, shapes and
// dense checksums must hold (rank 0), and so must the checksums of its rows,
// which every rank checks a share of; the ranks agree on the outcome before
// any of them moves on, and a damaged file falls back to the next older one
// with a warning naming it and why. strata::Error, the same on every rank, when
// none is usable. "auto" is "latest" when checkpoint.dir holds a complete
// checkpoint and a fresh start (empty path) when it holds none.
std::string choose_resume_checkpoint(const RunOptions& options, MPI_Comm world);

// The run that resumes from `path`, with its header (same on every rank).
struct ResumePoint {
  std::string path;
  io::CheckpointHeader header;
  bool active() const { return !path.empty(); }
};

// Collective over `world`, before any role starts: creates checkpoint.dir,
// chooses the checkpoint to resume (choose_resume_checkpoint), and settles the
// run id every checkpoint of this job carries: the resumed checkpoint's, or a
// new one at a fresh start. A fresh start refuses a checkpoint.dir that holds
// checkpoints, and a resume one that holds checkpoints of another run id,
// unless checkpoint.overwrite = true, which removes them first. strata::Error,
// the same on every rank, naming the directory or file and the fixes.
ResumePoint prepare_checkpoints(const RunOptions& options, MPI_Comm world);

// This job's run id, as prepare_checkpoints agreed it ("" before that).
const std::string& run_id();

}  // namespace strata::runtime
