// L2HostTier against a real parameter server: rank 1 runs the server loop
// (runtime::run_server, which answers producer requests while it waits for
// trainer rounds) and rank 0 drives small L2s through the public API. Checked:
// rows never seen come out with their initial values, written-back rows come
// back once, dirty and exact, and then leave L2; dirty victims, flushes and
// write-downs land on the server bit for bit (read back through the producer
// protocol or a fresh L2); and with no capacity rows pass straight through.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "comm/mpi_channel.hpp"
#include "comm/wire.hpp"
#include "config/options.hpp"
#include "model/optimizers.hpp"
#include "runtime/role_layout.hpp"
#include "runtime/server_role.hpp"
#include "store/eviction_policy.hpp"
#include "store/l2_host_tier.hpp"
#include "store/row_init.hpp"
#include "store/server_protocol.hpp"
#include "store/staging_message.hpp"
#include "store/tiered_protocol.hpp"

namespace strata::store {
namespace {

constexpr int kProducerRank = 0;
constexpr int kServerRank = 1;
constexpr int kDim = 4;

RunOptions server_options() {
  RunOptions options;
  options.layout.trainers = 1;
  options.layout.producers = 1;
  options.layout.servers = 1;
  options.model.embedding_dim = kDim;
  options.optim.sparse = "adagrad";  // full rows are values + state: (dim + dim)
  options.optim.adagrad_init = 0.25f;
  options.train.seed = 11;
  // Only the server runs a role loop here: the stall watchdog's start barrier waits
  // for every rank of a whole job, so it stays off.
  options.runtime.stall_timeout_s = 0;
  return options;
}

std::vector<uint32_t> bits(const float* row, int width) {
  std::vector<uint32_t> b(width);
  std::memcpy(b.data(), row, sizeof(float) * width);
  return b;
}

std::vector<RowId> ids_of(uint32_t table, uint64_t first, int n) {
  std::vector<RowId> ids;
  for (int i = 0; i < n; ++i) ids.push_back({table, first + uint64_t(i) * 131});
  return ids;
}

std::vector<RowId> joined(std::vector<RowId> a, const std::vector<RowId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class L2HostTierTest : public testing::Test {
 protected:
  void SetUp() override {
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    if (size != 2) GTEST_SKIP() << "needs 2 ranks: a producer and a server";
  }

  // Runs `producer` on rank 0 against a fresh server on rank 1, and returns on
  // both ranks once that server has stopped: on rank 1, the rows it held then
  // (-1 on rank 0). Rank 0 also plays trainer 0 of the server's layout, only to
  // stop it; the layout's producer rank is never contacted by a server.
  int64_t with_server(const std::function<void()>& producer) {
    int64_t server_rows = -1;
    if (rank_ == kServerRank) {
      runtime::RankContext context{runtime::RoleLayout(options_.layout)};
      context.world_rank = kServerRank;
      context.role = runtime::Role::kServer;
      context.index = 0;
      server_rows = runtime::run_server(options_, context, runtime::ResumePoint{}).rows;
    } else {
      try {
        producer();
      } catch (const std::exception& e) {
        ADD_FAILURE() << "producer threw: " << e.what();
      }
      store_on_server(RowBlock{width_, {}, {}});  // every earlier request served (one source, one tag: in order)
      std::vector<char> stop;
      comm::ByteWriter writer(stop);
      writer.put(RequestHeader{ServerOp::kStop, 0, 0});
      comm::check_mpi(MPI_Send(stop.data(), int(stop.size()), MPI_BYTE, kServerRank, comm::kTagServerRequest,
                               MPI_COMM_WORLD),
                      "MPI_Send");
    }
    // The next test's requests must reach the next server, not this one.
    MPI_Barrier(MPI_COMM_WORLD);
    return server_rows;
  }

  std::unique_ptr<L2HostTier> make_tier(int64_t capacity, int64_t arena, bool servers_may_hold_rows = false) {
    return std::make_unique<L2HostTier>(
        capacity, arena, width_, *policy_, MPI_COMM_WORLD, std::vector<int>{kServerRank}, [] {},
        [this](const RowId& id, float* row) {
          ++rows_made_;
          initial_row(id, row);
        },
        [](const RowId&) { return INT64_MAX; }, nullptr, servers_may_hold_rows);
  }

  // A row's state before any training: what the servers answer for a row they do not hold.
  void initial_row(const RowId& id, float* row) const {
    init_row_values(id.table, id.key, options_.train.seed, options_.model.row_init_scale, row, kDim);
    optimizer_->init_state(row + kDim, kDim);
  }
  std::vector<float> initial_rows(const std::vector<RowId>& ids) const {
    std::vector<float> rows(ids.size() * width_);
    for (size_t i = 0; i < ids.size(); ++i) initial_row(ids[i], rows.data() + i * width_);
    return rows;
  }

  // Rows as an L1 would write them back: random values, with -0, denormals and
  // extremes among them, so anything short of a bit-exact path shows.
  RowBlock random_rows(const std::vector<RowId>& ids, uint64_t seed) const {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> value(-2.0f, 2.0f);
    RowBlock rows;
    rows.width = width_;
    rows.ids = ids;
    rows.values.resize(ids.size() * width_);
    for (size_t k = 0; k < rows.values.size(); ++k) {
      switch (k % 11) {
        case 3: rows.values[k] = -0.0f; break;
        case 7: rows.values[k] = std::numeric_limits<float>::denorm_min() * float(k + 1); break;
        case 9: rows.values[k] = std::numeric_limits<float>::max() / float(k + 1); break;
        default: rows.values[k] = value(rng);
      }
    }
    return rows;
  }

  // The server's copy of `ids` (n, width), asked for through the producer
  // protocol itself rather than through an L2.
  std::vector<float> server_copy(const std::vector<RowId>& ids) const {
    std::vector<char> request;
    comm::ByteWriter writer(request);
    writer.put(ProducerOp::kFetch);
    writer.put_vector(ids);
    comm::check_mpi(MPI_Send(request.data(), int(request.size()), MPI_BYTE, kServerRank, comm::kTagProducerRequest,
                             MPI_COMM_WORLD),
                    "MPI_Send");
    std::vector<char> reply;
    comm::receive_bytes(MPI_COMM_WORLD, kServerRank, comm::kTagProducerReply, reply);
    RowBlock rows = read_row_block(reply.data(), reply.size());
    EXPECT_EQ(rows.width, width_);
    EXPECT_EQ(rows.size(), ids.size());
    rows.values.resize(ids.size() * width_);
    return rows.values;
  }

  // Puts rows on the server as a synchronous write-back (as a resumed run's servers would start).
  void store_on_server(const RowBlock& rows) const {
    std::vector<char> request;
    comm::ByteWriter writer(request);
    writer.put(ProducerOp::kWriteBackSync);
    append_row_block(rows, request);
    comm::check_mpi(MPI_Send(request.data(), int(request.size()), MPI_BYTE, kServerRank, comm::kTagProducerRequest,
                             MPI_COMM_WORLD),
                    "MPI_Send");
    std::vector<char> ack;
    comm::receive_bytes(MPI_COMM_WORLD, kServerRank, comm::kTagProducerReply, ack);
  }

  // Reads ids through the tier; values (n, width) and dirty flags (n).
  void read(L2HostTier& tier, const std::vector<RowId>& ids, int64_t round, std::vector<float>& values,
            std::vector<uint8_t>& dirty) const {
    values.assign(ids.size() * width_, std::numeric_limits<float>::quiet_NaN());
    dirty.assign(ids.size(), 2);
    tier.read(ids, round, values.data(), dirty.data());
  }

  void expect_rows(const std::vector<float>& got, const std::vector<float>& expected, const std::vector<RowId>& ids,
                   const char* what) const {
    ASSERT_EQ(got.size(), ids.size() * width_);
    ASSERT_EQ(expected.size(), ids.size() * width_);
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(bits(got.data() + i * width_, width_), bits(expected.data() + i * width_, width_))
          << what << ": row (" << ids[i].table << ", " << ids[i].key << ")";
    }
  }

  int rank_ = 0;
  RunOptions options_ = server_options();
  std::unique_ptr<model::SparseOptimizer> optimizer_ = model::make_sparse_optimizer(options_.optim);
  int width_ = kDim + optimizer_->state_width(kDim);
  std::unique_ptr<EvictionPolicy> policy_ = make_eviction_policy("lru");
  int64_t rows_made_ = 0;  // calls of the tier's new_row
};

// (a) Servers that started empty hold only what this tier wrote to them, so a
// row it never wrote is made here with its initial values, without a round trip.
TEST_F(L2HostTierTest, UnseenRowsAreMadeHereWithTheirInitialValues) {
  const int64_t server_rows = with_server([&] {
    auto tier = make_tier(4, 4);
    const std::vector<RowId> ids = joined(ids_of(0, 5, 3), ids_of(1, 5, 3));  // more than L2 holds
    std::vector<float> values;
    std::vector<uint8_t> dirty;
    read(*tier, ids, 0, values, dirty);
    expect_rows(values, initial_rows(ids), ids, "first use");
    EXPECT_EQ(dirty, std::vector<uint8_t>(ids.size(), 0));
    EXPECT_EQ(rows_made_, 6);
    EXPECT_EQ(tier->counters().rows_created, 6u);
    EXPECT_EQ(tier->counters().misses, 6u);
    EXPECT_EQ(tier->counters().hits, 0u);
    EXPECT_EQ(tier->counters().bytes_from_l3, 0u) << "asked the servers for rows they cannot hold";
    EXPECT_EQ(tier->size(), 0) << "a read goes to L1, not into L2";
    tier->flush();
  });
  if (rank_ == kServerRank) EXPECT_EQ(server_rows, 0);
}

// (a) A resumed run's servers hold rows this tier never wrote: it asks them for every row.
TEST_F(L2HostTierTest, ResumedTierFetchesEveryRowFromTheServers) {
  const int64_t server_rows = with_server([&] {
    const std::vector<RowId> held = ids_of(2, 9, 3), unseen = ids_of(2, 10, 3);
    const RowBlock stored = random_rows(held, 1);
    store_on_server(stored);
    auto tier = make_tier(4, 4, /*servers_may_hold_rows=*/true);
    const std::vector<RowId> ids = joined(held, unseen);
    std::vector<float> values;
    std::vector<uint8_t> dirty;
    read(*tier, ids, 0, values, dirty);
    std::vector<float> expected = stored.values;
    const std::vector<float> initial = initial_rows(unseen);
    expected.insert(expected.end(), initial.begin(), initial.end());
    expect_rows(values, expected, ids, "resumed read");
    EXPECT_EQ(dirty, std::vector<uint8_t>(ids.size(), 0));
    EXPECT_EQ(rows_made_, 0);
    EXPECT_EQ(tier->counters().rows_created, 0u);
    EXPECT_EQ(tier->counters().bytes_from_l3, ids.size() * width_ * sizeof(float));
    tier->flush();
  });
  if (rank_ == kServerRank) EXPECT_EQ(server_rows, 3) << "a fetch stored rows on the server";
}

// (b) A dirty row an L1 wrote back is read once, dirty and exact, and leaves L2
// with that read: a second read finds it only below (here: its initial row,
// which is what the servers hold, as nothing reached them).
TEST_F(L2HostTierTest, WrittenBackRowsAreReadOnceDirtyThenLeaveL2) {
  const int64_t server_rows = with_server([&] {
    auto tier = make_tier(8, 8);
    const std::vector<RowId> ids = joined(ids_of(0, 1, 2), ids_of(3, 1, 2));
    const RowBlock written = random_rows(ids, 2);
    tier->write_back(written, 1);
    EXPECT_EQ(tier->size(), 4);
    std::vector<float> values;
    std::vector<uint8_t> dirty;
    read(*tier, ids, 2, values, dirty);
    expect_rows(values, written.values, ids, "read of written-back rows");
    EXPECT_EQ(dirty, std::vector<uint8_t>(ids.size(), 1));
    EXPECT_EQ(tier->counters().hits, 4u);
    EXPECT_EQ(tier->counters().misses, 0u);
    EXPECT_EQ(tier->size(), 0) << "L2 is exclusive of L1: a row read out leaves it";

    read(*tier, ids, 3, values, dirty);
    expect_rows(values, initial_rows(ids), ids, "second read");
    EXPECT_EQ(dirty, std::vector<uint8_t>(ids.size(), 0));
    EXPECT_EQ(tier->counters().hits, 4u);
    EXPECT_EQ(tier->counters().misses, 4u);
    tier->flush();
    EXPECT_EQ(tier->counters().write_backs_to_l3, 0u) << "rows that left L2 were written down";
    EXPECT_EQ(tier->counters().bytes_to_l3, 0u);
  });
  if (rank_ == kServerRank) EXPECT_EQ(server_rows, 0);
}

// (b) Once the servers hold an older copy, the second read returns that copy:
// the newer one left L2 with the first read.
TEST_F(L2HostTierTest, ASecondReadComesFromTheServersNotFromL2) {
  const int64_t server_rows = with_server([&] {
    auto tier = make_tier(8, 8);
    const std::vector<RowId> ids = ids_of(1, 77, 4);
    const RowBlock older = random_rows(ids, 3), newer = random_rows(ids, 4);
    tier->write_back(older, 1);
    tier->flush();
    tier->write_back(newer, 2);  // rows still held (clean): updated in place
    EXPECT_EQ(tier->size(), 4);
    EXPECT_EQ(tier->counters().evictions, 0u);
    std::vector<float> values;
    std::vector<uint8_t> dirty;
    read(*tier, ids, 3, values, dirty);
    expect_rows(values, newer.values, ids, "first read");
    EXPECT_EQ(dirty, std::vector<uint8_t>(ids.size(), 1));
    EXPECT_EQ(tier->size(), 0);
    read(*tier, ids, 4, values, dirty);
    expect_rows(values, older.values, ids, "second read (the servers' copy)");
    EXPECT_EQ(dirty, std::vector<uint8_t>(ids.size(), 0));
    EXPECT_EQ(rows_made_, 0) << "rows the servers hold were made anew";
    EXPECT_EQ(tier->counters().misses, 4u);
    tier->flush();
  });
  if (rank_ == kServerRank) EXPECT_EQ(server_rows, 4);
}

// (c) Past capacity, dirty victims go to the servers: exactly those rows are on
// the server afterwards, bit for bit, and reading everything back through the
// tier returns every row as last written, dirty exactly where L2 still held it.
TEST_F(L2HostTierTest, DirtyVictimsReachTheServersBitForBit) {
  const int64_t server_rows = with_server([&] {
    auto tier = make_tier(4, 4);
    const std::vector<RowId> ids = joined(ids_of(0, 3, 6), ids_of(5, 3, 6));
    RowBlock latest = random_rows(ids, 5);
    for (int round = 0; round < 4; ++round) {  // three rows a round, more than L2 holds by the third
      RowBlock part;
      part.width = width_;
      for (int i = 3 * round; i < 3 * round + 3; ++i) part.append(ids[i], latest.row(i));
      tier->write_back(part, round);
    }
    EXPECT_EQ(tier->size(), 4);
    EXPECT_EQ(tier->counters().evictions, 8u);
    EXPECT_EQ(tier->counters().write_backs_to_l3, 8u);
    EXPECT_EQ(tier->counters().bytes_to_l3, 8u * width_ * sizeof(float));

    // The row written last is surely held: writing it again updates it in place.
    const RowBlock again = random_rows({ids.back()}, 6);
    tier->write_back(again, 4);
    std::copy(again.values.begin(), again.values.end(), latest.values.end() - width_);
    EXPECT_EQ(tier->size(), 4);
    EXPECT_EQ(tier->counters().evictions, 8u);

    const std::vector<float> on_server = server_copy(ids);
    const std::vector<float> initial = initial_rows(ids);
    std::vector<uint8_t> held_in_l2(ids.size(), 0);
    int victims = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      const auto server_bits = bits(on_server.data() + i * width_, width_);
      if (server_bits == bits(latest.row(i), width_)) {
        ++victims;
      } else {
        EXPECT_EQ(server_bits, bits(initial.data() + i * width_, width_))
            << "the server holds neither the written nor the initial row (" << ids[i].table << ", " << ids[i].key
            << ")";
        held_in_l2[i] = 1;
      }
    }
    EXPECT_EQ(victims, 8) << "not every dirty victim reached the server";
    EXPECT_EQ(held_in_l2.back(), 1) << "a row held in L2 was written to the server";

    std::vector<float> values;
    std::vector<uint8_t> dirty;
    read(*tier, ids, 5, values, dirty);
    expect_rows(values, latest.values, ids, "read after evictions");
    EXPECT_EQ(dirty, held_in_l2);
    EXPECT_EQ(tier->counters().hits, 4u);
    EXPECT_EQ(tier->counters().misses, 8u);
    EXPECT_EQ(rows_made_, 0) << "a victim was made anew instead of fetched";
    EXPECT_EQ(tier->size(), 0);
    tier->flush();
  });
  if (rank_ == kServerRank) EXPECT_EQ(server_rows, 8);
}

// Clean victims (the servers already have them) are dropped, not written again.
TEST_F(L2HostTierTest, CleanVictimsAreDroppedWithoutAWrite) {
  const int64_t server_rows = with_server([&] {
    auto tier = make_tier(4, 4);
    const std::vector<RowId> first = ids_of(0, 40, 4), second = ids_of(0, 41, 4);
    const RowBlock a = random_rows(first, 7), b = random_rows(second, 8);
    tier->write_back(a, 0);
    tier->flush();
    EXPECT_EQ(tier->counters().write_backs_to_l3, 4u);
    tier->write_back(b, 1);
    EXPECT_EQ(tier->counters().evictions, 4u);
    EXPECT_EQ(tier->counters().write_backs_to_l3, 4u) << "a clean victim was written to the servers";
    EXPECT_EQ(tier->counters().bytes_to_l3, 4u * width_ * sizeof(float));
    std::vector<float> values;
    std::vector<uint8_t> dirty;
    read(*tier, joined(first, second), 2, values, dirty);
    std::vector<float> expected = a.values;
    expected.insert(expected.end(), b.values.begin(), b.values.end());
    expect_rows(values, expected, joined(first, second), "read back");
    EXPECT_EQ(dirty, (std::vector<uint8_t>{0, 0, 0, 0, 1, 1, 1, 1}));
    tier->flush();
  });
  if (rank_ == kServerRank) EXPECT_EQ(server_rows, 4);
}

// (d) flush() leaves every dirty row on the servers: a fresh L2 that asks the
// servers for everything reads them exactly, and the flushed rows stay here clean.
TEST_F(L2HostTierTest, FlushLeavesEveryDirtyRowOnTheServers) {
  const int64_t server_rows = with_server([&] {
    auto tier = make_tier(16, 16);
    const std::vector<RowId> ids = joined(ids_of(0, 8, 5), ids_of(4, 8, 5));
    const RowBlock written = random_rows(ids, 9);
    RowBlock part;
    part.width = width_;
    for (size_t i = 0; i < ids.size(); ++i) {
      part.append(ids[i], written.row(i));
      if (i == 4 || i + 1 == ids.size()) {
        tier->write_back(part, int64_t(i));
        part.clear();
      }
    }
    EXPECT_EQ(tier->counters().write_backs_to_l3, 0u) << "rows that fit were written down early";
    tier->flush();
    EXPECT_EQ(tier->counters().write_backs_to_l3, 10u);

    auto fresh = make_tier(4, 4, /*servers_may_hold_rows=*/true);
    std::vector<float> values;
    std::vector<uint8_t> dirty;
    read(*fresh, ids, 0, values, dirty);
    expect_rows(values, written.values, ids, "servers' copy after flush");
    EXPECT_EQ(dirty, std::vector<uint8_t>(ids.size(), 0));
    EXPECT_EQ(rows_made_, 0);

    tier->flush();  // nothing dirty left: nothing more to write
    EXPECT_EQ(tier->counters().write_backs_to_l3, 10u);
    read(*tier, ids, 20, values, dirty);
    expect_rows(values, written.values, ids, "flushed rows read from L2");
    EXPECT_EQ(dirty, std::vector<uint8_t>(ids.size(), 0)) << "a flushed row is still marked newer than the servers";
    fresh->flush();
    tier->flush();
  });
  if (rank_ == kServerRank) EXPECT_EQ(server_rows, 10);
}

// (e) With no capacity the tier holds nothing: write-backs go straight to the
// servers and reads come straight from them, counted as fallback rows.
TEST_F(L2HostTierTest, WithoutCapacityRowsPassStraightThrough) {
  const int64_t server_rows = with_server([&] {
    auto tier = make_tier(0, 0);
    EXPECT_TRUE(tier->fallback());
    EXPECT_EQ(tier->capacity(), 0);
    const std::vector<RowId> ids = ids_of(6, 2, 4), unseen = ids_of(6, 3, 2);
    const RowBlock written = random_rows(ids, 10);
    tier->write_back(written, 0);
    EXPECT_EQ(tier->size(), 0);
    EXPECT_EQ(tier->counters().fallback_rows, 4u);
    EXPECT_EQ(tier->counters().write_backs_to_l3, 4u);
    std::vector<float> values;
    std::vector<uint8_t> dirty;
    read(*tier, joined(ids, unseen), 1, values, dirty);
    std::vector<float> expected = written.values;
    const std::vector<float> initial = initial_rows(unseen);
    expected.insert(expected.end(), initial.begin(), initial.end());
    expect_rows(values, expected, joined(ids, unseen), "fallback read");
    EXPECT_EQ(dirty, std::vector<uint8_t>(6, 0));
    EXPECT_GT(tier->counters().fallback_rows, 4u);
    EXPECT_EQ(tier->counters().fallback_rows, 10u);
    EXPECT_EQ(tier->counters().hits, 0u);
    tier->flush();
  });
  if (rank_ == kServerRank) EXPECT_EQ(server_rows, 4);
}

// The online controller shrinking the budget: dirty rows over it go to the
// servers at once; at zero the tier passes rows through until it grows again.
TEST_F(L2HostTierTest, ShrinkingTheBudgetWritesDirtyRowsDown) {
  const int64_t server_rows = with_server([&] {
    auto tier = make_tier(8, 8);
    const std::vector<RowId> ids = ids_of(0, 60, 6), later = ids_of(0, 61, 2);
    const RowBlock written = random_rows(ids, 11), passed = random_rows(later, 12);
    tier->write_back(written, 0);
    tier->set_capacity(2);
    EXPECT_EQ(tier->capacity(), 2);
    EXPECT_EQ(tier->size(), 2);
    EXPECT_EQ(tier->counters().write_backs_to_l3, 4u);
    tier->set_capacity(0);
    EXPECT_EQ(tier->size(), 0);
    EXPECT_EQ(tier->counters().evictions, 6u);
    EXPECT_EQ(tier->counters().write_backs_to_l3, 6u);
    tier->write_back(passed, 1);
    EXPECT_EQ(tier->size(), 0);
    EXPECT_EQ(tier->counters().fallback_rows, 2u);
    std::vector<float> values;
    std::vector<uint8_t> dirty;
    read(*tier, joined(ids, later), 2, values, dirty);
    std::vector<float> expected = written.values;
    expected.insert(expected.end(), passed.values.begin(), passed.values.end());
    expect_rows(values, expected, joined(ids, later), "read after shrinking");
    EXPECT_EQ(dirty, std::vector<uint8_t>(8, 0));
    tier->set_capacity(100);
    EXPECT_EQ(tier->capacity(), 8) << "the budget may not exceed the arena";
    tier->write_back(passed, 3);
    EXPECT_EQ(tier->size(), 2);
    tier->flush();
  });
  if (rank_ == kServerRank) EXPECT_EQ(server_rows, 8);
}

// write_down: rows held here are updated in place; the rest go straight to
// the servers without displacing anything.
TEST_F(L2HostTierTest, WriteDownUpdatesHeldRowsAndSendsTheRestDown) {
  const int64_t server_rows = with_server([&] {
    auto tier = make_tier(3, 3);
    const std::vector<RowId> held = ids_of(1, 90, 2), others = ids_of(1, 91, 3);
    tier->write_back(random_rows(held, 13), 0);
    const RowBlock down = random_rows(joined(held, others), 14);
    tier->write_down(down);
    EXPECT_EQ(tier->size(), 2) << "write_down put rows into L2";
    EXPECT_EQ(tier->counters().evictions, 0u);
    EXPECT_EQ(tier->counters().write_backs_to_l3, 3u);
    tier->flush();
    EXPECT_EQ(tier->counters().write_backs_to_l3, 5u);

    auto fresh = make_tier(4, 4, /*servers_may_hold_rows=*/true);
    std::vector<float> values;
    std::vector<uint8_t> dirty;
    read(*fresh, down.ids, 0, values, dirty);
    expect_rows(values, down.values, down.ids, "servers' copy after write_down");
    read(*tier, held, 1, values, dirty);
    expect_rows(values, std::vector<float>(down.values.begin(), down.values.begin() + 2 * width_), held,
                "held rows after write_down");
    EXPECT_EQ(tier->counters().hits, 2u);
    fresh->flush();
    tier->flush();
  });
  if (rank_ == kServerRank) EXPECT_EQ(server_rows, 5);
}

// A refusing tier (memory exhausted) sends rows it does not hold straight down
// and still updates the rows it holds.
TEST_F(L2HostTierTest, RefusingTierSendsNewRowsStraightDown) {
  const int64_t server_rows = with_server([&] {
    auto tier = make_tier(4, 4);
    const std::vector<RowId> held = ids_of(2, 30, 1), refused = ids_of(2, 31, 2);
    tier->write_back(random_rows(held, 15), 0);
    tier->set_refusing(true);
    const RowBlock b = random_rows(refused, 16), a = random_rows(held, 17);
    tier->write_back(b, 1);
    EXPECT_EQ(tier->size(), 1);
    EXPECT_EQ(tier->counters().fallback_rows, 2u);
    tier->write_back(a, 2);
    EXPECT_EQ(tier->size(), 1);
    tier->set_refusing(false);
    std::vector<float> values;
    std::vector<uint8_t> dirty;
    read(*tier, joined(held, refused), 3, values, dirty);
    std::vector<float> expected = a.values;
    expected.insert(expected.end(), b.values.begin(), b.values.end());
    expect_rows(values, expected, joined(held, refused), "read after refusing");
    EXPECT_EQ(dirty, (std::vector<uint8_t>{1, 0, 0}));
    tier->flush();
  });
  if (rank_ == kServerRank) EXPECT_EQ(server_rows, 2);
}

}  // namespace
}  // namespace strata::store
