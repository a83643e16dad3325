// One options struct per subsystem, filled from the input deck and the command line
// (see config/deck.hpp). Each field: its default and one line on what it means.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata {

// store.prefetch_depth + store.horizon may not exceed this: the L1 directory
// tracks the uses of 256 rounds at once, and the online controller may add
// a few rounds of depth on top.
constexpr int kMaxLookAheadRounds = 250;

struct LayoutOptions {
  int producers = 1;  // CPU ranks that read, parse, hash, de-duplicate and prefetch
  int trainers = 1;   // ranks that run the dense network (one per GPU, or per core on CPU)
  int servers = 1;    // parameter-server ranks holding the sparse tables (L3)
  // How the trainers divide the work (config/parallel_layout.hpp): dp x sp x ep = trainers.
  int dp = 0;         // data-parallel replicas (0 = trainers / (sp x ep))
  int sp = 1;         // sequence-parallel degree: sasrec/hstu attention, din activation unit (docs/PARALLEL.md)
  int sp_min_len = 256;          // sp > 1: histories longer than this are split over the group, shorter ones go whole
  std::string sp_mode = "ring";  // sp > 1: ring (query chunks, K/V prefixes sent in order) | alltoall (heads, Ulysses)
  int ep = 1;         // expert-parallel degree: the experts of model.kind = moe sharded over ep trainers
};

struct DataOptions {
  std::string source = "synthetic";  // criteo | csv | synthetic | hdf5 (strata convert) | sequences | synthetic_sequences
  std::string train;                 // training file (criteo, csv, hdf5)
  std::string eval;                  // held-out file (criteo, csv, hdf5)
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
  double zipf_exponent_end = -1;               // drift: the law training ends with (< 0 = no drift)
  double teacher_scale = 1.0;                  // strength of the hidden teacher's logit
  int synthetic_tasks = 1;                     // labels per sample (task 0 the click; > 1 for mmoe, ple)
  uint64_t data_seed = 2024;                   // seed of the synthetic data and teacher
  // A behaviour-history table after the others (DIN's input): target-last bags of
  // 1..synthetic_history_length history items, then the candidate item.
  int synthetic_history_length = 0;            // longest history (0 = no history table)
  int64_t synthetic_history_vocab = 100000;    // items of the history table
  // Behaviour sequences (source sequences: an event file; synthetic_sequences: generated),
  // cut into click-through samples: history before an event, the event's item or a negative.
  bool sequence_timestamps = true;             // event files: third column is a timestamp
  std::string sequence_side_columns;           // event files: names of the columns after them
  bool sequence_header = false;                // event files: skip the first line
  int64_t max_seq_len = 0;                     // keep each user's most recent events (0 = all)
  int sequence_negatives = 1;                  // negative samples per positive
  std::string sequence_eval = "validation";    // validation (second-to-last event) | test (last)
  std::string sequence_task = "ctr";           // ctr (din, dlrm) | next_item (sasrec)
  int sequence_eval_negatives = 100;           // next_item: negatives ranked beside each held-out item
  int64_t sequence_users = 10000;              // synthetic_sequences: users
  int64_t sequence_items = 100000;             // synthetic_sequences: items
  std::string sequence_length = "uniform:3:200";  // synthetic_sequences: fixed:N | uniform:A:B | zipf:A:B[:s]
};

