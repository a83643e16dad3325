#include "comm/mpi_channel.hpp"

#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <climits>
#include <string>
#include <thread>

#include "common/error.hpp"

namespace strata::comm {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The last sends started by send_bytes, so that a stalled wait on one can say
// to whom it goes (a request does not tell). Old entries are overwritten.
struct RecentSend {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Comm comm = MPI_COMM_NULL;
  int dest = 0;
  int tag = 0;
};
constexpr int kRecentSends = 64;
thread_local RecentSend recent_sends[kRecentSends];
thread_local int next_recent_send = 0;

const RecentSend* find_recent_send(MPI_Request request) {
  for (const RecentSend& s : recent_sends) {
    if (s.request == request && request != MPI_REQUEST_NULL) return &s;
  }
  return nullptr;
}

}  // namespace

void prepare_process_for_polite_waits() {
  setenv("OMPI_MCA_mpi_yield_when_idle", "0", /*overwrite=*/1);
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
}

JobFailure announce_job_failure(int exit_code, double linger_s) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  static int code;  // the sends read it after this returns (the process exits soon after)
  code = exit_code;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    MPI_Request request;
    // Errors are ignored: the job is ending, and a dead peer must not hide this rank's message.
    if (MPI_Isend(&code, 1, MPI_INT, peer, kTagJobFailed, MPI_COMM_WORLD, &request) == MPI_SUCCESS) {
      MPI_Request_free(&request);
    }
  }
  JobFailure best{rank, exit_code};
  auto better = [](const JobFailure& a, const JobFailure& b) {  // does a speak before b?
    const bool a_specific = a.exit_code != 1, b_specific = b.exit_code != 1;
    return a_specific != b_specific ? a_specific : a.speaker_rank < b.speaker_rank;
  };
  const auto start = std::chrono::steady_clock::now();
  while (seconds_since(start) < linger_s) {
    int found = 0;
    MPI_Message message;
    MPI_Status status;
    if (MPI_Improbe(MPI_ANY_SOURCE, kTagJobFailed, MPI_COMM_WORLD, &found, &message, &status) != MPI_SUCCESS) break;
    if (found) {
      int theirs = 0;
      MPI_Mrecv(&theirs, 1, MPI_INT, &message, MPI_STATUS_IGNORE);
      const JobFailure other{status.MPI_SOURCE, theirs};
      if (better(other, best)) best = other;
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return best;
}

void check_job_failure() {
  int found = 0;
  MPI_Message message;
  MPI_Status status;
  check_mpi(MPI_Improbe(MPI_ANY_SOURCE, kTagJobFailed, MPI_COMM_WORLD, &found, &message, &status), "MPI_Improbe");
  if (!found) return;
  int code = 0;
  check_mpi(MPI_Mrecv(&code, 1, MPI_INT, &message, MPI_STATUS_IGNORE), "MPI_Mrecv");
  throw PeerFailure(code, status.MPI_SOURCE);
}

void Backoff::pause() {
  if (polls_++ < pace_.quick_polls) return;
  check_job_failure();
  wait_.check();
  std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
  if (sleep_us_ < pace_.max_sleep_us) sleep_us_ = std::min(2 * sleep_us_, pace_.max_sleep_us);
}

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw Error(std::string(call) + " failed: " + std::string(text, length),
              "a peer rank probably died; see the first error printed by mpirun");
}

double wait_politely(MPI_Request& request, MPI_Status* status) {
  auto start = std::chrono::steady_clock::now();
  Backoff backoff;
  int done = 0;
  while (true) {
    check_mpi(MPI_Test(&request, &done, status), "MPI_Test");
    if (done) break;
    note_waiting_on(request, "a send or receive to complete");
    backoff.pause();
  }
  StallWatchdog::progress();
  return seconds_since(start);
}

void wait_all_politely(std::vector<MPI_Request>& requests) {
  for (auto& request : requests) {
    if (request != MPI_REQUEST_NULL) wait_politely(request);
  }
  requests.clear();
}

namespace {

bool probe_once(MPI_Comm comm, int source, int tag, MPI_Message& message, MPI_Status& status) {
  int found = 0;
  check_mpi(MPI_Improbe(source, tag, comm, &found, &message, &status), "MPI_Improbe");
  if (found) {
    StallWatchdog::progress();
    return true;
  }
  WaitRecord::note_message(comm, source, tag);  // into the caller's wait when not blocking
  return false;
}

}  // namespace

bool probe_politely(MPI_Comm comm, int source, int tag, MPI_Message& message, MPI_Status& status,
                    bool block) {
  if (!block) return probe_once(comm, source, tag, message, status);
  Backoff backoff;
  while (!probe_once(comm, source, tag, message, status)) backoff.pause();
  return true;
}

int receive_bytes(MPI_Comm comm, int source, int tag, std::vector<char>& buffer, double* waited_s) {
  auto start = std::chrono::steady_clock::now();
  MPI_Message message;
  MPI_Status status;
  probe_politely(comm, source, tag, message, status, true);
  if (waited_s) *waited_s = seconds_since(start);
  receive_matched(message, status, buffer);
  return status.MPI_SOURCE;
}

void receive_matched(MPI_Message& message, const MPI_Status& status, std::vector<char>& buffer) {
  int count = 0;
  check_mpi(MPI_Get_count(&status, MPI_BYTE, &count), "MPI_Get_count");
  buffer.resize(size_t(count));
  check_mpi(MPI_Mrecv(buffer.data(), count, MPI_BYTE, &message, MPI_STATUS_IGNORE), "MPI_Mrecv");
}

bool completed(MPI_Request& request) {
  int done = 0;
  check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
  return done != 0;
}

void receive_matched(MPI_Message& message, void* data, int bytes) {
  check_mpi(MPI_Mrecv(data, bytes, MPI_BYTE, &message, MPI_STATUS_IGNORE), "MPI_Mrecv");
}

void note_waiting_on(MPI_Request request, const char* otherwise, MPI_Comm comm) {
  if (!StallWatchdog::armed()) return;
  if (const RecentSend* send = find_recent_send(request)) {
    WaitRecord::note_send(send->comm, send->dest, send->tag);
  } else {
    WaitRecord::note_request(otherwise, comm);
  }
}

MPI_Request send_bytes(MPI_Comm comm, int dest, int tag, const std::vector<char>& buffer) {
  if (buffer.size() > static_cast<size_t>(INT_MAX)) {
    throw Error("message of " + std::to_string(buffer.size()) + " bytes exceeds MPI's 2 GiB count limit",
                "reduce train.batch_size or the number of tables per batch");
  }
  MPI_Request request;
  check_mpi(MPI_Isend(buffer.data(), static_cast<int>(buffer.size()), MPI_BYTE, dest, tag, comm, &request),
            "MPI_Isend");
  for (RecentSend& s : recent_sends) {  // a handle MPI reuses names only its newest send
    if (s.request == request) s.request = MPI_REQUEST_NULL;
  }
  recent_sends[next_recent_send] = RecentSend{request, comm, dest, tag};
  next_recent_send = (next_recent_send + 1) % kRecentSends;
  return request;
}

}  // namespace strata::comm
