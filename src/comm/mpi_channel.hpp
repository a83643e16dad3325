// Point-to-point messaging for the engine's roles: byte-buffer sends and receives,
// and waits that sleep between polls. Ranks are oversubscribed on small machines
// (producers and servers share cores with trainers), so a waiting rank must give
// its core away rather than spin inside MPI.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <exception>
#include <vector>

#include "comm/stall_watchdog.hpp"

namespace strata::comm {

// Message tags between roles.
enum Tag : int {
  kTagBatch = 100,      // producer -> trainer: a serialized batch or a control marker
  kTagProducerCtl = 101,  // trainer -> producer: epoch done / stop
  kTagWriteBack = 102,    // trainer -> producer: dirty rows leaving L1 (tiered)
  kTagFlushDone = 103,    // producer -> trainer: L2 written down to the servers (tiered)
  kTagCheckpoint = 104,   // trainer -> producer: write a checkpoint after this step (CheckpointStamp)
  kTagCheckpointReady = 105,  // producer -> trainer: caches written down, joining the checkpoint
  kTagProgress = 106,         // trainer 0 -> producers, servers: steps complete (the stall watchdog's heartbeat)
  kTagJobFailed = 107,        // any rank -> every rank: this rank failed; end the job with this exit code
  kTagProducerRequest = 202,  // producer -> server: fetch / write back rows (tiered)
  kTagProducerReply = 203,    // server -> producer
  kTagServerRequest = 200,  // trainer -> server: pull / push / collect / stop
  kTagServerReply = 201,    // server -> trainer: rows
};

// Before MPI_Init: every wait in strata polls and sleeps itself (Backoff), so
// Open MPI must not also yield the core inside each poll (what it does when
// it sees more ranks than cores: one sched_yield system call per empty poll),
// and this process's timers are made precise (1 us slack instead of 50 us) so
// a short sleep is short.
void prepare_process_for_polite_waits();

// A rank failed and told the others (announce_job_failure): every wait of the
// others throws this, and the job ends with the failed rank's exit code, its
// message printed once, by it. Not a strata::Error, so no handler of those
// takes it for an error of its own.
class PeerFailure : public std::exception {
 public:
  PeerFailure(int exit_code, int world_rank) : exit_code_(exit_code), world_rank_(world_rank) {}
  int exit_code() const { return exit_code_; }
  int world_rank() const { return world_rank_; }
  const char* what() const noexcept override { return "another rank failed"; }

 private:
  int exit_code_;
  int world_rank_;
};

// Tells every other rank of MPI_COMM_WORLD that this one is failing with
// exit_code, and collects for `linger_s` the notices of ranks that failed at
// the same time. Of the failed ranks (this one included) the one to speak for
// the job is the lowest with a specific code (bad input, a signal, a stall),
// else the lowest: a plain failure is often a consequence of the other (a
// rank that died while a message to a peer was on its way). Every failed rank
// exits with the speaker's code.
struct JobFailure {
  int speaker_rank = 0;
  int exit_code = 1;
};
JobFailure announce_job_failure(int exit_code, double linger_s);
// Throws PeerFailure if another rank has announced its failure.
void check_job_failure();

// How a wait polls. The default suits a reply that may be microseconds away.
// A wait that nobody is held up by and whose end is roughly known (a producer
// whose trainer has batches queued, taking one every few milliseconds) may
// skip the quick polls, sleep first until about when it expects the end, and
// then poll at a longer interval.
struct Pace {
  int quick_polls = 3;     // polls without sleeping first
  int first_sleep_us = 5;  // then sleeps that double from this
  int max_sleep_us = 200;  // up to this
};

// Polls as its Pace says: by default cheaply first (a reply is often
// microseconds away), then sleeps of up to 200 us, so an idle rank costs almost
// no CPU. One Backoff is one wait: with the stall watchdog armed
// (comm/stall_watchdog.hpp), pause() throws strata::StallError once the wait
// has seen no progress for the timeout, and it throws PeerFailure once another
// rank has announced its failure.
class Backoff {
 public:
  explicit Backoff(const Pace& pace = {}) : pace_(pace), sleep_us_(pace.first_sleep_us) {}
  void pause();
  void reset() { polls_ = 0, sleep_us_ = pace_.first_sleep_us; }
  void set_pace(const Pace& pace) { pace_ = pace, reset(); }

 private:
  Pace pace_;
  int polls_ = 0;
  int sleep_us_;
  WaitRecord wait_;
};

// Throws strata::Error with the MPI error string when rc != MPI_SUCCESS.
void check_mpi(int rc, const char* call);

// Waits for `request` to complete, sleeping between tests. Returns seconds waited.
double wait_politely(MPI_Request& request, MPI_Status* status = MPI_STATUS_IGNORE);
// Waits for every request in `requests`; clears it.
void wait_all_politely(std::vector<MPI_Request>& requests);

// Receives one message (any size) from `source` with `tag` into `buffer`, sleeping
// while none has arrived. Returns the source rank. Sets *waited_s if given.
int receive_bytes(MPI_Comm comm, int source, int tag, std::vector<char>& buffer,
                  double* waited_s = nullptr);

// Blocking probe without spinning: returns true and fills message/size when one arrives.
bool probe_politely(MPI_Comm comm, int source, int tag, MPI_Message& message, MPI_Status& status,
                    bool block);

// Receives the message a probe matched into `buffer`, resized to its byte count.
void receive_matched(MPI_Message& message, const MPI_Status& status, std::vector<char>& buffer);
// Receives a matched message of exactly `bytes` bytes (a fixed-size struct) into `data`.
void receive_matched(MPI_Message& message, void* data, int bytes);

// One small fixed-size value (a flag, a stamp) to `dest`: a blocking send, which
// the value's size keeps eager (MPI buffers it; the peer need not be receiving yet).
template <class T>
void send_value(const T& value, int dest, int tag, MPI_Comm comm) {
  check_mpi(MPI_Send(&value, int(sizeof(T)), MPI_BYTE, dest, tag, comm), "MPI_Send");
}
// Starts receiving one value that send_value sends; `value` must outlive the request.
template <class T>
MPI_Request receive_value(T& value, int source, int tag, MPI_Comm comm) {
  MPI_Request request;
  check_mpi(MPI_Irecv(&value, int(sizeof(T)), MPI_BYTE, source, tag, comm, &request), "MPI_Irecv");
  return request;
}
// True when `request` has completed (MPI_Test: no waiting).
bool completed(MPI_Request& request);

// Starts sending `buffer` (which must stay alive until the request completes).
MPI_Request send_bytes(MPI_Comm comm, int dest, int tag, const std::vector<char>& buffer);

// For the stall watchdog's report, from a wait on `request` that found it not
// done: a send started by send_bytes names its destination and tag, anything
// else is noted as `otherwise` (with a collective's communicator, or MPI_COMM_NULL).
void note_waiting_on(MPI_Request request, const char* otherwise, MPI_Comm comm = MPI_COMM_NULL);

}  // namespace strata::comm
