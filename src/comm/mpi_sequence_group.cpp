#include "comm/mpi_sequence_group.hpp"

#include <string>

#include "comm/collectives.hpp"
#include "comm/stall_watchdog.hpp"

namespace strata::comm {

void MpiSequenceGroup::exchange(const std::vector<char>& send, const std::vector<int>& send_bytes,
                                std::vector<char>& receive, std::vector<int>& receive_bytes) {
  WaitingFor waiting([] { return std::string("the sequence-parallel all-to-all of its group"); });
  alltoallv_sized_here(send, send_bytes, receive, receive_bytes, groups_.sp_comm());
  for (size_t m = 0; m < send_bytes.size(); ++m) {
    if (int(m) != rank()) bytes_exchanged_ += uint64_t(send_bytes[m]);
  }
}

}  // namespace strata::comm
