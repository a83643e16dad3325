// Deck parsing with Boost.Program_options. One table (visit_options) binds every
// key to its field, so the parser, --help and to_ini can never disagree.
#include "config/deck.hpp"

#include <cmath>
#include <cstring>
#include <boost/program_options.hpp>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include <unistd.h>

#include "common/error.hpp"
#include "config/parallel_layout.hpp"
#include "data/sequence_hdf5.hpp"     // data.source = hdf5 with a sequence file
#include "data/sequence_samples.hpp"  // the data.sequence_length law, checked with the deck
#include "model/moe.hpp"             // the expert keys, checked with the deck
#include "model/multi_task.hpp"      // the multi-task keys, checked with the deck

namespace po = boost::program_options;

namespace strata {
namespace {

// Calls v(key, field, help) for every deck key, in the order --help lists them.
template <class Visitor>
void visit_options(RunOptions& o, Visitor&& v) {
  v("layout.producers", o.layout.producers, "CPU ranks that read, parse, hash, de-duplicate and prefetch");
  v("layout.trainers", o.layout.trainers, "ranks that run the dense network (one per GPU or core)");
  v("layout.servers", o.layout.servers, "parameter-server ranks holding the sparse tables");
  v("layout.dp", o.layout.dp, "data-parallel replicas; dp x sp x ep = trainers (0 = trainers / (sp x ep))");
  v("layout.sp", o.layout.sp, "sequence-parallel degree: sasrec/hstu attention, din activation unit shared by sp trainers");
  v("layout.sp_min_len", o.layout.sp_min_len, "sp > 1: histories longer than this are split over the SP group");
  v("layout.sp_mode", o.layout.sp_mode, "sp > 1: ring (query or event chunks) | alltoall (heads, Ulysses; not din)");
  v("layout.ep", o.layout.ep, "expert-parallel degree: model.kind = moe, mmoe or ple's experts sharded over ep trainers");

  v("data.source", o.data.source,
    "criteo | csv | synthetic | hdf5 (from strata convert) | sequences (event file) | synthetic_sequences");
  v("data.train", o.data.train, "training file (criteo, csv, hdf5)");
  v("data.eval", o.data.eval, "held-out file (criteo, csv, hdf5)");
  v("data.strict", o.data.strict, "make the first malformed line fatal instead of skipping it");
  v("data.max_errors_reported", o.data.max_errors_reported, "malformed lines logged one by one");
  v("data.csv_delimiter", o.data.csv_delimiter, "csv field separator (\\t or tab for TSV)");
  v("data.csv_columns", o.data.csv_columns, "csv columns, e.g. label,dense:13,cat:26,multi:2:|");
  v("data.csv_header", o.data.csv_header, "skip the first line of each csv file");
  v("data.synthetic_train_samples", o.data.synthetic_train_samples, "synthetic training samples");
  v("data.synthetic_eval_samples", o.data.synthetic_eval_samples, "synthetic held-out samples");
  v("data.num_dense", o.data.num_dense, "synthetic dense features per sample");
  v("data.num_tables", o.data.num_tables, "synthetic categorical features (tables)");
  v("data.vocab_sizes", o.data.vocab_sizes, "synthetic vocabulary: one size or a list per table");
  v("data.hotness", o.data.hotness, "synthetic keys per bag: one value or a list per table");
  v("data.zipf_exponent", o.data.zipf_exponent, "synthetic key skew (0 = uniform)");
  v("data.synthetic_history_length", o.data.synthetic_history_length,
    "synthetic: longest behaviour history of an extra target-last table (0 = none)");
  v("data.synthetic_history_vocab", o.data.synthetic_history_vocab, "synthetic: items of the history table");
  v("data.sequence_timestamps", o.data.sequence_timestamps,
    "sequences: event lines are 'user item timestamp [side...]' (false: 'user item [side...]', file order)");
  v("data.sequence_side_columns", o.data.sequence_side_columns,
    "sequences: names of the side columns after user, item [, timestamp], e.g. category");
  v("data.sequence_header", o.data.sequence_header, "sequences: skip the first line of the event file");
  v("data.max_seq_len", o.data.max_seq_len, "sequences: keep each user's most recent events (0 = all)");
  v("data.sequence_negatives", o.data.sequence_negatives, "sequences: negative samples per positive event");
  v("data.sequence_eval", o.data.sequence_eval,
    "sequences: evaluate on each user's validation (second-to-last) or test (last) event");
  v("data.sequence_task", o.data.sequence_task,
    "sequences: ctr (click samples for din, dlrm) | next_item (one sample per user for sasrec, hstu)");
  v("data.sequence_eval_negatives", o.data.sequence_eval_negatives,
    "sequences, next_item: negatives ranked beside each held-out item (HR@10, NDCG@10)");
  v("data.sequence_users", o.data.sequence_users, "synthetic_sequences: users");
  v("data.sequence_items", o.data.sequence_items, "synthetic_sequences: items");
  v("data.sequence_length", o.data.sequence_length,
    "synthetic_sequences: events per user, fixed:N | uniform:MIN:MAX | zipf:MIN:MAX[:EXPONENT]");
  v("data.zipf_exponent_end", o.data.zipf_exponent_end,
    "synthetic drift: training moves from zipf_exponent to this law (< 0 = none); a smaller value grows the hot set");
  v("data.teacher_scale", o.data.teacher_scale, "strength of the synthetic teacher's logit");
  v("data.synthetic_tasks", o.data.synthetic_tasks,
    "synthetic: labels per sample, 1 (the click) to 16; tasks after the first have teachers of their own, "
    "correlated with the click's (model.kind = mmoe | ple)");
  v("data.data_seed", o.data.data_seed, "seed of the synthetic data and its teacher");

  v("model.kind", o.model.kind,
    "the network: dlrm | din (target attention over the history table) | sasrec (next-item self-attention) | "
    "hstu (next-item HSTU layers) | moe (DLRM with a top-k gated mixture of expert top MLPs) | "
    "mmoe (multi-task: per-task gates over shared experts) | ple (multi-task: progressive layered extraction)");
  v("model.embedding_dim", o.model.embedding_dim, "width of every embedding row");
  v("model.bottom_mlp", o.model.bottom_mlp, "bottom MLP widths; the last equals embedding_dim");
  v("model.top_mlp", o.model.top_mlp, "top MLP hidden widths (a width-1 output is added)");
  v("model.pooling", o.model.pooling, "sum | mean over the keys of a bag");
  v("model.row_init_scale", o.model.row_init_scale, "new rows are uniform in [-scale, scale]");
  v("model.din_history_table", o.model.din_history_table,
    "din: table whose bags are history items then the candidate (-1 = the last table)");
  v("model.din_attention_mlp", o.model.din_attention_mlp, "din: activation unit hidden widths (a width-1 output is added)");
  v("model.din_tower", o.model.din_tower,
    "din: mlp (the top MLP) | moe (a top-k gated mixture of top-MLP experts: model.num_experts, top_k, "
    "capacity_factor, aux_loss_weight; layout.ep shards them)");
  v("model.sasrec_blocks", o.model.sasrec_blocks, "sasrec: self-attention blocks");
  v("model.sasrec_heads", o.model.sasrec_heads, "sasrec: attention heads (must divide embedding_dim)");
  v("model.sasrec_max_len", o.model.sasrec_max_len,
    "sasrec: longest history, rows of the positional embedding (>= data.max_seq_len)");
  v("model.tie_item_rows", o.model.tie_item_rows,
    "sasrec, hstu: an item's input (history) and output (candidates) embedding are one store row, as in the "
    "SASRec paper (false: two rows per item)");
  v("model.hstu_blocks", o.model.hstu_blocks, "hstu: HSTU layers");
  v("model.hstu_heads", o.model.hstu_heads, "hstu: attention heads (must divide embedding_dim)");
  v("model.hstu_max_len", o.model.hstu_max_len,
    "hstu: longest history, rows of the positional embedding (>= data.max_seq_len)");
  v("model.hstu_buckets", o.model.hstu_buckets,
    "hstu: relative-position bias buckets per layer (distances >= buckets - 1 share the last)");
  v("model.num_experts", o.model.num_experts, "moe: expert towers, each a top MLP (layout.ep must divide it)");
  v("model.top_k", o.model.top_k, "moe: experts per sample, 1 (Switch) or 2 (GShard, gate weights renormalised)");
  v("model.capacity_factor", o.model.capacity_factor,
    "moe: each expert takes at most ceil(factor x batch_size x top_k / num_experts) samples of a trainer's batch, "
    "the rest are dropped (0 = dropless)");
  v("model.eval_capacity_factor", o.model.eval_capacity_factor,
    "moe: the capacity factor of evaluation (0 = dropless, the default: drops trade training compute, and a "
    "served model does not drop)");
  v("model.aux_loss_weight", o.model.aux_loss_weight,
    "moe: weight of the load-balancing loss num_experts x sum_e f_e P_e (0 = off)");
  v("model.expert_mlp", o.model.expert_mlp, "mmoe, ple: every expert's layer widths (ReLU after each)");
  v("model.tower_mlp", o.model.tower_mlp, "mmoe, ple: each task's tower hidden widths (a width-1 output is added)");
  v("model.task_experts", o.model.task_experts, "ple: experts of each task per level, beside num_experts shared ones");
  v("model.ple_levels", o.model.ple_levels, "ple: extraction levels (1 = CGC)");

  v("optim.dense", o.optim.dense, "adam | adagrad | sgd for the dense weights");
  v("optim.dense_lr", o.optim.dense_lr, "dense learning rate");
  v("optim.sparse", o.optim.sparse, "adagrad | sgd | adam (lazy, per row) for embedding rows");
  v("optim.sparse_lr", o.optim.sparse_lr, "sparse learning rate");
  v("optim.adagrad_init", o.optim.adagrad_init, "initial Adagrad accumulator");
  v("optim.eps", o.optim.eps, "Adam/Adagrad epsilon");
  v("optim.beta1", o.optim.beta1, "Adam first-moment decay (dense and sparse)");
  v("optim.beta2", o.optim.beta2, "Adam second-moment decay (dense and sparse)");

  v("train.batch_size", o.train.batch_size, "samples per trainer per step");
  v("train.epochs", o.train.epochs, "passes over the training data when steps = 0");
  v("train.steps", o.train.steps, "total steps (0 = run by epochs)");
  v("train.seed", o.train.seed, "seed of initial weights and rows");
  v("train.eval_batch_size", o.train.eval_batch_size, "samples per trainer per evaluation step");
  v("train.eval", o.train.eval, "evaluate on the held-out data at the end");

  v("store.mode", o.store.mode, "tiered (Scheme B, L1/L2/L3) | ps (Scheme A, remote parameter servers)");
  v("store.prefetch_depth", o.store.prefetch_depth, "batches a producer keeps ready ahead (>= 1)");
  v("store.l1_mb", o.store.l1_mb, "per-trainer L1 (device) budget in MiB (tiered)");
  v("store.l2_mb", o.store.l2_mb, "per-producer L2 (host) budget in MiB (tiered); 0 = none");
  v("store.l2_min_mb", o.store.l2_min_mb,
    "co-trained models sharing one L2 pool ([models] l2_pool_mb): the least this model's producer holds, MiB");
  v("store.l2_max_mb", o.store.l2_max_mb, "and the most (0 = the whole pool)");
  v("store.policy", o.store.policy, "lru | lfu | lfu_decay | lookahead");
  v("store.decay", o.store.decay, "per-step decay of lfu_decay's frequencies, in (0, 1)");
  v("store.horizon", o.store.horizon, "rounds of look-ahead beyond the prefetch window");
  v("store.fault_l2_every", o.store.fault_l2_every, "fault injection: L2 refuses new rows every Nth round (0 = off)");
  v("store.min_count", o.store.min_count,
    "frequency admission: keys seen fewer times share their table's default row and are not stored (0 = off)");
  v("store.admission_counters", o.store.admission_counters, "counters per row of the admission count-min sketch");
  v("store.fallback_late_rounds", o.store.fallback_late_rounds,
    "tiered: fall back to Scheme A after this many consecutive rounds staged late (0 = never)");
  v("store.fault_staging_delay_ms", o.store.fault_staging_delay_ms,
    "fault injection: producers pause this long before staging each round (ms)");

  v("links.network_gbps", o.links.network_gbps, "modelled network bandwidth, Gb/s (0 = off)");
  v("links.network_latency_us", o.links.network_latency_us, "modelled network latency per message, us");
  v("links.h2d_gbps", o.links.h2d_gbps, "modelled host-to-device bandwidth, Gb/s (0 = off)");
  v("links.h2d_latency_us", o.links.h2d_latency_us, "modelled host-to-device latency per transfer, us");

  v("output.dir", o.output.dir, "receives metrics.jsonl and summary.json");
  v("output.overwrite", o.output.overwrite,
    "remove an earlier run's outputs in output.dir at start (else a run refuses that folder)");
  v("output.metrics_every", o.output.metrics_every, "steps between metrics.jsonl lines");
  v("output.progress_every", o.output.progress_every, "steps between progress lines");
  v("output.log_level", o.output.log_level, "trace | debug | info | warn | error");
  v("output.trace", o.output.trace, "write the key-access trace of the run to this file");

  v("checkpoint.dir", o.checkpoint.dir, "directory for HDF5 checkpoints (empty = none)");
  v("checkpoint.every_steps", o.checkpoint.every_steps, "write a checkpoint every N steps (0 = off)");
  v("checkpoint.every_seconds", o.checkpoint.every_seconds, "write a checkpoint every S seconds (0 = off)");
  v("checkpoint.keep", o.checkpoint.keep, "complete checkpoints kept (older ones are removed)");
  v("checkpoint.resume", o.checkpoint.resume,
    "resume from DIR | FILE | latest (newest in checkpoint.dir) | auto (latest if any, else fresh); also --resume");
  v("checkpoint.overwrite", o.checkpoint.overwrite,
    "remove at start the checkpoints in checkpoint.dir this run does not continue (else such a directory is refused)");

  v("runtime.stall_timeout_s", o.runtime.stall_timeout_s,
    "a wait that sees no progress this long (a rank stopped or hung) ends the job with exit code 86, each rank "
    "naming what it waited for (0 = off)");
  v("runtime.device", o.runtime.device,
    "host | cuda: the backend that runs the embedding, sparse-optimizer and row kernels (cuda needs a CUDA build "
    "and a GPU)");
  v("runtime.blas_threads", o.runtime.blas_threads,
    "host BLAS (OpenBLAS) threads per rank; 0 = auto: OPENBLAS_NUM_THREADS or OMP_NUM_THREADS when set, else the "
    "cores a rank may use over the ranks of its node, at least 1");

  v("tune.plugin", o.tune.plugin, "grid | random | optuna | /path/to/plugin.so");
  v("tune.trials", o.tune.trials, "trials to run in this invocation");
  v("tune.trial_steps", o.tune.trial_steps, "measured steps per trial");
  v("tune.warmup_steps", o.tune.warmup_steps, "unmeasured steps before each trial's clock starts");
  v("tune.study", o.tune.study, "optuna study file (journal .log or SQLite .db); empty = in memory");
  v("tune.sampler", o.tune.sampler, "optuna sampler: tpe | random | cmaes");
  v("tune.seed", o.tune.seed, "seed of the random and optuna samplers");
  v("tune.grid_points", o.tune.grid_points, "points per numeric knob in the grid plugin");
  v("tune.l1_limit_mb", o.tune.l1_limit_mb, "trials with a larger store.l1_mb are pruned");
  v("tune.l2_limit_mb", o.tune.l2_limit_mb, "trials with a larger store.l2_mb are pruned");
  v("tune.space_l1_mb", o.tune.space_l1_mb, "search space of store.l1_mb: lo:hi[:log] | a|b | empty");
  v("tune.space_l2_mb", o.tune.space_l2_mb, "search space of store.l2_mb");
  v("tune.space_prefetch_depth", o.tune.space_prefetch_depth, "search space of store.prefetch_depth");
  v("tune.space_horizon", o.tune.space_horizon, "search space of store.horizon, e.g. 8:128:log");
  v("tune.space_policy", o.tune.space_policy, "candidate store.policy values, a|b|c");
  v("tune.space_layout", o.tune.space_layout, "candidate producers/trainers/servers[,sp=N,ep=N,dp=N,sp_mode=M], e.g. 1/2/1|1/2/1,sp=2");
  v("tune.space_batch_size", o.tune.space_batch_size, "search space of train.batch_size");
  v("tune.space_sparse_lr", o.tune.space_sparse_lr, "search space of optim.sparse_lr, e.g. 0.01:0.2:log");
  v("tune.space_dense_lr", o.tune.space_dense_lr, "search space of optim.dense_lr");
  v("tune.objective", o.tune.objective,
    "samples_per_s (maximised, measured after the warm-up) | eval_auc (maximised) | eval_logloss (minimised), "
    "the last two on the held-out data after the trial's steps");
  v("tune.co_train", o.tune.co_train,
    "trials run this many at a time as co-trained models of one job sharing its producers' pass over the data "
    "(mpirun -n N x the layout's ranks; needs tune.objective = eval_auc or eval_logloss)");

  v("autotune.online", o.autotune.online, "online cache controller during strata train (tiered)");
  v("autotune.every_steps", o.autotune.every_steps, "steps between the controller's decisions");
  v("autotune.min_prefetch", o.autotune.min_prefetch, "smallest prefetch depth the controller sets");
  v("autotune.max_prefetch", o.autotune.max_prefetch, "largest prefetch depth the controller sets");
  v("autotune.max_l1_mb", o.autotune.max_l1_mb,
    "the most one trainer's L1 may grow to, MiB (0 = its producer's whole L1 + L2 budget)");
  v("autotune.step_fraction", o.autotune.step_fraction, "share of a level's budget moved per decision");
}

// Keys whose value must be one of a fixed set.
const std::map<std::string, std::vector<std::string>>& choices() {
  static const std::map<std::string, std::vector<std::string>> table = {
      {"data.source", {"criteo", "csv", "synthetic", "hdf5", "sequences", "synthetic_sequences"}},
      {"data.sequence_eval", {"validation", "test"}},
      {"data.sequence_task", {"ctr", "next_item"}},
      {"tune.sampler", {"tpe", "random", "cmaes"}},
      {"tune.objective", {"samples_per_s", "eval_auc", "eval_logloss"}},
      {"model.kind", {"dlrm", "din", "sasrec", "hstu", "moe", "mmoe", "ple"}},
      {"model.din_tower", {"mlp", "moe"}},
      {"model.pooling", {"sum", "mean"}},
      {"optim.dense", {"adam", "adagrad", "sgd"}},
      {"optim.sparse", {"adagrad", "sgd", "adam"}},
      {"store.mode", {"ps", "tiered"}},
      {"layout.sp_mode", {"ring", "alltoall"}},
      {"store.policy", {"lru", "lfu", "lfu_decay", "lookahead"}},
      {"output.log_level", {"trace", "debug", "info", "warn", "error"}},
      {"runtime.device", {"host", "cuda"}},
  };
  return table;
}

template <class T>
std::string format_value(const T& value) {
  std::ostringstream out;
  if constexpr (std::is_same_v<T, bool>) {
    out << (value ? "true" : "false");
  } else {
    out << value;
  }
  return out.str();
}

po::options_description make_description(RunOptions& options) {
  po::options_description description("deck keys ([section] key = value in the deck, or --section.key=value)");
  visit_options(options, [&](const char* key, auto& field, const char* help) {
    using T = std::decay_t<decltype(field)>;
    description.add_options()(key, po::value<T>(&field)->default_value(field, format_value(field)), help);
  });
  return description;
}

std::vector<std::string> all_keys() {
  RunOptions scratch;
  std::vector<std::string> keys;
  visit_options(scratch, [&](const char* key, auto&, const char*) { keys.emplace_back(key); });
  return keys;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string closest_key(const std::string& key) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const auto& candidate : all_keys()) {
    if (candidate.rfind(key, 0) == 0) return candidate;  // a truncated key
    size_t d = edit_distance(key, candidate);
    if (d < best_distance) best_distance = d, best = candidate;
  }
  return best_distance <= std::max<size_t>(3, key.size() / 3) ? best : std::string();
}

// What a key's value must look like, from its C++ type, for "bad value" errors.
std::string expected_value(const std::string& wanted) {
  RunOptions scratch;
  std::string text;
  visit_options(scratch, [&](const char* key, auto& field, const char*) {
    if (wanted != key) return;
    using T = std::decay_t<decltype(field)>;
    if constexpr (std::is_same_v<T, bool>) {
      text = "true or false";
    } else if constexpr (std::is_integral_v<T>) {
      text = std::string(std::is_signed_v<T> ? "an integer" : "a non-negative integer") + " in [" +
             std::to_string(std::numeric_limits<T>::min()) + ", " + std::to_string(std::numeric_limits<T>::max()) +
             "], written without an exponent";
    } else if constexpr (std::is_floating_point_v<T>) {
      text = "a number";
    } else {
      text = "text";
    }
  });
  return text;
}

// A value as it can be shown in a message: printable ASCII as is, every other byte as \xNN.
std::string printable(const std::string& raw, size_t limit = 80) {
  std::string out;
  for (size_t i = 0; i < raw.size() && i < limit; ++i) {
    const unsigned char c = static_cast<unsigned char>(raw[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += char(c);
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (raw.size() > limit) out += "...";
  return out;
}

// The value boost quotes in "the argument ('VALUE') for option ... is invalid".
std::string quoted_argument(const std::string& what) {
  const size_t open = what.find("('");
  const size_t close = what.find("')", open == std::string::npos ? 0 : open);
  if (open == std::string::npos || close == std::string::npos) return std::string();
  return what.substr(open + 2, close - open - 2);
}

std::string bare_key(std::string key) {
  while (!key.empty() && key.front() == '-') key.erase(0, 1);
  return key;
}

// Boost.Program_options fills its messages by replacing %value%, %option%...
// in a loop: a value that holds such a token makes what() loop for ever (found
// by fuzz_deck). Refused before Boost sees it.
void refuse_parser_placeholders(const std::string& text, const std::string& where) {
  for (const char* token : {"%value%", "%option%", "%canonical_option%", "%prefix_option%", "%original_token%"}) {
    if (text.find(token) != std::string::npos) {
      throw Error(where + " holds '" + token + "', which the option parser cannot take",
                  "remove the '%' signs around " + std::string(token).substr(1, std::strlen(token) - 2));
    }
  }
}

Error bad_value_error(const po::error_with_option_name& e, const std::string& where) {
  const std::string key = bare_key(e.get_option_name());
  const std::string expected = expected_value(key);
  return Error("bad value '" + printable(quoted_argument(e.what())) + "' for " + key + where,
               expected.empty() ? "'strata train --help' lists every key and its type"
                                : key + " must be " + expected);
}

// Where each key of a deck file stands: "section.key" -> its line numbers. Also refuses
// a file that is not text, naming the first line that holds binary data (and never
// echoing it).
std::map<std::string, std::vector<int>> deck_key_lines(const std::string& path, const std::string& text) {
  std::istringstream file(text);
  std::map<std::string, std::vector<int>> lines;
  std::string line, section;
  int number = 0;
  while (std::getline(file, line)) {
    ++number;
    for (const char c : line) {
      const unsigned char u = static_cast<unsigned char>(c);
      if (u == 0 || (u < 0x20 && c != '\t' && c != '\r')) {
        throw Error("input deck '" + path + "' line " + std::to_string(number) +
                        " holds binary data: it is not an INI text file",
                    "pass a deck of '[section]' headers and 'key = value' lines, e.g. --config inputs/default.ini");
      }
    }
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#' || line[first] == ';') continue;
    refuse_parser_placeholders(line, "input deck '" + path + "' line " + std::to_string(number));
    const size_t close = line[first] == '[' ? line.find(']', first) : std::string::npos;
    const size_t equals = line[first] == '[' ? std::string::npos : line.find('=', first);
    if (close == std::string::npos && equals == std::string::npos) {
      throw Error("input deck '" + path + "' line " + std::to_string(number) + " ('" + printable(line, 80) +
                      "') is neither a '[section]' header nor a 'key = value' line",
                  "close the section header with ']' or write the setting as key = value");
    }
    if (line[first] == '[') {
      section = line.substr(first + 1, close - first - 1);
      continue;
    }
    std::string key = line.substr(first, equals - first);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    lines[section.empty() ? key : section + "." + key].push_back(number);
  }
  return lines;
}

std::string line_list(const std::vector<int>& lines) {
  std::string text;
  for (size_t i = 0; i < lines.size(); ++i) text += (i == 0 ? "" : i + 1 == lines.size() ? " and " : ", ") +
                                                    std::to_string(lines[i]);
  return text;
}

Error unknown_key_error(const std::string& key, const std::string& where) {
  std::string suggestion = closest_key(key);
  return Error("unknown key '" + key + "'" + where,
               (suggestion.empty() ? std::string() : "did you mean '" + suggestion + "'? ") +
                   "'strata train --help' lists every key");
}

}  // namespace

// Physical memory of this machine in MiB (0 when it cannot be read).
double physical_memory_mib() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? double(pages) * double(page) / 1048576.0 : 0.0;
}

RunOptions parse_run_options(const std::vector<std::string>& raw_args) { return parse_run_options(raw_args, nullptr); }

std::vector<std::string> deck_keys() { return all_keys(); }

RunOptions parse_run_options(const std::vector<std::string>& raw_args, const DeckOverlay* overlay) {
  // `--resume X` / `--resume=X` is the short form of --checkpoint.resume.
  std::vector<std::string> args;
  for (size_t i = 0; i < raw_args.size(); ++i) {
    if (raw_args[i] == "--resume" && i + 1 < raw_args.size()) {
      args.push_back("--checkpoint.resume=" + raw_args[++i]);
    } else if (raw_args[i].rfind("--resume=", 0) == 0) {
      args.push_back("--checkpoint.resume=" + raw_args[i].substr(9));
    } else {
      args.push_back(raw_args[i]);
    }
  }
  RunOptions options;
  po::options_description description = make_description(options);
  po::options_description command_line;
  command_line.add_options()("config", po::value<std::string>(&options.config_path), "input deck (INI)");
  command_line.add(description);

  po::variables_map values;
  for (const std::string& arg : args) refuse_parser_placeholders(arg, "the argument '" + printable(arg, 80) + "'");
  try {
    // No abbreviations: --store.prefetch must not silently mean store.prefetch_depth.
    const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    po::store(po::command_line_parser(args).options(command_line).style(style).run(), values);
  } catch (const po::unknown_option& e) {
    std::string key = e.get_option_name();
    while (!key.empty() && key.front() == '-') key.erase(0, 1);
    if (key.find('=') != std::string::npos) key.erase(key.find('='));
    throw unknown_key_error(key, " on the command line");
  } catch (const po::validation_error& e) {  // a value that does not parse as the key's type
    throw bad_value_error(e, " on the command line");
  } catch (const po::multiple_occurrences& e) {
    throw Error("--" + bare_key(e.get_option_name()) + " is given twice on the command line",
                "give each key once");
  } catch (const po::error& e) {
    throw Error(std::string("bad command line: ") + printable(e.what(), 300),
                "write overrides as --section.key=value; 'strata train --help' lists every key");
  }

  if (values.count("config")) {
    const std::string path = values["config"].as<std::string>();
    if (!std::filesystem::is_regular_file(path)) {
      throw Error("input deck '" + path + "' " +
                      (std::filesystem::exists(path) ? "is not a regular file" : "does not exist"),
                  "pass an INI file, e.g. --config inputs/default.ini");
    }
    std::ifstream stream(path);
    if (!stream) throw Error("cannot read input deck '" + path + "'", "check the file's permissions");
    std::stringstream text;
    text << stream.rdbuf();
    std::map<std::string, std::vector<int>> key_lines = deck_key_lines(path, text.str());
    // One model of a deck that lists several: its own section's keys replace the shared ones.
    std::istringstream file(overlay ? overlay->apply(text.str(), key_lines) : text.str());
    auto at = [&](const std::string& key) {
      const auto it = key_lines.find(key);
      if (it == key_lines.end()) return " in deck " + path;
      return " in deck " + path + (it->second.size() == 1 ? ", line " : ", lines ") + line_list(it->second);
    };
    try {
      po::store(po::parse_config_file(file, description, /*allow_unregistered=*/false), values);
    } catch (const po::unknown_option& e) {
      throw unknown_key_error(printable(e.get_option_name()), at(e.get_option_name()));
    } catch (const po::validation_error& e) {
      throw bad_value_error(e, at(bare_key(e.get_option_name())));
    } catch (const po::multiple_occurrences& e) {
      const std::string key = bare_key(e.get_option_name());
      throw Error(key + " is set more than once" + at(key), "keep one of those lines");
    } catch (const po::error& e) {
      throw Error("bad deck " + path + ": " + printable(e.what(), 300),
                  "write '[section]' headers and 'key = value' lines; 'strata train --help' lists every key");
    }
  }
  try {
    po::notify(values);
  } catch (const po::error& e) {
    throw Error(std::string("bad option: ") + e.what(), "'strata train --help' lists every key and its type");
  }
  validate(options);
  // A sequence HDF5 file evaluates on its own held-out events, as its event file does.
  data::resolve_sequence_hdf5(options.data, options.model.kind);
  // The deck records the layout it ran with: layout.dp = 0 becomes trainers / (sp x ep).
  options.layout.dp = resolve_parallel_layout(options.layout).dp;
  return options;
}

namespace {
// Models that rank next items (data.sequence_task = next_item) rather than predict clicks.
bool next_item_model(const std::string& kind) { return kind == "sasrec" || kind == "hstu"; }
}  // namespace

void validate(const RunOptions& options) {
  RunOptions copy = options;
  visit_options(copy, [&](const char* key, auto& field, const char*) {
    using T = std::decay_t<decltype(field)>;
    if constexpr (std::is_same_v<T, std::string>) {
      auto it = choices().find(key);
      if (it == choices().end()) return;
      for (const auto& allowed : it->second) {
        if (field == allowed) return;
      }
      std::string list;
      for (const auto& allowed : it->second) list += (list.empty() ? "" : ", ") + allowed;
      throw Error("bad value '" + field + "' for " + key, "allowed values: " + list);
    }
  });
  auto require_positive = [](const char* key, int64_t value) {
    if (value < 1) {
      throw Error(std::string("bad value ") + std::to_string(value) + " for " + key, std::string(key) + " must be >= 1");
    }
  };
  require_positive("layout.producers", options.layout.producers);
  require_positive("layout.trainers", options.layout.trainers);
  require_positive("layout.servers", options.layout.servers);
  const ParallelLayout parallel = resolve_parallel_layout(options.layout);
  if (parallel.sp > 1) {
    const bool din = options.model.kind == "din";
    if (!next_item_model(options.model.kind) && !din) {
      throw Error("layout.sp = " + std::to_string(parallel.sp) + " shares attention over a sequence, but model.kind = " +
                      options.model.kind + " has none that can be split exactly",
                  "set layout.sp = 1, or model.kind = sasrec, hstu or din (see docs/PARALLEL.md)");
    }
    // din's activation unit has no heads: its histories are cut into chunks of events.
    if (din && options.layout.sp_mode != "ring") {
      throw Error("layout.sp_mode = " + options.layout.sp_mode +
                      " splits attention heads, but model.kind = din has none",
                  "set layout.sp_mode = ring (din cuts a long history into chunks of events)");
    }
    if (options.layout.sp_min_len < 0) {
      throw Error("bad value " + std::to_string(options.layout.sp_min_len) + " for layout.sp_min_len",
                  "layout.sp_min_len must be >= 0 (histories longer than it are split over the SP group)");
    }
    const int heads = din                               ? parallel.sp
                      : options.model.kind == "sasrec" ? options.model.sasrec_heads
                                                       : options.model.hstu_heads;
    if (options.layout.sp_mode == "alltoall" && heads % parallel.sp != 0) {
      throw Error("layout.sp_mode = alltoall splits heads, but model." + options.model.kind + "_heads = " +
                      std::to_string(heads) + " is not a multiple of layout.sp = " + std::to_string(parallel.sp),
                  "set model." + options.model.kind + "_heads to a multiple of layout.sp, or layout.sp_mode = ring");
    }
  }
  const bool moe_tower = options.model.kind == "din" && options.model.din_tower == "moe";
  if (options.model.din_tower != "mlp" && options.model.kind != "din") {
    throw Error("model.din_tower = " + options.model.din_tower + " is din's, but model.kind = " + options.model.kind,
                "drop model.din_tower (for DLRM with experts set model.kind = moe)");
  }
  const bool has_experts = options.model.kind == "moe" || moe_tower || options.model.kind == "mmoe" ||
                           options.model.kind == "ple";
  if (parallel.ep > 1 && !has_experts) {
    throw Error("layout.ep = " + std::to_string(parallel.ep) + " shards experts, but model.kind = " +
                    options.model.kind + (options.model.kind == "din" ? " with model.din_tower = mlp" : "") +
                    " has none",
                "set model.kind = moe, mmoe or ple (or din with model.din_tower = moe), or layout.ep = 1");
  }
  if (options.model.kind == "moe" || moe_tower) model::check_moe_options(options.model);
  if (options.model.kind == "mmoe" || options.model.kind == "ple") model::check_multi_task_options(options.model);
  // (ple's levels also hold each task's experts: the model checks their sum, which needs the task count.)
  if ((options.model.kind == "moe" || moe_tower || options.model.kind == "mmoe") &&
      options.model.num_experts % parallel.ep != 0) {
    throw Error("layout.ep = " + std::to_string(parallel.ep) + " does not divide model.num_experts = " +
                    std::to_string(options.model.num_experts),
                "choose model.num_experts as a multiple of layout.ep: every expert-parallel trainer holds as many "
                "experts");
  }
  require_positive("train.batch_size", options.train.batch_size);
  require_positive("train.eval_batch_size", options.train.eval_batch_size);
  require_positive("store.prefetch_depth", options.store.prefetch_depth);
  if (options.store.horizon < 0) throw Error("bad value for store.horizon", "store.horizon must be >= 0");
  if (options.store.prefetch_depth + options.store.horizon > kMaxLookAheadRounds) {
    throw Error("store.prefetch_depth + store.horizon = " +
                    std::to_string(options.store.prefetch_depth + options.store.horizon) + " is too far ahead",
                "keep store.prefetch_depth + store.horizon <= " + std::to_string(kMaxLookAheadRounds) +
                    " (the look-ahead tracks at most 256 rounds)");
  }
  if (options.store.min_count < 0) throw Error("bad value for store.min_count", "store.min_count must be >= 0");
  if (options.store.admission_counters < 1024) {
    throw Error("bad value for store.admission_counters", "store.admission_counters must be >= 1024");
  }
  for (const auto& [key, lr] : {std::pair<const char*, double>{"optim.dense_lr", options.optim.dense_lr},
                                 {"optim.sparse_lr", options.optim.sparse_lr}}) {
    if (!(std::isfinite(lr) && lr > 0)) {
      throw Error(std::string("bad value for ") + key + ": " + std::to_string(lr),
                  std::string(key) + " must be a finite number > 0");
    }
  }
  if (options.store.fallback_late_rounds < 0) {
    throw Error("bad value for store.fallback_late_rounds", "store.fallback_late_rounds must be >= 0");
  }
  if (options.store.fault_staging_delay_ms < 0) {
    throw Error("bad value for store.fault_staging_delay_ms", "store.fault_staging_delay_ms must be >= 0");
  }
  if (!(options.store.l1_mb > 0)) throw Error("bad value for store.l1_mb", "store.l1_mb must be > 0");
  if (options.store.l2_mb < 0) throw Error("bad value for store.l2_mb", "store.l2_mb must be >= 0");
  if (options.store.l2_min_mb < 0 || options.store.l2_max_mb < 0 ||
      (options.store.l2_max_mb > 0 && options.store.l2_min_mb > options.store.l2_max_mb)) {
    throw Error("bad values for store.l2_min_mb = " + std::to_string(options.store.l2_min_mb) +
                    " and store.l2_max_mb = " + std::to_string(options.store.l2_max_mb),
                "both are >= 0 MiB, and l2_min_mb <= l2_max_mb unless l2_max_mb is 0 (the whole pool)");
  }
  // A budget past this machine's memory would end later in std::bad_alloc naming no key.
  const double memory_mib = physical_memory_mib();
  for (const auto& [key, mib] :
       {std::pair<const char*, double>{"store.l1_mb", options.store.l1_mb},
        {"store.l2_mb", options.store.l2_mb},
        {"autotune.max_l1_mb", options.autotune.max_l1_mb},
        {"store.admission_counters", 16.0 * double(options.store.admission_counters) / 1048576.0}}) {
    if (memory_mib > 0 && !(mib <= memory_mib)) {
      const bool counters = std::string(key) == "store.admission_counters";
      throw Error(std::string(key) + " = " +
                      (counters ? std::to_string(options.store.admission_counters) + " (" +
                                      std::to_string(int64_t(mib)) + " MiB of counters: 4 rows of 4 bytes)"
                                : format_value(mib) + " MiB") +
                      " does not fit in this machine's memory (" + std::to_string(int64_t(memory_mib)) + " MiB)",
                  std::string("lower ") + key + " below the memory the ranks of this machine share");
    }
  }
  if (!(options.store.decay > 0 && options.store.decay < 1)) {
    throw Error("bad value for store.decay", "store.decay must be in (0, 1), e.g. 0.99");
  }
  require_positive("model.embedding_dim", options.model.embedding_dim);
  require_positive("output.metrics_every", options.output.metrics_every);
  require_positive("output.progress_every", options.output.progress_every);
  if (options.train.steps < 0) throw Error("bad value for train.steps", "train.steps must be >= 0 (0 = run by epochs)");
  if (options.train.steps == 0 && options.train.epochs < 1) {
    throw Error("train.steps = 0 and train.epochs < 1: nothing to train", "set train.epochs >= 1 or train.steps > 0");
  }
  if (options.data.source != "synthetic" && options.data.source != "synthetic_sequences" &&
      options.data.train.empty()) {
    throw Error("data.source = " + options.data.source + " needs data.train", "set data.train = PATH in the deck");
  }
  if (options.data.source == "sequences" || options.data.source == "synthetic_sequences") {
    if (!options.data.eval.empty()) {
      throw Error("data.eval is set but data.source = " + options.data.source +
                      " evaluates on each user's held-out last events (the SASRec split)",
                  "remove data.eval; data.sequence_eval chooses the validation or the test event");
    }
    if (options.data.max_seq_len < 0) {
      throw Error("data.max_seq_len = " + std::to_string(options.data.max_seq_len) + " is negative",
                  "use 0 (every event) or the number of most recent events to keep");
    }
    require_positive("data.sequence_negatives", options.data.sequence_negatives);
    require_positive("data.sequence_eval_negatives", options.data.sequence_eval_negatives);
    const bool next_item = options.data.sequence_task == "next_item";
    const bool ranks = next_item_model(options.model.kind);
    if (next_item != ranks) {
      throw Error("model.kind = " + options.model.kind + " does not train on data.sequence_task = " +
                      options.data.sequence_task + " samples",
                  ranks ? "set data.sequence_task = next_item (one sample per user, ranked candidates)"
                        : "set data.sequence_task = ctr, or model.kind = sasrec | hstu for next_item samples");
    }
    if (options.data.source == "synthetic_sequences") {
      require_positive("data.sequence_users", options.data.sequence_users);
      require_positive("data.sequence_items", options.data.sequence_items);
      data::SyntheticSequenceOptions law;
      data::parse_sequence_length(options.data.sequence_length, law);
    }
  }
  // hdf5: resolve_sequence_hdf5 checks that the file holds sequences.
  if (next_item_model(options.model.kind) && options.data.source != "sequences" &&
      options.data.source != "synthetic_sequences" && options.data.source != "hdf5") {
    throw Error("model.kind = " + options.model.kind + " reads behaviour sequences, not data.source = " +
                    options.data.source,
                "set data.source = sequences (an event file), synthetic_sequences or hdf5 (an event file "
                "converted by strata convert --from sequences), and data.sequence_task = next_item");
  }
  if (options.data.source == "csv" && options.data.csv_columns.empty()) {
    throw Error("data.source = csv needs data.csv_columns", "e.g. data.csv_columns = label,dense:13,cat:26");
  }
  parse_int_list(options.model.bottom_mlp, "model.bottom_mlp");
  parse_int_list(options.model.top_mlp, "model.top_mlp");
  if (options.checkpoint.every_steps < 0 || options.checkpoint.every_seconds < 0) {
    throw Error("bad value for checkpoint.every_steps / every_seconds", "both must be >= 0 (0 = off)");
  }
  require_positive("checkpoint.keep", options.checkpoint.keep);
  if (!(std::isfinite(options.runtime.stall_timeout_s) && options.runtime.stall_timeout_s >= 0)) {
    throw Error("bad value for runtime.stall_timeout_s: " + std::to_string(options.runtime.stall_timeout_s),
                "runtime.stall_timeout_s must be a finite number of seconds >= 0 (0 = off)");
  }
  if (options.runtime.blas_threads < 0 || options.runtime.blas_threads > 1024) {
    throw Error("bad value for runtime.blas_threads: " + std::to_string(options.runtime.blas_threads),
                "runtime.blas_threads must be 0 (auto) or a thread count from 1 to 1024");
  }
  if ((options.checkpoint.every_steps > 0 || options.checkpoint.every_seconds > 0) && options.checkpoint.dir.empty()) {
    throw Error("checkpoints requested but checkpoint.dir is empty", "set checkpoint.dir = PATH");
  }
  require_positive("tune.trials", options.tune.trials);
  require_positive("tune.trial_steps", options.tune.trial_steps);
  if (options.tune.warmup_steps < 0) throw Error("bad value for tune.warmup_steps", "tune.warmup_steps must be >= 0");
  require_positive("tune.grid_points", options.tune.grid_points);
  if (options.tune.co_train < 1 || options.tune.co_train > 64) {
    throw Error("bad value for tune.co_train: " + std::to_string(options.tune.co_train),
                "tune.co_train is the number of trials trained together, from 1 (one at a time) to 64");
  }
  require_positive("autotune.every_steps", options.autotune.every_steps);
  require_positive("autotune.min_prefetch", options.autotune.min_prefetch);
  if (options.autotune.max_prefetch < options.autotune.min_prefetch) {
    throw Error("autotune.max_prefetch < autotune.min_prefetch", "set max_prefetch >= min_prefetch");
  }
  if (!(options.autotune.step_fraction > 0 && options.autotune.step_fraction < 1)) {
    throw Error("bad value for autotune.step_fraction", "autotune.step_fraction must be in (0, 1), e.g. 0.25");
  }
}

std::string deck_help() {
  RunOptions defaults;
  std::ostringstream out;
  out << make_description(defaults);
  out << "\nseveral models in one job (docs/MULTI_MODEL.md):\n"
         "  [models] names = a,b,...      the models, in the order of their ranks\n"
         "  [model.NAME] KEY = VALUE      that model's model.* keys (bare) and optim.*, train.*, layout.*,\n"
         "                                store.* keys (dotted), replacing the shared ones for it\n"
         "  --model.NAME.KEY=VALUE        one model's key on the command line\n"
         "  --models.only=NAME            train one of the deck's models alone\n"
         "  [models] shared_ingest = true the models' producers on a node make each sample once (64 MiB,\n"
         "                                shared_ingest_mb)\n"
         "  [models] l2_pool_mb = N       the tiered models share N MiB of L2 per node (store.l2_min_mb,\n"
         "                                store.l2_max_mb bound each model's share)\n"
         "  [models] share_tables = a,b   these ps models train one set of embedding tables (a's servers)\n";
  return out.str();
}

std::string to_ini(const RunOptions& options) {
  RunOptions copy = options;
  std::ostringstream out;
  std::string section;
  visit_options(copy, [&](const char* key, auto& field, const char*) {
    std::string name(key);
    size_t dot = name.find('.');
    std::string this_section = name.substr(0, dot);
    if (this_section != section) {
      out << (section.empty() ? "" : "\n") << "[" << this_section << "]\n";
      section = this_section;
    }
    out << name.substr(dot + 1) << " = " << format_value(field) << "\n";
  });
  return out.str();
}

}  // namespace strata

namespace strata {

// The deck's text as one model sees it: the [models] and [model.NAME] sections
// and the shared lines this model's keys replace become blank (line numbers
// stay), and the model's keys follow at the end under their own sections; their
// errors name the lines of [model.NAME] they came from.
std::string DeckOverlay::apply(const std::string& text, std::map<std::string, std::vector<int>>& key_lines) const {
  std::istringstream in(text);
  std::ostringstream out;
  std::string line, section;
  while (std::getline(in, line)) {
    const size_t first = line.find_first_not_of(" \t");
    bool blank = false;
    if (first != std::string::npos && line[first] == '[') {
      const size_t close = line.find(']', first);
      section = line.substr(first + 1, close == std::string::npos ? std::string::npos : close - first - 1);
    } else if (first != std::string::npos && line[first] != '#' && line[first] != ';') {
      std::string key = line.substr(first, line.find('=', first) - first);
      while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
      const std::string full = section.empty() ? key : section + "." + key;
      for (const auto& entry : entries) blank = blank || entry.key == full;
    }
    const bool hidden = section == "models" || section.rfind("model.", 0) == 0;
    out << (hidden || blank ? "" : line) << "\n";
  }
  for (const auto& entry : entries) {
    const size_t dot = entry.key.find('.');
    out << "[" << entry.key.substr(0, dot) << "]\n" << entry.key.substr(dot + 1) << " = " << entry.value << "\n";
    key_lines[entry.key] = {entry.line};
  }
  return out.str();
}

}  // namespace strata
