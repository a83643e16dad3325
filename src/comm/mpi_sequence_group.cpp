#include "comm/mpi_sequence_group.hpp"

#include <string>

#include <mpi.h>

#include "comm/collectives.hpp"
#include "comm/mpi_channel.hpp"
#include "comm/stall_watchdog.hpp"
#include "common/error.hpp"

namespace strata::comm {

namespace {
constexpr int kTagSequencePass = 310;  // trainer -> a member of its SP group: a ring stage's K/V rows
}  // namespace

void MpiSequenceGroup::exchange(const std::vector<char>& send, const std::vector<int>& send_bytes,
                                std::vector<char>& receive, std::vector<int>& receive_bytes) {
  WaitingFor waiting([] { return std::string("the sequence-parallel all-to-all of its group"); });
  alltoallv_sized_here(send, send_bytes, receive, receive_bytes, groups_.sp_comm());
  for (size_t m = 0; m < send_bytes.size(); ++m) {
    if (int(m) != rank()) bytes_exchanged_ += uint64_t(send_bytes[m]);
  }
}

void MpiSequenceGroup::pass(const std::vector<char>& send, const std::vector<int>& send_bytes,
                            std::vector<char>& receive, const std::vector<int>& receive_bytes) {
  WaitingFor waiting([] { return std::string("a ring pass of the K/V rows in its sequence-parallel group"); });
  const int members = size();
  if (int(send_bytes.size()) != members || int(receive_bytes.size()) != members) {
    throw Error("MpiSequenceGroup::pass: parts for " + std::to_string(send_bytes.size()) + " and " +
                std::to_string(receive_bytes.size()) + " members, the group has " + std::to_string(members) + " (bug)");
  }
  size_t total = 0;
  for (int bytes : receive_bytes) total += size_t(bytes);
  receive.resize(total);
  std::vector<MPI_Request> requests;
  MPI_Comm comm = groups_.sp_comm();
  // One request per non-empty part of `bytes` (back to back in member order).
  auto post = [&](const std::vector<int>& bytes, auto&& start) {
    size_t at = 0;
    for (int m = 0; m < members; ++m) {
      if (bytes[size_t(m)] > 0) {
        requests.emplace_back();
        start(at, bytes[size_t(m)], m, &requests.back());
      }
      at += size_t(bytes[size_t(m)]);
    }
  };
  post(receive_bytes, [&](size_t at, int count, int m, MPI_Request* request) {
    check_mpi(MPI_Irecv(receive.data() + at, count, MPI_BYTE, m, kTagSequencePass, comm, request), "MPI_Irecv");
  });
  post(send_bytes, [&](size_t at, int count, int m, MPI_Request* request) {
    check_mpi(MPI_Isend(send.data() + at, count, MPI_BYTE, m, kTagSequencePass, comm, request), "MPI_Isend");
    if (m != rank()) bytes_exchanged_ += uint64_t(count);
  });
  wait_all_politely(requests);
}

}  // namespace strata::comm
