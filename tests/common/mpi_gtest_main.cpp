// Shared GoogleTest main for every strata test: initialises MPI and the backend, and
// combines results across ranks so that a failure on any rank fails the test.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "backend/device.hpp"

namespace {

// Prints failures from every rank with a "[rank N]" prefix.
class RankPrefixListener : public testing::EmptyTestEventListener {
 public:
  explicit RankPrefixListener(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (result.failed()) {
      std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_,
                   result.file_name() ? result.file_name() : "?", result.line_number(),
                   result.summary());
    }
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  testing::InitGoogleTest(&argc, argv);
  strata::backend::initialize_runtime(argc, argv);
  auto& listeners = testing::UnitTest::GetInstance()->listeners();
  listeners.Append(new RankPrefixListener(rank));
  if (rank != 0) delete listeners.Release(listeners.default_result_printer());
  int local = RUN_ALL_TESTS();
  int global = 0;
  MPI_Allreduce(&local, &global, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  strata::backend::finalize_runtime();
  MPI_Finalize();
  return global;
}
