// One options struct per subsystem, filled from the input deck and the command line
// (see config/deck.hpp). Each field: its default and one line on what it means.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata {

struct LayoutOptions {
  int producers = 1;  // CPU ranks that read, parse, hash, de-duplicate and prefetch
  int trainers = 1;   // ranks that run the dense network (one per GPU, or per core on CPU)
  int servers = 1;    // parameter-server ranks holding the sparse tables (L3)
};

struct DataOptions {
  std::string source = "synthetic";  // criteo | csv | synthetic
  std::string train;                 // training file (criteo, csv)
  std::string eval;                  // held-out file (criteo, csv)
  bool strict = false;               // first malformed line is fatal instead of skipped
  int max_errors_reported = 10;      // malformed lines logged individually (all are counted)
  // Generic CSV/TSV reader.
  std::string csv_delimiter = ",";   // field separator; "\t" or "tab" for TSV
  std::string csv_columns;           // e.g. "label,dense:13,cat:26,multi:2:|" (see docs)
  bool csv_header = false;           // skip the first line of each file
  // Synthetic generator (Criteo-shaped by default).
  int64_t synthetic_train_samples = 1 << 20;  // size of the training stream
  int64_t synthetic_eval_samples = 1 << 16;   // size of the held-out stream
  int num_dense = 13;                          // dense features per sample
  int num_tables = 26;                         // categorical features (embedding tables)
  std::string vocab_sizes = "100000";          // one value for all tables, or a comma list
  std::string hotness = "1";                   // keys per bag: one value or a comma list
  double zipf_exponent = 1.05;                 // skew of key popularity (0 = uniform)
  double teacher_scale = 1.0;                  // strength of the hidden teacher's logit
  uint64_t data_seed = 2024;                   // seed of the synthetic data and teacher
};

struct ModelOptions {
  int embedding_dim = 16;                 // width of every embedding row
  std::string bottom_mlp = "64,16";       // hidden widths of the bottom MLP; last must equal embedding_dim
  std::string top_mlp = "64,32";          // hidden widths of the top MLP (a final width-1 layer is added)
  std::string pooling = "sum";            // sum | mean over the keys of a bag
  float row_init_scale = 0.05f;           // new rows are uniform in [-scale, scale]
};

struct OptimizerOptions {
  std::string dense = "adam";        // adam | adagrad | sgd for the replicated dense weights
  float dense_lr = 1e-3f;            // dense learning rate
  std::string sparse = "adagrad";    // adagrad | sgd for embedding rows
  float sparse_lr = 0.05f;           // sparse learning rate
  float adagrad_init = 0.0f;         // initial Adagrad accumulator
  float eps = 1e-8f;                 // Adam/Adagrad epsilon
  float beta1 = 0.9f;                // Adam first-moment decay
  float beta2 = 0.999f;              // Adam second-moment decay
};

struct TrainOptions {
  int batch_size = 256;      // samples per trainer per step
  int epochs = 1;            // passes over the training data (when steps = 0)
  int64_t steps = 0;         // total steps; 0 = run by epochs
  uint64_t seed = 1;         // seed of the model's initial weights and rows
  int eval_batch_size = 1024;  // samples per trainer per evaluation step
  bool eval = true;          // evaluate on the held-out data at the end
};

struct StoreOptions {
  std::string mode = "ps";      // ps (Scheme A: every row from the servers) | tiered (Scheme B)
  int prefetch_depth = 2;       // batches a producer keeps ready ahead of its trainers (>= 1)
  double l1_mb = 64;            // per-trainer L1 (device) budget, MiB (tiered)
  double l2_mb = 256;           // per-producer L2 (host) budget, MiB (tiered); 0 = no L2
  std::string policy = "lookahead";  // lru | lfu | lfu_decay | lookahead
  double decay = 0.99;          // per-step decay of lfu_decay's frequencies
  int horizon = 4;              // rounds of look-ahead beyond the prefetch window (lookahead policy)
  int fault_l2_every = 0;       // fault injection: every Nth round L2 refuses rows (0 = off)
};

struct LinksOptions {
  double network_gbps = 0;        // modelled network bandwidth in Gb/s (0 = off)
  double network_latency_us = 0;  // modelled network latency per message
  double h2d_gbps = 0;            // modelled host-to-device bandwidth in Gb/s (0 = off)
  double h2d_latency_us = 0;      // modelled host-to-device latency per transfer
};

struct OutputOptions {
  std::string dir = "runs/latest";  // receives metrics.jsonl and summary.json
  int metrics_every = 50;           // steps between metrics.jsonl lines
  int progress_every = 50;          // steps between progress lines on rank 0
  std::string log_level = "info";   // trace | debug | info | warn | error
  std::string trace;                // file for the key-access trace (strata trace); empty = none
};

struct RunOptions {
  std::string config_path;  // the deck this run was read from
  LayoutOptions layout;
  DataOptions data;
  ModelOptions model;
  OptimizerOptions optim;
  TrainOptions train;
  StoreOptions store;
  LinksOptions links;
  OutputOptions output;
};

// Parses "64,32" into {64, 32}; names the key in the error.
std::vector<int> parse_int_list(const std::string& text, const std::string& key);

}  // namespace strata