struct ModelOptions {
  std::string kind = "dlrm";              // the network (model::model_kinds())
  int embedding_dim = 16;                 // width of every embedding row
  std::string bottom_mlp = "64,16";       // hidden widths of the bottom MLP; last must equal embedding_dim
  std::string top_mlp = "64,32";          // hidden widths of the top MLP (a final width-1 layer is added)
  std::string pooling = "sum";            // sum | mean over the keys of a bag
  float row_init_scale = 0.05f;           // new rows are uniform in [-scale, scale]
  int din_history_table = -1;             // din: table of target-last history bags (-1 = the last table)
  std::string din_attention_mlp = "36";   // din: activation unit hidden widths (a width-1 output is added)
  std::string din_tower = "mlp";          // din: the top MLP (mlp) or a mixture of top-MLP experts (moe)
  int sasrec_blocks = 2;                  // sasrec: self-attention blocks
  int sasrec_heads = 1;                   // sasrec: attention heads (must divide embedding_dim)
  int sasrec_max_len = 200;               // sasrec: longest history, rows of the positional embedding (>= data.max_seq_len)
  bool tie_item_rows = true;              // sasrec, hstu: one store row per item, read as input (history) and output (candidates)
  int hstu_blocks = 2;                    // hstu: HSTU layers
  int hstu_heads = 1;                     // hstu: attention heads (must divide embedding_dim)
  int hstu_max_len = 200;                 // hstu: longest history, rows of the positional embedding (>= data.max_seq_len)
  int hstu_buckets = 64;                  // hstu: relative-position bias buckets per layer (distances >= buckets - 1 share the last)
  int num_experts = 4;                    // moe: expert towers (each a top MLP); layout.ep must divide it
  int top_k = 1;                          // moe: experts per sample, 1 (Switch) or 2 (GShard, weights renormalised)
  double capacity_factor = 0;             // moe: tokens per expert <= ceil(factor x batch x top_k / experts) per trainer batch (0 = dropless)
  double eval_capacity_factor = 0;        // moe: the same in evaluation (0 = dropless, the default)
  double aux_loss_weight = 0.01;          // moe: weight of the load-balancing loss, experts x sum_e f_e P_e (0 = off)
  std::string expert_mlp = "64,32";       // mmoe, ple: every expert's widths (ReLU after each layer)
  std::string tower_mlp = "16";           // mmoe, ple: each task's tower hidden widths (a width-1 output is added)
  int task_experts = 1;                   // ple: experts of each task beside the num_experts shared ones
  int ple_levels = 1;                     // ple: extraction levels (1 = CGC)
};

struct OptimizerOptions {
  std::string dense = "adam";        // adam | adagrad | sgd for the replicated dense weights
  float dense_lr = 1e-3f;            // dense learning rate
  std::string sparse = "adagrad";    // adagrad | sgd | adam (lazy, per row) for embedding rows
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
  std::string mode = "tiered";  // tiered (Scheme B: L1/L2/L3 caches) | ps (Scheme A: every row from the servers)
  int prefetch_depth = 2;       // batches a producer keeps ready ahead of its trainers (>= 1)
  double l1_mb = 64;            // per-trainer L1 (device) budget, MiB (tiered)
  double l2_mb = 256;           // per-producer L2 (host) budget, MiB (tiered); 0 = no L2
  double l2_min_mb = 0;         // co-trained models in a shared L2 pool: this model's floor per producer, MiB
  double l2_max_mb = 0;         // and its cap (0 = the whole pool)
  std::string policy = "lookahead";  // lru | lfu | lfu_decay | lookahead
  double decay = 0.99;          // per-step decay of lfu_decay's frequencies
  int horizon = 128;            // rounds planned beyond the prefetch window: the look-ahead policy sees their uses
  int fault_l2_every = 0;       // fault injection: every Nth round L2 refuses rows (0 = off)
  int min_count = 0;            // admission: keys seen fewer times share their table's default row (0/1 = all)
  int64_t admission_counters = 1 << 22;  // counters per row of the admission count-min sketch (4 rows)
  int fallback_late_rounds = 0; // tiered: switch to Scheme A after this many consecutive late rounds (0 = never)
  double fault_staging_delay_ms = 0;  // fault injection: producers pause this long before staging each round
};

struct LinksOptions {
  double network_gbps = 0;        // modelled network bandwidth in Gb/s (0 = off)
  double network_latency_us = 0;  // modelled network latency per message
  double h2d_gbps = 0;            // modelled host-to-device bandwidth in Gb/s (0 = off)
  double h2d_latency_us = 0;      // modelled host-to-device latency per transfer
};

struct OutputOptions {
  std::string dir = "runs/latest";  // receives metrics.jsonl and summary.json
  bool overwrite = false;           // replace the outputs of an earlier run in dir (else that is an error)
  int metrics_every = 50;           // steps between metrics.jsonl lines
  int progress_every = 50;          // steps between progress lines on rank 0
  std::string log_level = "info";   // trace | debug | info | warn | error
  std::string trace;                // file for the key-access trace (strata trace); empty = none
};

