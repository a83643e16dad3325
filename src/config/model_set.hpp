// Model sets: one deck that co-trains several models. The deck lists them in
//   [models]
//   names = ctr_a, ctr_b
// and gives each a [model.NAME] section whose keys replace the shared deck's for
// that model: a bare key is a model key ("kind = din" is model.kind), a dotted
// one names its section ("optim.sparse_lr = 0.1", "layout.trainers = 2").
// Everything else (the data above all) is the deck's, shared by every model.
// A deck without [models] is a set of one unnamed model, as before.
#pragma once

#include <string>
#include <vector>

#include "config/options.hpp"

namespace strata {

struct NamedModel {
  std::string name;     // empty for a deck of one model
  RunOptions options;   // output.dir (and checkpoint.dir) already the model's own folder
};

struct ModelSet {
  std::vector<NamedModel> models;  // in the deck's order (only the one of --models.only, if given)
  std::vector<std::string> names;  // every model the deck lists
  std::string only;                // --models.only=NAME
  std::string output_dir;          // the job's folder (each model writes output_dir/NAME)
  // [models] shared_ingest: the models' producers on a node make each training
  // sample once for all of them (docs/MULTI_MODEL.md), in shared_ingest_mb of
  // memory per node; --models.shared_ingest=false makes every model read alone.
  bool shared_ingest = true;
  double shared_ingest_mb = 64;
  // [models] l2_pool_mb: the tiered models' producers on a node share one L2
  // pool of this many MiB (store.l2_mb then unused), moved between them by
  // measured benefit within each model's store.l2_min_mb / l2_max_mb; 0 = off.
  double l2_pool_mb = 0;
  // [models] share_tables = a, b: these models (ps mode) train one set of
  // embedding tables, held by the first one's servers; every step the servers
  // sum the models' row gradients in this order (then each model's trainers in
  // rank order) and apply one sparse-optimizer step (docs/MULTI_MODEL.md).
  std::vector<std::string> share_tables;
  bool co_trained() const { return !names.empty(); }
};

// Parses the words after the subcommand; throws strata::Error naming the key,
// its deck line, or the model. A [model.NAME] section may set model.*,
// optim.*, train.*, layout.* and store.* keys; --model.NAME.KEY=VALUE on the
// command line overrides one model's key.
ModelSet parse_model_set(const std::vector<std::string>& args);

// The world ranks a co-training job needs: each model's layout, one after the other.
int model_set_world_size(const ModelSet& set);

}  // namespace strata
