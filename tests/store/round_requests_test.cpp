// The per-round request exchange between producers (every rank of the test
// is a producer): each owner ends up with every trainer's requests for its
// rows, requesters in rank order, each in its request order, on 1, 2 and 3
// producers alike; and the flags agree on every producer.
#include <gtest/gtest.h>
#include <mpi.h>

#include <random>

#include "data/batch.hpp"
#include "store/round_requests.hpp"

namespace strata::store {
namespace {

// Trainer t's batch of round r: a pure function of (r, t), so every rank can
// compute every trainer's expected requests.
data::Batch batch_of(int round, int trainer) {
  std::mt19937_64 rng(1000 * round + trainer);
  data::Batch b;
  b.reset(1, 3);
  b.size = 8;
  b.labels.assign(8, 0.0f);
  b.dense.assign(8, 0.0f);
  for (auto& bags : b.tables) {
    for (int s = 0; s < 8; ++s) {
      bags.keys.push_back(rng() % 50);  // duplicates on purpose
      bags.offsets.push_back(int32_t(bags.keys.size()));
    }
  }
  data::deduplicate(b);
  return b;
}

TEST(RoundExchange, EveryOwnerGetsEveryTrainersRequestsInOrder) {
  int producer = 0, producers = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &producer);
  MPI_Comm_size(MPI_COMM_WORLD, &producers);
  for (int trainers : {producers, 2 * producers + 1}) {
    if (trainers < producers) continue;
    RoundExchange exchange(producer, producers, trainers, MPI_COMM_WORLD);
    for (int round = 0; round < 5; ++round) {
      std::vector<data::Batch> mine;
      for (int t = producer; t < trainers; t += producers) mine.push_back(batch_of(round, t));
      std::vector<OwnerRequests> got;
      bool any_lagging = false;
      const bool lagging = round == 3 && producer == producers - 1;
      ASSERT_TRUE(exchange.exchange(true, lagging, mine, got, any_lagging));
      EXPECT_EQ(any_lagging, round == 3);
      ASSERT_EQ(got.size(), mine.size());
      for (size_t i = 0; i < got.size(); ++i) {
        const int owner = producer + int(i) * producers;
        OwnerRequests expected;
        expected.offsets = {0};
        for (int t = 0; t < trainers; ++t) {
          const data::Batch b = batch_of(round, t);
          for (size_t table = 0; table < b.tables.size(); ++table) {
            for (uint64_t key : b.tables[table].unique_keys) {
              if (owner_of(uint32_t(table), key, trainers) == owner) expected.ids.push_back({uint32_t(table), key});
            }
          }
          expected.offsets.push_back(int32_t(expected.ids.size()));
        }
        EXPECT_EQ(got[i].offsets, expected.offsets) << "owner " << owner << " round " << round;
        ASSERT_EQ(got[i].ids.size(), expected.ids.size());
        for (size_t k = 0; k < expected.ids.size(); ++k) EXPECT_TRUE(got[i].ids[k] == expected.ids[k]);
      }
    }
    // One producer that could not build the round stops it on every producer.
    std::vector<data::Batch> mine;
    for (int t = producer; t < trainers; t += producers) mine.push_back(batch_of(9, t));
    std::vector<OwnerRequests> got;
    bool any_lagging = true;
    EXPECT_FALSE(exchange.exchange(producer != 0, false, mine, got, any_lagging));
  }
}

}  // namespace
}  // namespace strata::store