struct CheckpointOptions {
  std::string dir;            // where checkpoints go (empty = no checkpoints)
  int64_t every_steps = 0;    // write one every N steps (0 = off)
  double every_seconds = 0;   // write one every S seconds of training (0 = off)
  int keep = 3;               // complete checkpoints kept; older ones are removed
  std::string resume;         // DIR | FILE | latest (newest complete one in dir); empty = fresh start
  bool overwrite = false;     // remove at start the checkpoints in dir this run does not continue (else: refuse dir)
};

// How the ranks run: the stall watchdog.
struct RuntimeOptions {
  double stall_timeout_s = 300;  // a wait with no progress this long ends the job with exit code 86 (0 = off)
  std::string device = "host";   // host | cuda: the backend of the embedding/optimizer/row kernels (cuda: a GPU)
  int blas_threads = 0;          // host BLAS threads per rank; 0 = auto (the environment's, else cores / ranks on the node)
};

// strata tune: a search over runs. Each tune.space_* key is empty (not searched),
// "lo:hi" or "lo:hi:log" (integers or floats), or "a|b|c" (candidates).
struct TuneOptions {
  std::string plugin = "grid";      // grid | random | optuna | /path/to/plugin.so
  int trials = 8;                   // trials to run in this invocation
  int64_t trial_steps = 100;        // measured steps per trial
  int64_t warmup_steps = 20;        // unmeasured steps before each trial's clock starts
  std::string study;                // optuna study file (journal or .db); empty = in memory
  std::string sampler = "tpe";      // optuna sampler: tpe | random | cmaes
  uint64_t seed = 7;                // seed of the random and optuna samplers
  int grid_points = 3;              // points per numeric knob in the grid plugin
  double l1_limit_mb = 1024;        // trials with a larger store.l1_mb are pruned
  double l2_limit_mb = 8192;        // trials with a larger store.l2_mb are pruned
  std::string space_l1_mb = "1:64:log";          // store.l1_mb
  std::string space_l2_mb = "0:256";             // store.l2_mb
  std::string space_prefetch_depth = "1:8";      // store.prefetch_depth
  std::string space_horizon;        // store.horizon: planning CPU against hit rate (empty: not searched)
  std::string space_policy = "lru|lfu|lookahead";  // store.policy
  std::string space_layout;         // producers/trainers/servers[,sp=..,ep=..] candidates, e.g. "1/2/1|1/2/1,sp=2"
  std::string space_batch_size;     // train.batch_size
  std::string space_sparse_lr;      // optim.sparse_lr
  std::string space_dense_lr;       // optim.dense_lr
  // What a trial is judged by: samples_per_s (measured after the warm-up), or
  // the model's quality on the held-out data after its steps (eval_auc, eval_logloss).
  std::string objective = "samples_per_s";
  // Trials run N at a time as co-trained models of one job over one pass of the
  // producers (docs/TUNER.md): the world is N x the deck's layout; needs a quality objective.
  int co_train = 1;
};

// The online cache controller of strata train (tiered mode).
struct AutotuneOptions {
  bool online = false;        // move budget between L1 and L2 and change the prefetch depth while training
  int64_t every_steps = 100;  // steps between decisions
  int min_prefetch = 1;       // prefetch depth limits of the controller
  int max_prefetch = 8;
  double step_fraction = 0.25;  // share of a level's budget moved per decision
  double max_l1_mb = 0;         // the most one L1 may grow to (0 = its producer's whole budget)
};

struct RunOptions {
  std::string config_path;  // the deck this run was read from
  // Not a deck key: strata tune measures samples/s only after this many steps (warm-up).
  int64_t measure_after_steps = 0;
  // Not a deck key: the model's name when its deck co-trains several (config/model_set.hpp).
  std::string model_name;
  double l2_pool_mb = 0;  // a co-trained model in a shared L2 pool: the pool per node (set by the job, not a deck key)
  bool tables_borrowed = false;  // its tables are another co-trained model's ([models] share_tables; set by the job)
  LayoutOptions layout;
  DataOptions data;
  ModelOptions model;
  OptimizerOptions optim;
  TrainOptions train;
  StoreOptions store;
  LinksOptions links;
  OutputOptions output;
  CheckpointOptions checkpoint;
  RuntimeOptions runtime;
  TuneOptions tune;
  AutotuneOptions autotune;
};

// Parses "64,32" into {64, 32}; names the key in the error.
std::vector<int> parse_int_list(const std::string& text, const std::string& key);

}  // namespace strata
