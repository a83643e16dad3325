#include "runtime/train_job.hpp"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "backend/device.hpp"
#include "comm/collectives.hpp"
#include "comm/link_model.hpp"
#include "comm/mpi_channel.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "config/deck.hpp"
#include "config/parallel_layout.hpp"
#include "data/sequence_samples.hpp"
#include "data/synthetic.hpp"
#include "io/metrics_writer.hpp"
#include "model/model.hpp"
#include "model/optimizers.hpp"
#include "runtime/batch_source.hpp"
#include "runtime/checkpointing.hpp"
#include "runtime/output_dir.hpp"
#include "runtime/preemption.hpp"
#include "runtime/producer_role.hpp"
#include "runtime/role_layout.hpp"
#include "runtime/server_role.hpp"
#include "runtime/trainer_role.hpp"

namespace strata::runtime {
namespace {

// Fixed-size per-rank report gathered on rank 0 (fields used depend on the role).
struct RankReport {
  int32_t role = 0;
  int32_t index = 0;
  double values[40] = {};
  double train_cpu[2] = {};  // user, sys over the role's training loop
  double run_cpu[2] = {};    // user, sys of the whole process
  double peak_rss_mib = 0;   // the process's high-water resident memory
  double training_rss_mib = 0;  // the same before the end-of-run dump of every row
  double counted_mib[3] = {};   // the structures the budgets count (see build_summary)
};


enum ProducerField { kBatches, kSamples, kBytesSent, kBuildS, kBlockedS, kLines, kMalformed, kL1Hits, kL1Misses,
                     kL1Evictions, kL2Hits, kL2Misses, kL2Evictions, kL2WriteBacks, kFallbackRows, kBytesL3ToL2,
                     kBytesL2ToL3, kStagingS, kWriteBackWaitS, kL3WaitS, kMaxWindowRows, kL1CapacityRows,
                     kL2CapacityRows, kLateRounds, kPsFallbackRound, kAdmissionSeen, kAdmissionDefaulted,
                     kStagingCpuS, kSharedHits, kSharedMade, kSharedPublished, kSharedWaitS,
                     kSharedSamplesCopied, kSharedMakingWaitS, kSharedBatchHits, kSharedBatchesMade, kSharedBatchWaitS,
                     kPoolGrantMb, kPoolChanges, kPoolDecisions, kProducerFields };
static_assert(kProducerFields <= 40, "RankReport::values is too small");
enum ServerField { kRounds, kRows, kMemoryBytes };
enum TrainerField { kStallS, kPullWaitS, kRowsPulled, kBytesPulled, kRowsPushed, kBytesPushed, kBytesRequested,
                    kBytesBatches, kBytesAllreduce, kKeysTotal, kKeysUnique, kKeysBatches, kBytesExperts, kBytesSequence };

nlohmann::json build_summary(const RunOptions& options, const TrainerReport& root,
                             const std::vector<RankReport>& reports, const std::vector<double>& teacher_auc) {
  double bytes_pulled = 0, bytes_pushed = 0, bytes_requested = 0, bytes_batches = 0, bytes_allreduce = 0;
  double bytes_experts = 0, bytes_sequence = 0, bytes_sequence_busiest = 0;
  double rows_pulled = 0, rows_pushed = 0, stall = 0, pull_wait = 0;
  double keys_total = 0, keys_unique = 0, keys_batches = 0;
  double lines = 0, malformed = 0, server_rows = 0, server_memory = 0, producer_blocked = 0, producer_build = 0;
  double tiered[kProducerFields] = {};  // producer fields summed (maxima for the row counts)
  const char* role_names[3] = {"trainer", "producer", "server"};
  double train_cpu[3][2] = {}, run_cpu[3][2] = {}, peak_rss[3] = {}, training_rss[3] = {};
  double counted[3][3] = {};  // per role, the largest rank's counted structures
  int role_ranks[3] = {};
  tiered[kPsFallbackRound] = -1;
  for (const auto& r : reports) {
    const double* v = r.values;
    const int role = r.role == int32_t(Role::kTrainer) ? 0 : r.role == int32_t(Role::kProducer) ? 1 : 2;
    role_ranks[role] += 1;
    for (int k = 0; k < 2; ++k) train_cpu[role][k] += r.train_cpu[k], run_cpu[role][k] += r.run_cpu[k];
    peak_rss[role] = std::max(peak_rss[role], r.peak_rss_mib);
    training_rss[role] = std::max(training_rss[role], r.training_rss_mib);
    for (int k = 0; k < 3; ++k) counted[role][k] = std::max(counted[role][k], r.counted_mib[k]);
    switch (static_cast<Role>(r.role)) {
      case Role::kTrainer:
        stall += v[kStallS], pull_wait += v[kPullWaitS], rows_pulled += v[kRowsPulled];
        bytes_pulled += v[kBytesPulled], rows_pushed += v[kRowsPushed], bytes_pushed += v[kBytesPushed];
        bytes_requested += v[kBytesRequested], bytes_batches += v[kBytesBatches];
        bytes_allreduce += v[kBytesAllreduce], bytes_experts += v[kBytesExperts];
        bytes_sequence += v[kBytesSequence];
        bytes_sequence_busiest = std::max(bytes_sequence_busiest, v[kBytesSequence]);
        keys_total += v[kKeysTotal], keys_unique += v[kKeysUnique], keys_batches += v[kKeysBatches];
        break;
      case Role::kProducer:
        lines += v[kLines], malformed += v[kMalformed];
        for (int f = kL1Hits; f <= kL3WaitS; ++f) tiered[f] += v[f];
        for (int f = kMaxWindowRows; f <= kL2CapacityRows; ++f) tiered[f] = std::max(tiered[f], v[f]);
        tiered[kLateRounds] += v[kLateRounds];
        tiered[kPsFallbackRound] = std::max(tiered[kPsFallbackRound], v[kPsFallbackRound]);
        tiered[kAdmissionSeen] += v[kAdmissionSeen];
        tiered[kAdmissionDefaulted] += v[kAdmissionDefaulted];
        tiered[kStagingCpuS] += v[kStagingCpuS];
        for (int f = kSharedHits; f <= kPoolDecisions; ++f) tiered[f] += v[f];
        producer_blocked += v[kBlockedS], producer_build += v[kBuildS];
        break;
      case Role::kServer:
        server_rows += v[kRows], server_memory += v[kMemoryBytes];
        break;
    }
  }
  const double samples = std::max<double>(double(root.samples), 1.0);
  const ParallelLayout parallel = resolve_parallel_layout(options.layout);
  nlohmann::json summary = {
      {"model", options.model_name},
      {"mode", options.store.mode},
      {"layout", {{"trainers", options.layout.trainers}, {"producers", options.layout.producers},
                  {"servers", options.layout.servers}, {"dp", parallel.dp}, {"sp", parallel.sp},
                  {"ep", parallel.ep}}},
      {"steps", root.steps},
      {"samples", root.samples},
      {"train_seconds", root.train_seconds},
      {"samples_per_s", root.samples_per_s},
      {"train_logloss", root.train_logloss},
      {"eval_auc", root.eval_auc},
      {"eval_logloss", root.eval_logloss},
      {"eval_samples", root.eval_samples},
      {"params_digest", root.params_digest},
      {"sparse_rows", root.sparse_rows},
      {"rows", {{"pulled", rows_pulled}, {"pushed", rows_pushed}}},
      {"bytes",
       {{"server_to_trainer", bytes_pulled},
        {"trainer_to_server", bytes_pushed + bytes_requested},
        {"producer_to_trainer", bytes_batches},
        {"trainer_allreduce", bytes_allreduce},
        {"trainer_experts", bytes_experts},
        {"trainer_sequence", bytes_sequence}}},
      {"bytes_per_sample", {{"server_to_trainer", bytes_pulled / samples},
                            {"trainer_to_server", (bytes_pushed + bytes_requested) / samples}}},
      {"time_s", {{"trainer_stall", stall}, {"trainer_pull_wait", pull_wait},
                  {"producer_build", producer_build}, {"producer_blocked", producer_blocked}}},
      {"data", {{"source", options.data.source}, {"lines", lines}, {"malformed_lines", malformed}}},
      {"servers", {{"rows", server_rows}, {"memory_bytes", server_memory}}},
  };
  if (!teacher_auc.empty()) summary["teacher_auc"] = teacher_auc[0];
  if (!root.eval_auc_per_task.empty()) {
    // Multi-task models: every task's figures; eval_auc and eval_logloss above are task 0's.
    nlohmann::json tasks = nlohmann::json::array();
    for (size_t t = 0; t < root.eval_auc_per_task.size(); ++t) {
      nlohmann::json task = {{"task", t}, {"eval_auc", root.eval_auc_per_task[t]},
                             {"eval_logloss", root.eval_logloss_per_task[t]}};
      if (t < teacher_auc.size()) task["teacher_auc"] = teacher_auc[t];
      tasks.push_back(task);
    }
    summary["tasks"] = tasks;
  }
  if (root.sequence_parallel.steps > 0) {
    // Trainer 0's SP group: how its plans balanced the attention and what it sent per layer.
    const model::SequenceParallelStats& sp = root.sequence_parallel;
    // din has one activation unit (its "attention"); sasrec and hstu one attention per block.
    const int layers = options.model.kind == "din"      ? 1
                       : options.model.kind == "sasrec" ? options.model.sasrec_blocks
                                                        : options.model.hstu_blocks;
    const double layer_steps = sp.steps * std::max(1, layers);
    summary["sequence_parallel"] = {{"mode", options.layout.sp_mode},
                                    {"min_len", options.layout.sp_min_len},
                                    {"attention_max_mean", sp.max_mean_sum / sp.steps},
                                    {"attention_max_mean_worst", sp.max_mean_worst},
                                    {"split_sequences_per_step", sp.split_sequences / sp.steps},
                                    {"trainer0_bytes_per_layer_forward", sp.bytes_forward / layer_steps},
                                    {"trainer0_bytes_per_layer_backward", sp.bytes_backward / layer_steps},
                                    // Every trainer's sends, plans included: the ring spreads a home's.
                                    {"busiest_trainer_bytes_per_layer", bytes_sequence_busiest / layer_steps}};
  }
  if (!root.routing.routed.empty()) {
    summary["experts"] = routing_json(root.routing);
    summary["experts"]["num_experts"] = options.model.num_experts;
    if (options.model.kind == "moe" || options.model.din_tower == "moe") {
      summary["experts"]["top_k"] = options.model.top_k;
      summary["experts"]["capacity_factor"] = options.model.capacity_factor;
    } else {
      // Dense gates (mmoe, ple): routed is each expert's soft load, nothing is dropped.
      summary["experts"]["load"] = "gate weights summed over training samples and gates";
    }
  }
  if (root.eval_hit_rate >= 0) {
    summary["eval_hr_at_10"] = root.eval_hit_rate;
    summary["eval_ndcg_at_10"] = root.eval_ndcg;
  }
  // What de-duplication saves: keys read per training batch (every trainer's batches,
  // all tables) before and after it; the rows a store has to supply are the unique ones.
  const double batches = std::max(keys_batches, 1.0);
  summary["keys_per_batch"] = {{"total", keys_total / batches},
                               {"unique", keys_unique / batches},
                               {"unique_share", keys_total > 0 ? keys_unique / keys_total : 0.0}};
  // Where the CPU went, per role, over each role's training loop (and over the
  // whole run, start-up and final dump included).
  nlohmann::json cpu, cpu_run, per_sample;
  double total_cpu = 0;
  for (int role = 0; role < 3; ++role) {
    if (role_ranks[role] == 0) continue;
    cpu[role_names[role]] = {{"user", train_cpu[role][0]}, {"sys", train_cpu[role][1]}, {"ranks", role_ranks[role]}};
    cpu_run[role_names[role]] = {{"user", run_cpu[role][0]}, {"sys", run_cpu[role][1]}};
    const double both = train_cpu[role][0] + train_cpu[role][1];
    per_sample[role_names[role]] = 1e6 * both / samples;
    total_cpu += both;
  }
  per_sample["total"] = 1e6 * total_cpu / samples;
  if (options.store.mode == "tiered") per_sample["producer_staging"] = 1e6 * tiered[kStagingCpuS] / samples;
  summary["cpu_s"] = cpu;
  summary["cpu_s"]["total"] = total_cpu;
  summary["cpu_s_whole_run"] = cpu_run;
  summary["cpu_us_per_sample"] = per_sample;
  // Memory beside the budgets (README "Memory"): each role's largest peak RSS,
  // and what the servers' row tables hold per row against the row's own bytes.
  // peak_rss_training_mib stops before the end-of-run dump of every row (for
  // params_digest), which grows with the model, not with the budgets;
  // counted_mib is what each role's largest rank holds in the structures the
  // budgets count.
  nlohmann::json rss, training_rss_json, counted_json;
  const char* counted_names[3][3] = {{"l1", "dense", nullptr},
                                     {"l2", "l1_directories", "access_history"},
                                     {"rows", nullptr, nullptr}};
  for (int role = 0; role < 3; ++role) {
    if (role_ranks[role] == 0) continue;
    rss[role_names[role]] = peak_rss[role];
    training_rss_json[role_names[role]] = training_rss[role];
    nlohmann::json parts = nlohmann::json::object();
    for (int k = 0; k < 3; ++k) {
      if (counted_names[role][k]) parts[counted_names[role][k]] = counted[role][k];
    }
    counted_json[role_names[role]] = parts;
  }
  const double row_payload = double(options.model.embedding_dim +
                                    model::make_sparse_optimizer(options.optim)->state_width(options.model.embedding_dim)) *
                             sizeof(float);
  summary["memory"] = {{"peak_rss_mib", rss},
                       {"peak_rss_training_mib", training_rss_json},
                       {"counted_mib", counted_json},
                       {"budgets_mib", {{"l1_per_trainer", options.store.mode == "tiered" ? options.store.l1_mb : 0.0},
                                        {"l2_per_producer", options.store.mode == "tiered" ? options.store.l2_mb : 0.0}}},
                       {"server_bytes_per_row", server_rows > 0 ? server_memory / server_rows : 0.0},
                       {"row_payload_bytes", row_payload}};
  if (tiered[kSharedHits] + tiered[kSharedMade] + tiered[kSharedBatchHits] + tiered[kSharedBatchesMade] > 0) {
    // Co-trained models: what the node's shared chunks saved this model's producers.
    const double reads = tiered[kSharedHits] + tiered[kSharedMade];  // chunk pieces a batch took
    summary["shared_ingest"] = {{"chunk_hits", tiered[kSharedHits]},
                                {"chunks_made", tiered[kSharedMade]},
                                {"making_wait_s", tiered[kSharedMakingWaitS]},
                                {"chunks_published", tiered[kSharedPublished]},
                                {"hit_rate", reads > 0 ? tiered[kSharedHits] / reads : 0.0},
                                {"samples_copied", tiered[kSharedSamplesCopied]},
                                {"wait_s", tiered[kSharedWaitS]},
                                {"batch_hits", tiered[kSharedBatchHits]},
                                {"batches_made", tiered[kSharedBatchesMade]},
                                {"batch_wait_s", tiered[kSharedBatchWaitS]}};
  }
  if (options.l2_pool_mb > 0 && options.store.mode == "tiered") {
    // Co-trained models sharing one L2 pool per node: where this model's share ended.
    summary["l2_pool"] = {{"pool_mb", options.l2_pool_mb},
                          {"min_mb", options.store.l2_min_mb},
                          {"max_mb", options.store.l2_max_mb > 0 ? options.store.l2_max_mb : options.l2_pool_mb},
                          {"final_grant_mb", tiered[kPoolGrantMb]},
                          {"changes", tiered[kPoolChanges]},
                          {"decisions_taken", tiered[kPoolDecisions]}};
  }
  if (options.store.min_count > 1) {
    summary["admission"] = {{"min_count", options.store.min_count},
                            {"keys_seen", tiered[kAdmissionSeen]},
                            {"keys_defaulted", tiered[kAdmissionDefaulted]}};
  }
  summary["link_model"] = comm::LinkModel::options().describe();
  summary["runtime"] = {{"device", options.runtime.device}, {"blas_threads", backend::host_blas_threads()}};
  if (options.store.mode == "tiered") {
    auto rate = [](double hits, double misses) { return hits + misses > 0 ? hits / (hits + misses) : 0.0; };
    summary["levels"] = {
        {"l1", {{"hits", tiered[kL1Hits]}, {"misses", tiered[kL1Misses]},
                {"hit_rate", rate(tiered[kL1Hits], tiered[kL1Misses])}, {"evictions", tiered[kL1Evictions]},
                {"capacity_rows", tiered[kL1CapacityRows]}, {"max_window_rows", tiered[kMaxWindowRows]}}},
        {"l2", {{"hits", tiered[kL2Hits]}, {"misses", tiered[kL2Misses]},
                {"hit_rate", rate(tiered[kL2Hits], tiered[kL2Misses])}, {"evictions", tiered[kL2Evictions]},
                {"write_backs", tiered[kL2WriteBacks]}, {"capacity_rows", tiered[kL2CapacityRows]},
                {"promotions", tiered[kL2Hits]},  // rows moved up from L2 into an L1 (L2 is exclusive)
                {"fallback_rows", tiered[kFallbackRows]}}},
        {"late_rounds", tiered[kLateRounds]},
        {"ps_fallback_step", tiered[kPsFallbackRound]},
    };
    summary["bytes"]["l3_to_l2"] = tiered[kBytesL3ToL2];
    summary["bytes"]["l2_to_l3"] = tiered[kBytesL2ToL3];
    summary["bytes_per_sample"]["l3_to_l2"] = tiered[kBytesL3ToL2] / samples;
    summary["time_s"]["producer_staging"] = tiered[kStagingS];
    summary["time_s"]["producer_staging_cpu"] = tiered[kStagingCpuS];
    summary["time_s"]["producer_write_back_wait"] = tiered[kWriteBackWaitS];
    summary["time_s"]["producer_l3_wait"] = tiered[kL3WaitS];
  }
  return summary;
}

}  // namespace

int run_train_job(const RunOptions& options, MPI_Comm world) {
  return run_train_job_with_result(options, world).exit_code;
}

void check_model_reads_data(const RunOptions& options) {
  const DataShape shape = data_shape(options.data);
  model::make_model(options.model, shape.num_dense, shape.num_tables, options.train.seed, shape.num_tasks);
}

// A stalled wait (runtime.stall_timeout_s) anywhere in the roles ends the
// process here with kExitStalled, after its one-line report.
TrainJobResult run_train_job_with_result(const RunOptions& options, MPI_Comm world) try {
  // The checks that need the data's shape and the model (a bottom MLP that does
  // not end in embedding_dim, a model that cannot read this data), on every
  // rank alike and before anything is written.
  try {
    backend::select_device(backend::parse_device(options.runtime.device));  // cuda: a CUDA build and a GPU
    check_model_reads_data(options);
    const int on_node = comm::ranks_on_node(world);
    if (backend::active_device() == backend::Device::kCuda && options.store.mode == "tiered") {
      int world_size = 1;
      MPI_Comm_size(world, &world_size);
      const int nodes = (world_size + on_node - 1) / std::max(on_node, 1);
      const int trainers_on_node = (options.layout.trainers + nodes - 1) / nodes;
      const std::string problem =
          backend::hbm_budget_problem(options.store.l1_mb, trainers_on_node, backend::gpu_free_bytes());
      if (!problem.empty()) {
        throw InputError(problem, "lower store.l1_mb (store.l2_mb in host memory takes the rest), or run fewer "
                                  "trainers per GPU");
      }
    }
    backend::configure_host_blas_threads(options.runtime.blas_threads, on_node);
  } catch (const Error& e) {
    int rank = 0;
    MPI_Comm_rank(world, &rank);
    if (rank == 0) std::fprintf(stderr, "strata: error: %s\n", e.what());
    return TrainJobResult{kExitBadInput, {}};
  }
  if (!claim_train_output_dir(options, world)) return TrainJobResult{2, {}};  // rank 0 said why (exit 2: bad input)
  TrainJobResult result;
  RankContext context = split_roles(options.layout, world);
  int process_rank = 0;  // in MPI_COMM_WORLD: a co-trained model's job numbers its ranks from 0
  MPI_Comm_rank(MPI_COMM_WORLD, &process_rank);
  init_logging(process_rank,
               options.model_name.empty() ? role_name(context.role) : options.model_name + " " + role_name(context.role),
               options.output.log_level);
  comm::LinkOptions links{options.links.network_gbps, options.links.network_latency_us, options.links.h2d_gbps,
                          options.links.h2d_latency_us};
  comm::LinkModel::configure(links);
  if (context.world_rank == 0 && links.enabled()) spdlog::info("link model ON: {}", links.describe());
  install_preemption_handlers();
  ResumePoint resume;
  try {
    resume = prepare_checkpoints(options, world);
  } catch (const Error& e) {
    // The same on every rank: one message, a clean exit with the usage code.
    if (context.world_rank == 0) std::fprintf(stderr, "strata: error: %s\n", e.what());
    MPI_Comm_free(&context.role_comm);
    result.exit_code = 2;
    return result;
  }
  if (resume.active()) {
    if (context.world_rank == 0 && (resume.header.trainers != options.layout.trainers ||
                                    resume.header.producers != options.layout.producers ||
                                    resume.header.servers != options.layout.servers)) {
      spdlog::info("resharding: the checkpoint was written by {}/{}/{} producers/trainers/servers, this run has "
                   "{}/{}/{}", resume.header.producers, resume.header.trainers, resume.header.servers,
                   options.layout.producers, options.layout.trainers, options.layout.servers);
    }
  }

  std::vector<double> teacher_auc;  // per task
  double teacher_hit_rate = -1;
  if (context.world_rank == 0) {
    spdlog::info("strata train: {} trainers, {} producers, {} servers; data {}; store {}", options.layout.trainers,
                 options.layout.producers, options.layout.servers, options.data.source, options.store.mode);
    if (options.data.source == "synthetic" && run_has_eval(options)) {
      const data::SyntheticDataset dataset(options.data);
      for (int t = 0; t < dataset.num_tasks(); ++t) {
        teacher_auc.push_back(dataset.teacher_auc(options.data.synthetic_eval_samples, t));
        spdlog::info("synthetic teacher AUC on the held-out stream{}: {:.4f} (the best reachable)",
                     dataset.num_tasks() > 1 ? fmt::format(", task {}", t) : std::string(), teacher_auc.back());
      }
    }
    if (options.data.source == "synthetic_sequences" && options.data.sequence_task == "next_item" &&
        run_has_eval(options)) {
      teacher_hit_rate =
          data::synthetic_sequence_teacher_hit_rate(options.data, options.data.sequence_eval_negatives);
      spdlog::info("synthetic teacher HR@10 on each user's last event: {:.4f} (the best reachable)", teacher_hit_rate);
    }
  }

  // Rank 0 may have computed the teacher's metric for a while: the others wait
  // politely, not spinning in the role set-up's collectives on its cores.
  comm::barrier(world);
  RankReport mine;
  mine.role = static_cast<int32_t>(context.role);
  mine.index = context.index;
  TrainerReport trainer_report;
  switch (context.role) {
    case Role::kTrainer: {
      trainer_report = run_trainer(options, context, resume);
      const TrainerReport& r = trainer_report;
      mine.train_cpu[0] = r.train_cpu.user, mine.train_cpu[1] = r.train_cpu.sys;
      mine.training_rss_mib = r.training_rss_mib;
      mine.counted_mib[0] = r.l1_bytes / 1048576.0;
      mine.counted_mib[1] = r.dense_bytes / 1048576.0;
      double* v = mine.values;
      v[kStallS] = r.stall_s, v[kPullWaitS] = r.pull_wait_s, v[kRowsPulled] = double(r.rows_pulled);
      v[kBytesPulled] = double(r.bytes_pulled), v[kRowsPushed] = double(r.rows_pushed);
      v[kBytesPushed] = double(r.bytes_pushed), v[kBytesRequested] = double(r.bytes_requested);
      v[kBytesBatches] = double(r.bytes_batches), v[kBytesAllreduce] = double(r.bytes_allreduce);
      v[kKeysTotal] = double(r.keys_total), v[kKeysUnique] = double(r.keys_unique);
      v[kKeysBatches] = double(r.keys_batches), v[kBytesExperts] = double(r.bytes_experts);
      v[kBytesSequence] = double(r.bytes_sequence);
      break;
    }
    case Role::kProducer: {
      ProducerReport r = run_producer(options, context, resume);
      double* v = mine.values;
      mine.train_cpu[0] = r.train_cpu.user, mine.train_cpu[1] = r.train_cpu.sys;
      v[kStagingCpuS] = r.staging_cpu_s;
      mine.counted_mib[0] = r.l2_bytes / 1048576.0;
      mine.counted_mib[1] = r.directory_bytes / 1048576.0;
      mine.counted_mib[2] = r.history_bytes / 1048576.0;
      v[kBatches] = double(r.batches), v[kSamples] = double(r.samples), v[kBytesSent] = double(r.bytes_sent);
      v[kBuildS] = r.build_s, v[kBlockedS] = r.blocked_s, v[kLines] = double(r.parse.lines);
      v[kMalformed] = double(r.parse.malformed);
      v[kL1Hits] = double(r.l1_hits), v[kL1Misses] = double(r.l1_misses), v[kL1Evictions] = double(r.l1_evictions);
      v[kL2Hits] = double(r.l2_hits), v[kL2Misses] = double(r.l2_misses), v[kL2Evictions] = double(r.l2_evictions);
      v[kL2WriteBacks] = double(r.l2_write_backs), v[kFallbackRows] = double(r.fallback_rows);
      v[kBytesL3ToL2] = double(r.bytes_l3_to_l2), v[kBytesL2ToL3] = double(r.bytes_l2_to_l3);
      v[kStagingS] = r.staging_s, v[kWriteBackWaitS] = r.write_back_wait_s, v[kL3WaitS] = r.l3_wait_s;
      v[kMaxWindowRows] = double(r.max_window_rows), v[kL1CapacityRows] = double(r.l1_capacity_rows);
      v[kL2CapacityRows] = double(r.l2_capacity_rows);
      v[kLateRounds] = double(r.late_rounds), v[kPsFallbackRound] = double(r.ps_fallback_round);
      v[kAdmissionSeen] = double(r.admission_keys_seen), v[kAdmissionDefaulted] = double(r.admission_keys_defaulted);
      v[kSharedHits] = double(r.shared.hits), v[kSharedMade] = double(r.shared.made);
      v[kSharedPublished] = double(r.shared.published), v[kSharedWaitS] = r.shared.wait_s;
      v[kSharedSamplesCopied] = double(r.shared.samples_copied), v[kSharedMakingWaitS] = r.shared.making_wait_s;
      v[kSharedBatchHits] = double(r.shared_batches.hits), v[kSharedBatchesMade] = double(r.shared_batches.made);
      v[kSharedBatchWaitS] = r.shared_batches.wait_s + r.shared_batches.making_wait_s;
      v[kPoolGrantMb] = r.l2_pool_grant_mb, v[kPoolChanges] = double(r.l2_pool_changes);
      v[kPoolDecisions] = double(r.l2_pool_decisions);
      if (r.parse.malformed > 0) {
        spdlog::warn("producer {}: skipped {} malformed of {} lines", context.index, r.parse.malformed, r.parse.lines);
      }
      break;
    }
    case Role::kServer: {
      ServerReport r = run_server(options, context, resume);
      mine.train_cpu[0] = r.train_cpu.user, mine.train_cpu[1] = r.train_cpu.sys;
      mine.values[kRounds] = double(r.rounds), mine.values[kRows] = double(r.rows);
      mine.values[kMemoryBytes] = double(r.memory_bytes);
      mine.training_rss_mib = r.training_rss_mib;
      mine.counted_mib[0] = double(r.memory_bytes) / 1048576.0;
      break;
    }
  }

  const CpuTimes run_cpu = process_cpu_times();
  mine.run_cpu[0] = run_cpu.user, mine.run_cpu[1] = run_cpu.sys;
  mine.peak_rss_mib = process_peak_rss_mib();
  // A producer has no end-of-run dump: its training peak is its peak.
  if (context.role == Role::kProducer) mine.training_rss_mib = mine.peak_rss_mib;
  // Gathered politely: the ranks done first wait for trainer 0's final dump.
  const std::vector<char> gathered = comm::gather_bytes(&mine, sizeof(RankReport), 0, world);
  std::vector<RankReport> reports(gathered.size() / sizeof(RankReport));
  if (!gathered.empty()) std::memcpy(reports.data(), gathered.data(), gathered.size());
  if (context.world_rank == 0) {
    nlohmann::json summary = build_summary(options, trainer_report, reports, teacher_auc);
    if (teacher_hit_rate >= 0) summary["teacher_hr_at_10"] = teacher_hit_rate;
    summary["preempted"] = trainer_report.preempted;
    summary["checkpoints"] = {{"written", trainer_report.checkpoints},
                              {"pause_s", trainer_report.checkpoint_pause_s},
                              {"resumed_from_step", trainer_report.resumed_from_step}};
    if (resume.active()) summary["checkpoints"]["resumed_from"] = resume.path;
    if (options.measure_after_steps > 0) {
      summary["measured_after_steps"] = options.measure_after_steps;
      summary["measured_samples_per_s"] = trainer_report.measured_samples_per_s;
    }
    io::write_summary(options.output.dir, summary);
    result.summary = summary;
    if (trainer_report.preempted) result.exit_code = kExitPreempted;
    if (trainer_report.eval_hit_rate >= 0) {
      spdlog::info("done: {} steps, {:.0f} samples/s, train loss {:.4f}, eval HR@10 {:.4f}, NDCG@10 {:.4f}, digest {}",
                   trainer_report.steps, trainer_report.samples_per_s, trainer_report.train_logloss,
                   trainer_report.eval_hit_rate, trainer_report.eval_ndcg, trainer_report.params_digest.substr(0, 16));
    } else {
      spdlog::info("done: {} steps, {:.0f} samples/s, train logloss {:.4f}, eval AUC {:.4f}, digest {}",
                   trainer_report.steps, trainer_report.samples_per_s, trainer_report.train_logloss,
                   trainer_report.eval_auc, trainer_report.params_digest.substr(0, 16));
    }
    spdlog::info("wrote {}/summary.json and metrics.jsonl", options.output.dir);
  }
  // Every rank exits with the same code (85 after a preemption checkpoint).
  int exit_code = context.world_rank == 0 ? result.exit_code : 0;  // codes are >= 0: MAX is rank 0's
  comm::allreduce(&exit_code, 1, MPI_INT, MPI_MAX, world, {}, comm::kFinishedPace);
  result.exit_code = exit_code;
  MPI_Comm_free(&context.role_comm);
  return result;
} catch (const StallError& e) {
  int world_rank = 0;
  MPI_Comm_rank(world, &world_rank);
  exit_stalled(e, world_rank);
}

}  // namespace strata::runtime
