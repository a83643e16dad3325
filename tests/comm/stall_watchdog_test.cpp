// The stall watchdog on the comm layer's waits: a wait with no progress for the
// timeout throws StallError naming the rank, what it waits for (the role's
// words and the message polled for) and the step; progress, heartbeats and time
// spent outside waits restart the clock; disarmed, nothing fires. On 1 and 2
// ranks (the heartbeat case needs 2).
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "comm/collectives.hpp"
#include "comm/mpi_channel.hpp"
#include "comm/stall_watchdog.hpp"
#include "common/stall_error.hpp"
#include "../common/mpi_test_util.hpp"

namespace strata::comm {
using strata::mpi_test::world_rank;

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kNeverSent = 999;  // a tag no test sends: a wait for it never completes

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

void arm(double timeout_s, std::vector<int> heartbeat_to = {}) {
  StallWatchdogOptions options;
  options.timeout_s = timeout_s;
  options.self = "tester " + std::to_string(world_rank());
  options.name_rank = [](int r) { return "peer " + std::to_string(r) + " (rank " + std::to_string(r) + ")"; };
  options.fix = "raise the timeout";
  options.heartbeat_to = std::move(heartbeat_to);
  StallWatchdog::arm(std::move(options));
}

// Waits for a message that never comes, calling `each_poll` between polls; returns the StallError's text.
std::string stall_on_missing_message(const std::function<void()>& each_poll = {}) {
  Backoff backoff;
  MPI_Message message;
  MPI_Status status;
  try {
    while (!probe_politely(MPI_COMM_WORLD, world_rank(), kNeverSent, message, status, false)) {
      if (each_poll) each_poll();
      backoff.pause();
    }
  } catch (const StallError& e) {
    EXPECT_EQ(e.how_to_fix(), "raise the timeout");
    EXPECT_GT(e.waited_s(), 0.0);
    return e.what_failed();
  }
  ADD_FAILURE() << "the message arrived";
  return {};
}

TEST(StallWatchdog, AWaitWithoutProgressNamesWhatItWaitsFor) {
  arm(0.2);
  StallWatchdog::set_step("step", 417);
  const auto start = Clock::now();
  std::string text;
  {
    WaitingFor waiting([] { return std::string("its batch from the test"); });
    text = stall_on_missing_message();
  }
  const double took = since(start);
  StallWatchdog::disarm();
  EXPECT_GE(took, 0.2);
  EXPECT_LT(took, 2.0);
  const std::string me = std::to_string(world_rank());
  EXPECT_NE(text.find("tester " + me + " waited"), std::string::npos) << text;
  EXPECT_NE(text.find("for its batch from the test"), std::string::npos) << text;
  EXPECT_NE(text.find("(tag 999) from peer " + me + " (rank " + me + ")"), std::string::npos) << text;
  EXPECT_NE(text.find("in step 417"), std::string::npos) << text;
}

TEST(StallWatchdog, ReceiveBytesStallsOnASilentPeer) {
  arm(0.2);
  std::vector<char> buffer;
  EXPECT_THROW(receive_bytes(MPI_COMM_WORLD, world_rank(), kNeverSent, buffer), StallError);
  StallWatchdog::disarm();
}

TEST(StallWatchdog, ProgressRestartsTheClock) {
  arm(0.3);
  const auto start = Clock::now();
  // Progress for 0.8 s (longer than the timeout), then none.
  const std::string text = stall_on_missing_message([&] {
    if (since(start) < 0.8) StallWatchdog::progress();
  });
  const double took = since(start);
  StallWatchdog::disarm();
  EXPECT_FALSE(text.empty());
  EXPECT_GE(took, 0.8 + 0.3 - 0.02);
}

TEST(StallWatchdog, TimeOutsideWaitsDoesNotCount) {
  arm(0.5);
  const auto start = Clock::now();
  bool slept = false;
  // One 1.2 s stretch of work (or of this process being stopped) between two polls.
  stall_on_missing_message([&] {
    if (!slept && since(start) > 0.1) {
      slept = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    }
  });
  const double took = since(start);
  StallWatchdog::disarm();
  EXPECT_GE(took, 0.1 + 1.2 + 0.5);
}

TEST(StallWatchdog, DisarmedNothingFires) {
  StallWatchdog::disarm();
  // A message to self that comes only after 3 timeouts' worth of polling.
  arm(0.1);
  StallWatchdog::disarm();
  const int payload = 5;
  MPI_Request sent = MPI_REQUEST_NULL;
  const auto start = Clock::now();
  Backoff backoff;
  MPI_Message message;
  MPI_Status status;
  while (!probe_politely(MPI_COMM_WORLD, world_rank(), kNeverSent + 1, message, status, false)) {
    if (sent == MPI_REQUEST_NULL && since(start) > 0.3) {
      MPI_Isend(&payload, 1, MPI_INT, world_rank(), kNeverSent + 1, MPI_COMM_WORLD, &sent);
    }
    backoff.pause();
  }
  int got = 0;
  MPI_Mrecv(&got, 1, MPI_INT, &message, MPI_STATUS_IGNORE);
  wait_politely(sent);
  EXPECT_EQ(got, payload);
}

TEST(StallWatchdog, CollectivesNameTheirOtherRanks) {
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (ranks < 2) GTEST_SKIP() << "needs 2 ranks";
  MPI_Barrier(MPI_COMM_WORLD);
  // Rank 1 joins the all-reduce only after rank 0's wait (0.2 s timeout) stalled;
  // the all-reduce then completes in the background (its buffer outlives it).
  static int value = 1;
  if (world_rank() == 0) {
    arm(0.2);
    std::string text;
    try {
      allreduce(&value, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    } catch (const StallError& e) {
      text = e.what_failed();
    }
    StallWatchdog::disarm();
    EXPECT_NE(text.find("an all-reduce with peer 1 (rank 1)"), std::string::npos) << text;
    const int go = 1;
    MPI_Send(&go, 1, MPI_INT, 1, kNeverSent, MPI_COMM_WORLD);
  } else {
    int go = 0;
    MPI_Recv(&go, 1, MPI_INT, 0, kNeverSent, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    allreduce(&value, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);  // non-blocking, as rank 0's (they match)
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(StallWatchdog, HeartbeatsKeepAnIdleRankWaiting) {
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (ranks < 2) GTEST_SKIP() << "needs 2 ranks";
  MPI_Barrier(MPI_COMM_WORLD);
  // Rank 0 completes "steps" for 1.5 s and sends heartbeats (every quarter of the
  // 0.4 s timeout); rank 1 waits for a message that comes only after them.
  if (world_rank() == 0) {
    arm(0.4, {1});
    const auto start = Clock::now();
    while (since(start) < 1.5) {
      StallWatchdog::step_completed();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    StallWatchdog::disarm();
    const int done = 1;
    MPI_Send(&done, 1, MPI_INT, 1, kNeverSent + 2, MPI_COMM_WORLD);
  } else {
    arm(0.4);
    const auto start = Clock::now();
    std::vector<char> buffer;
    EXPECT_NO_THROW(receive_bytes(MPI_COMM_WORLD, 0, kNeverSent + 2, buffer));
    EXPECT_GE(since(start), 1.4);
    StallWatchdog::disarm();
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace strata::comm
