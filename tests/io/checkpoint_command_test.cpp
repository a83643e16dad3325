// `strata ckpt info|digest|verify|config FILE` on a real checkpoint: the digest
// is params_digest of the same numbers, info shows the header and positions,
// and bad invocations are strata::Errors.
#include <gtest/gtest.h>
#include <mpi.h>

#include "app/ckpt_command.hpp"
#include "checkpoint_fixture.hpp"
#include "io/params_digest.hpp"

namespace strata {
namespace {

using io::testing::CheckpointCase;
using io::testing::ScratchDirectory;

std::string run_captured(const std::vector<std::string>& args) {
  ::testing::internal::CaptureStdout();
  int code = -1;
  try {
    code = run_ckpt_command(args);
  } catch (...) {
    ::testing::internal::GetCapturedStdout();
    throw;
  }
  EXPECT_EQ(code, 0);
  return ::testing::internal::GetCapturedStdout();
}

TEST(CkptCommand, InfoDigestVerifyConfig) {
  const ScratchDirectory dir(MPI_COMM_SELF);
  CheckpointCase c;
  const std::string path = dir.file("ckpt-0000000500.h5");
  c.write(MPI_COMM_SELF, path);

  const std::string digest = run_captured({"digest", path});
  EXPECT_EQ(digest, io::params_digest(c.dense_values(), c.dense_state(), 500, io::testing::sorted_rows(c.all_rows())) + "\n");

  const std::string info = run_captured({"info", path});
  for (const char* part : {"500 completed; next: epoch 2, step 17", "128000 (4352 in this epoch)", "1 producer, 2 trainers, 1 server",
                           "store.mode = tiered", "embedding_dim 4, row width 12", "145 values in 5 slices",
                           "bottom.0.weight", "(3, 2, 5)", "100 rows; optimizer adagrad",
                           "reader at offset 123456789012, line 4242", "4 x 16 counters", "train_seed 18364758544493064720"}) {
    EXPECT_NE(info.find(part), std::string::npos) << part << "\n" << info;
  }
  EXPECT_NE(run_captured({"verify", path}).find("every dataset matches its checksum"), std::string::npos);
  EXPECT_EQ(run_captured({"config", path}), c.header().config_ini);
  EXPECT_NE(run_captured({"--help"}).find("strata ckpt info FILE"), std::string::npos);
}

TEST(CkptCommand, Errors) {
  const ScratchDirectory dir(MPI_COMM_SELF);
  EXPECT_THROW(run_captured({}), Error);
  EXPECT_THROW(run_captured({"info"}), Error);
  EXPECT_THROW(run_captured({"dump", dir.file("x.h5")}), Error);
  try {
    run_captured({"info", dir.file("missing.h5")});
    ADD_FAILURE() << "a missing file was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.h5' does not exist"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata
