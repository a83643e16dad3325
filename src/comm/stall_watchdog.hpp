// The stall watchdog of a rank (runtime.stall_timeout_s). Every wait in strata
// polls and sleeps through comm::Backoff; while the watchdog is armed, a wait
// that has seen no progress for the timeout throws strata::StallError naming
// this rank, what it waits for and its step, so that a stopped or hung peer
// ends the job instead of stalling it for ever.
//
// Progress is anything that moves the job: a message arrived, a request
// completed, a step finished; each restarts the clock. Ranks that may idle
// while training goes on (a server whose rows all sit in the trainers' caches)
// hear of it from trainer 0, which sends them a heartbeat (kTagProgress) after
// a completed step at most once a second (or every quarter of the timeout). Time spent outside
// waits (a long step, a checkpoint write, this process being stopped) never
// counts, so a healthy rank reaches the timeout only when no step completes:
// the rank it waits for, directly or not, has stopped answering.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace strata::comm {

using WaitClock = std::chrono::steady_clock;

struct StallWatchdogOptions {
  double timeout_s = 0;                       // no progress for this long is a stall (<= 0: off)
  std::string self;                           // this rank in reports, e.g. "trainer 1 (rank 1)"
  std::function<std::string(int)> name_rank;  // world rank -> "producer 0 (rank 2)"; empty: "rank 2"
  std::string fix;                            // how to fix a stall, appended to every StallError
  std::vector<int> heartbeat_to;              // ranks of `comm` told of completed steps (trainer 0: producers, servers)
  MPI_Comm comm = MPI_COMM_WORLD;             // the job's ranks, which name_rank and heartbeat_to number
};

// Process-wide, for the thread that runs the rank's loops. Cheap when off.
class StallWatchdog {
 public:
  static void arm(StallWatchdogOptions options);
  static void disarm();
  static bool armed();
  static double timeout_s();
  // The clock restarts: a message arrived, a request completed.
  static void progress();
  // A training step completed here: progress, and a heartbeat to
  // options.heartbeat_to when the last one is a second (a quarter of the timeout) old.
  static void step_completed();
  // What this rank is working through, for the report: ("step", 417) -> "in step 417".
  static void set_step(const char* unit, int64_t number);
  // "producer 0 (rank 2)" for a world rank (the runtime's names when armed).
  static std::string name_rank(int world_rank);
};

// Names what this rank waits for while in scope, in its role's words ("its
// batch from producer 0 (rank 2)"); the innermost one goes into the report.
// `describe` runs only when a wait stalls; what it captures must outlive the scope.
class WaitingFor {
 public:
  explicit WaitingFor(std::function<std::string()> describe);
  ~WaitingFor();
  WaitingFor(const WaitingFor&) = delete;
  WaitingFor& operator=(const WaitingFor&) = delete;

  std::string describe() const { return describe_(); }

 private:
  std::function<std::string()> describe_;
  const WaitingFor* outer_;
};

// One wait (held by comm::Backoff): when it began and what its polls looked
// for. The comm layer's polls note their target into the innermost wait of the
// thread; check() throws StallError when the wait has stalled.
class WaitRecord {
 public:
  WaitRecord();
  ~WaitRecord();
  WaitRecord(const WaitRecord&) = delete;
  WaitRecord& operator=(const WaitRecord&) = delete;

  // Called between polls (Backoff::pause); the poll targets noted since the
  // previous call are kept for the report, then cleared.
  void check();

  // A poll that found nothing: a message with `tag` from `source` of `comm`
  // (MPI_ANY_SOURCE: any rank), or a request (what, and a collective's communicator).
  static void note_message(MPI_Comm comm, int source, int tag);
  static void note_send(MPI_Comm comm, int dest, int tag);
  static void note_request(const char* what, MPI_Comm comm = MPI_COMM_NULL);

 private:
  struct Target {
    const char* what = nullptr;  // a request; nullptr: a message
    MPI_Comm comm = MPI_COMM_NULL;
    int source = 0;              // or the destination of a send
    int tag = 0;
    bool send = false;
  };
  static constexpr int kTargets = 4;
  void note(const Target& target);
  std::string describe(double waited_s) const;

  WaitClock::time_point start_;
  Target targets_[kTargets];
  int noted_ = 0;      // targets noted since the last check
  Target reported_[kTargets];
  int reported_count_ = 0;
  WaitRecord* outer_;
};

}  // namespace strata::comm
