// The checkpoint directory: complete checkpoints are ckpt-<step, 10 digits>.h5;
// a file being written is <name>.tmp and becomes complete only by a rename after
// it was flushed, so a crash at any moment leaves every complete file intact.
// These helpers run on one rank (world rank 0) and touch only file names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::io {

// "ckpt-0000000500.h5" for step 500 (steps beyond 10 digits get more digits).
std::string checkpoint_file_name(int64_t step);
// The step of a complete checkpoint's file name, or -1 when `name` is not one.
int64_t checkpoint_step(const std::string& name);
// final_path + ".tmp": where the file is written before publish_checkpoint.
std::string temporary_path(const std::string& final_path);

// fsync the temporary file, rename it to final_path, fsync the directory: after
// it returns, the checkpoint survives a crash of the machine.
void publish_checkpoint(const std::string& temporary, const std::string& final_path);

// Paths of the complete checkpoints in `dir`, newest (highest step) first;
// .tmp files and foreign names are ignored; a missing `dir` has none.
std::vector<std::string> complete_checkpoints(const std::string& dir);

// Keeps the `keep` newest complete checkpoints of `dir` and removes the older
// ones, and any .tmp left by an interrupted write whose step is not newer than
// the newest complete one. strata::Error (after removing what it could) naming
// the files it could not remove.
void remove_old_checkpoints(const std::string& dir, int keep);

// Removes every checkpoint of `dir`, complete or .tmp (checkpoint.overwrite on
// a fresh start); returns how many it removed. strata::Error (after removing
// what it could) naming the files it could not remove.
int remove_all_checkpoints(const std::string& dir);

// The checkpoints --resume (checkpoint.resume) names, newest first:
//   "" -> none (a fresh start); "latest" -> the complete checkpoints of
//   checkpoint_dir; a directory -> its complete checkpoints; a file -> that file.
// For "latest" and directories the caller tries them in order and falls back to
// the next one when one fails validate_checkpoint. strata::Error when the path
// does not exist or a directory holds no complete checkpoint.
std::vector<std::string> resume_candidates(const std::string& resume, const std::string& checkpoint_dir);

}  // namespace strata::io
