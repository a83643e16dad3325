// The polite collectives against what the data says they must deliver, on 1, 2
// and 3 ranks: all-to-all with known and with exchanged sizes (including empty
// parts), in-place all-reduce, reduce and gather of ragged byte strings, and the
// all-reduce that adds in rank order; all-gather of fixed records and broadcast.
#include <gtest/gtest.h>
#include <mpi.h>

#include <numeric>
#include <string>
#include <vector>

#include "comm/collectives.hpp"

namespace strata::comm {
namespace {

int rank_of(MPI_Comm comm) {
  int r = 0;
  MPI_Comm_rank(comm, &r);
  return r;
}
int size_of(MPI_Comm comm) {
  int s = 0;
  MPI_Comm_size(comm, &s);
  return s;
}

// Rank s sends rank d (s + 2 d) % 4 values of the byte (10 s + d): some parts empty.
int part_size(int s, int d) { return (s + 2 * d) % 4; }

TEST(Collectives, AllToAllWithKnownSizes) {
  const int me = rank_of(MPI_COMM_WORLD), ranks = size_of(MPI_COMM_WORLD);
  std::vector<int> send_bytes(ranks), receive_bytes(ranks);
  std::vector<char> send;
  for (int d = 0; d < ranks; ++d) {
    send_bytes[d] = part_size(me, d);
    send.insert(send.end(), send_bytes[d], char(10 * me + d));
    receive_bytes[d] = part_size(d, me);
  }
  std::vector<char> receive(std::accumulate(receive_bytes.begin(), receive_bytes.end(), 0));
  alltoallv(send.data(), send_bytes, receive.data(), receive_bytes, MPI_COMM_WORLD);
  size_t at = 0;
  for (int s = 0; s < ranks; ++s) {
    for (int i = 0; i < receive_bytes[s]; ++i) EXPECT_EQ(receive[at++], char(10 * s + me)) << "from " << s;
  }
}

TEST(Collectives, AllToAllWithSizesExchanged) {
  const int me = rank_of(MPI_COMM_WORLD), ranks = size_of(MPI_COMM_WORLD);
  std::vector<int> send_bytes(ranks), receive_bytes;
  std::vector<char> send, receive;
  for (int d = 0; d < ranks; ++d) {
    send_bytes[d] = part_size(me, d);
    send.insert(send.end(), send_bytes[d], char(10 * me + d));
  }
  int serviced = 0;
  alltoallv_sized_here(send, send_bytes, receive, receive_bytes, MPI_COMM_WORLD, [&] { ++serviced; });
  ASSERT_EQ(receive_bytes.size(), size_t(ranks));
  size_t at = 0;
  for (int s = 0; s < ranks; ++s) {
    EXPECT_EQ(receive_bytes[s], part_size(s, me));
    for (int i = 0; i < receive_bytes[s]; ++i) EXPECT_EQ(receive[at++], char(10 * s + me));
  }
  EXPECT_EQ(at, receive.size());
}

TEST(Collectives, AllReduceReduceAndGather) {
  const int me = rank_of(MPI_COMM_WORLD), ranks = size_of(MPI_COMM_WORLD);
  int flags[2] = {me + 1, me == 0 ? 0 : 1};
  allreduce(flags, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  EXPECT_EQ(flags[0], 1);
  EXPECT_EQ(flags[1], 0);
  const double mine[2] = {double(me), 1.0};
  double total[2] = {-1, -1};
  reduce(mine, total, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  if (me == 0) {
    EXPECT_EQ(total[0], ranks * (ranks - 1) / 2.0);
    EXPECT_EQ(total[1], double(ranks));
  }
  const std::string text(me, char('a' + me));  // rank 0 sends nothing
  const std::vector<char> all = gather_bytes(text.data(), int(text.size()), 0, MPI_COMM_WORLD);
  if (me == 0) {
    std::string expected;
    for (int r = 0; r < ranks; ++r) expected += std::string(r, char('a' + r));
    EXPECT_EQ(std::string(all.begin(), all.end()), expected);
  } else {
    EXPECT_TRUE(all.empty());
  }
}

// Every rank gets every rank's fixed-size record in rank order; a broadcast reaches all.
TEST(Collectives, AllGatherAndBroadcast) {
  const int me = rank_of(MPI_COMM_WORLD), ranks = size_of(MPI_COMM_WORLD);
  struct Record {
    int rank;
    double value;
  };
  const Record mine{me, 0.5 * me + 1};
  std::vector<Record> all(size_t(ranks), Record{-1, -1});
  allgather_bytes(&mine, int(sizeof(Record)), all.data(), MPI_COMM_WORLD);
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(all[size_t(r)].rank, r);
    EXPECT_EQ(all[size_t(r)].value, 0.5 * r + 1);
  }
  uint64_t word = me == ranks - 1 ? 0x5eedULL : 0;
  broadcast(&word, 1, MPI_UINT64_T, ranks - 1, MPI_COMM_WORLD);
  EXPECT_EQ(word, 0x5eedULL);
}

// The ordered all-reduce adds the ranks' values in rank order, bit for bit, for
// counts that the rank count does not divide and counts below it (empty blocks).
TEST(Collectives, OrderedAllReduceAddsInRankOrder) {
  const int me = rank_of(MPI_COMM_WORLD), ranks = size_of(MPI_COMM_WORLD);
  for (int count : {1, 2, 7, 1000}) {
    std::vector<float> mine(count);
    for (int i = 0; i < count; ++i) {
      // Magnitudes that differ by orders, so that another order rounds differently.
      const float magnitude = (i + me) % 3 == 0 ? 1e7f : (i + me) % 3 == 1 ? 1.0f : 1e-3f;
      mine[i] = magnitude * (0.1f + 0.37f * float((i * 31 + me * 17) % 97) / 97.0f) * ((i + me) % 2 ? -1.0f : 1.0f);
    }
    std::vector<float> all(size_t(count) * ranks);
    MPI_Allgather(mine.data(), count, MPI_FLOAT, all.data(), count, MPI_FLOAT, MPI_COMM_WORLD);
    std::vector<float> expected(all.begin(), all.begin() + count), reversed(all.end() - count, all.end());
    for (int r = 1; r < ranks; ++r) {
      for (int i = 0; i < count; ++i) expected[i] += all[size_t(r) * count + i];
    }
    for (int r = ranks - 2; r >= 0; --r) {
      for (int i = 0; i < count; ++i) reversed[i] += all[size_t(r) * count + i];
    }
    std::vector<float> data = mine;
    ordered_allreduce_sum(data.data(), count, MPI_COMM_WORLD);
    for (int i = 0; i < count; ++i) {
      ASSERT_EQ(data[i], expected[i]) << "count " << count << " element " << i;
    }
    if (ranks >= 3 && count == 1000) EXPECT_NE(expected, reversed) << "the test data do not depend on the order";
  }
}

}  // namespace
}  // namespace strata::comm
