// Where a trainer's rows come from: the tiered store (its L1, staged by its
// producer), the parameter servers (ps mode), or another model's servers when
// it trains that model's tables ([models] share_tables).
#include "runtime/shared_tables.hpp"
#include "runtime/trainer.hpp"
#include "store/borrowed_tables_store.hpp"
#include "store/l1_device_tier.hpp"
#include "store/online_controller.hpp"
#include "store/remote_ps_store.hpp"
#include "store/tiered_store.hpp"

namespace strata::runtime {

std::unique_ptr<store::ParameterStore> Trainer::make_store() const {
  std::vector<int> servers;
  for (int s = 0; s < context_.layout.servers(); ++s) servers.push_back(context_.layout.world_rank(Role::kServer, s));
  const int dim = options_.model.embedding_dim;
  if (options_.store.mode == "tiered") {
    auto sparse = model::make_sparse_optimizer(options_.optim);
    const int width = dim + sparse->state_width(dim);
    // Under the online controller the L1 arena is reserved for the largest budget it may grant.
    const int producer = context_.layout.producer_of_trainer(context_.index);
    const int owners = static_cast<int>(context_.layout.trainers_of_producer(producer).size());
    const double arena_mb = options_.autotune.online ? store::online_l1_max_mb(options_, owners) : options_.store.l1_mb;
    return std::make_unique<store::TieredStore>(context_.job, comm_, producer_rank_, servers, context_.index, dim,
                                                shape_.num_tables, store::L1DeviceTier::rows_for_budget(arena_mb, width),
                                                std::move(sparse),
                                                /*reports_producer=*/context_.index < context_.layout.producers());
  }
  if (const SharedTablesPlan* tables = shared_tables(); tables != nullptr && tables->borrower) {
    // This model trains another model's tables ([models] share_tables): its rows
    // come from the owner's servers; its own servers only join its checkpoints.
    return std::make_unique<store::BorrowedTablesStore>(
        std::make_unique<store::RemotePsStore>(tables->world, tables->owner_servers, context_.index, dim,
                                               shape_.num_tables),
        std::make_unique<store::RemotePsStore>(context_.job, servers, context_.index, dim, shape_.num_tables));
  }
  return std::make_unique<store::RemotePsStore>(context_.job, servers, context_.index, dim, shape_.num_tables);
}

}  // namespace strata::runtime
