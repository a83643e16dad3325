// The checkpoint directory: names, publication by rename, listing newest first
// (.tmp files and foreign names ignored), retention, and what --resume points at.
#include <gtest/gtest.h>
#include <mpi.h>

#include <filesystem>
#include <fstream>

#include "checkpoint_fixture.hpp"
#include "common/error.hpp"
#include "io/checkpoint_directory.hpp"

namespace strata::io {
namespace {

namespace fs = std::filesystem;
using testing::ScratchDirectory;

void touch(const std::string& path, const std::string& text = "x") { std::ofstream(path) << text; }

std::vector<std::string> names(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const std::string& path : paths) out.push_back(fs::path(path).filename().string());
  return out;
}

// strata::Error whose text holds every one of `parts`.
template <class Call>
void expect_error(Call&& call, const std::vector<std::string>& parts) {
  try {
    call();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_FALSE(e.how_to_fix().empty()) << e.what();
    for (const std::string& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(CheckpointDirectory, Names) {
  EXPECT_EQ(checkpoint_file_name(0), "ckpt-0000000000.h5");
  EXPECT_EQ(checkpoint_file_name(500), "ckpt-0000000500.h5");
  EXPECT_EQ(checkpoint_file_name(12345678901), "ckpt-12345678901.h5");
  EXPECT_EQ(checkpoint_step("ckpt-0000000500.h5"), 500);
  EXPECT_EQ(checkpoint_step(checkpoint_file_name(12345678901)), 12345678901);
  for (const char* foreign : {"ckpt-500.h5", "ckpt-0000000500.h5.tmp", "ckpt-00000005x0.h5", "model-0000000500.h5",
                              "ckpt-0000000500.hdf5", "ckpt-.h5", ""}) {
    EXPECT_EQ(checkpoint_step(foreign), -1) << foreign;
  }
  EXPECT_EQ(temporary_path("dir/ckpt-0000000500.h5"), "dir/ckpt-0000000500.h5.tmp");
  EXPECT_THROW(checkpoint_file_name(-1), Error);
}

TEST(CheckpointDirectory, RemoveAllTakesCompleteAndTemporaryCheckpointsOnly) {
  const ScratchDirectory dir(MPI_COMM_SELF);
  for (int64_t step : {10, 20}) touch(dir.file(checkpoint_file_name(step)));
  touch(temporary_path(dir.file(checkpoint_file_name(30))));
  touch(dir.file("notes.txt"));
  touch(dir.file("ckpt-500.h5"));  // not a name strata writes
  EXPECT_EQ(remove_all_checkpoints(dir.path()), 3);
  EXPECT_TRUE(complete_checkpoints(dir.path()).empty());
  EXPECT_FALSE(fs::exists(temporary_path(dir.file(checkpoint_file_name(30)))));
  EXPECT_TRUE(fs::exists(dir.file("notes.txt")));
  EXPECT_TRUE(fs::exists(dir.file("ckpt-500.h5")));
  EXPECT_EQ(remove_all_checkpoints(dir.path()), 0);
  EXPECT_EQ(remove_all_checkpoints(dir.file("missing")), 0);
}

TEST(CheckpointDirectory, PublishRenamesTheTemporary) {
  const ScratchDirectory dir(MPI_COMM_SELF);
  const std::string final_path = dir.file(checkpoint_file_name(7));
  touch(temporary_path(final_path), "contents");
  EXPECT_TRUE(complete_checkpoints(dir.path()).empty());  // not complete until published
  publish_checkpoint(temporary_path(final_path), final_path);
  EXPECT_FALSE(fs::exists(temporary_path(final_path)));
  std::ifstream in(final_path);
  std::string text;
  in >> text;
  EXPECT_EQ(text, "contents");
  EXPECT_EQ(names(complete_checkpoints(dir.path())), std::vector<std::string>{"ckpt-0000000007.h5"});
  expect_error([&] { publish_checkpoint(dir.file("gone.h5.tmp"), dir.file("gone.h5")); }, {"gone.h5.tmp"});
}

TEST(CheckpointDirectory, ListingRetentionAndResume) {
  const ScratchDirectory dir(MPI_COMM_SELF);
  for (int64_t step : {int64_t(2), int64_t(10), int64_t(100000000000), int64_t(1)}) touch(dir.file(checkpoint_file_name(step)));
  touch(dir.file("ckpt-0000000005.h5.tmp"));   // an interrupted write: stale once 10 exists
  touch(dir.file("ckpt-0000999999.h5.tmp"));   // older than step 10^11: stale too
  touch(dir.file("notes.txt"));
  touch(dir.file("ckpt-12.h5"));
  fs::create_directory(dir.file("ckpt-0000000007.h5"));  // not a regular file
  EXPECT_EQ(names(complete_checkpoints(dir.path())),
            (std::vector<std::string>{"ckpt-100000000000.h5", "ckpt-0000000010.h5", "ckpt-0000000002.h5",
                                      "ckpt-0000000001.h5"}));
  EXPECT_TRUE(complete_checkpoints(dir.file("missing")).empty());

  // resume_candidates: a directory and "latest" give the list; a file itself.
  EXPECT_EQ(names(resume_candidates(dir.path(), "")), names(complete_checkpoints(dir.path())));
  EXPECT_EQ(resume_candidates("latest", dir.path()), complete_checkpoints(dir.path()));
  EXPECT_EQ(resume_candidates(dir.file("ckpt-0000000002.h5"), dir.path()),
            std::vector<std::string>{dir.file("ckpt-0000000002.h5")});
  EXPECT_TRUE(resume_candidates("", dir.path()).empty());

  remove_old_checkpoints(dir.path(), 2);
  EXPECT_EQ(names(complete_checkpoints(dir.path())),
            (std::vector<std::string>{"ckpt-100000000000.h5", "ckpt-0000000010.h5"}));
  EXPECT_FALSE(fs::exists(dir.file("ckpt-0000000005.h5.tmp")));
  EXPECT_FALSE(fs::exists(dir.file("ckpt-0000999999.h5.tmp")));
  EXPECT_TRUE(fs::exists(dir.file("notes.txt")));
  EXPECT_TRUE(fs::exists(dir.file("ckpt-12.h5")));
  remove_old_checkpoints(dir.path(), 1);
  EXPECT_EQ(names(complete_checkpoints(dir.path())), std::vector<std::string>{"ckpt-100000000000.h5"});
  expect_error([&] { remove_old_checkpoints(dir.path(), 0); }, {"checkpoint.keep = 0"});
}

TEST(CheckpointDirectory, NewerTemporaryIsKept) {
  const ScratchDirectory dir(MPI_COMM_SELF);
  touch(dir.file(checkpoint_file_name(10)));
  touch(dir.file("ckpt-0000000020.h5.tmp"));
  remove_old_checkpoints(dir.path(), 1);
  EXPECT_TRUE(fs::exists(dir.file("ckpt-0000000020.h5.tmp")));
}

TEST(CheckpointDirectory, ResumeErrors) {
  const ScratchDirectory dir(MPI_COMM_SELF);
  expect_error([&] { resume_candidates("latest", ""); }, {"--resume=latest", "checkpoint.dir is empty"});
  expect_error([&] { resume_candidates("latest", dir.file("absent")); }, {"does not exist"});
  expect_error([&] { resume_candidates("latest", dir.path()); }, {"no complete checkpoint", dir.path()});
  expect_error([&] { resume_candidates(dir.path(), ""); }, {"no complete checkpoint", dir.path()});
  expect_error([&] { resume_candidates(dir.file("nope.h5"), ""); }, {"'" + dir.file("nope.h5") + "' does not exist"});
  touch(dir.file("ckpt-0000000003.h5.tmp"));
  expect_error([&] { resume_candidates(dir.path(), ""); }, {"no complete checkpoint", "1 .tmp file(s) are unfinished"});
}

}  // namespace
}  // namespace strata::io
