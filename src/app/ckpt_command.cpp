// `strata ckpt info|digest|verify|config FILE`: reads a checkpoint serially with
// io::CheckpointReader and prints what it holds.
#include "app/ckpt_command.hpp"

#include <cstdio>
#include <string>

#include "common/error.hpp"
#include "io/checkpoint_file.hpp"

namespace strata {

const char* const kCkptUsage =
    "usage: strata ckpt info FILE      what a checkpoint holds: step, epoch, layout, store mode, shapes,\n"
    "                                  rows, dense size, producers' positions, file size\n"
    "       strata ckpt digest FILE    its params_digest (the summary.json value for the same state)\n"
    "       strata ckpt verify FILE    read every dataset and check every checksum\n"
    "       strata ckpt config FILE    the resolved deck of the run that wrote it (usable as --config)\n"
    "\n"
    "FILE is a checkpoint (ckpt-<step>.h5) in checkpoint.dir; docs/CHECKPOINT.md describes its layout.\n";

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "(";
  for (size_t d = 0; d < shape.size(); ++d) text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + ")";
}

std::string plural(int64_t count, const char* one, const char* many) {
  return std::to_string(count) + " " + (count == 1 ? one : many);
}

void print_info(const io::CheckpointReader& reader) {
  const io::CheckpointHeader& h = reader.header();
  const auto field = [](const char* name, const std::string& value) {
    std::printf("%-12s %s\n", name, value.c_str());
  };
  char mib[64];
  std::snprintf(mib, sizeof(mib), "%.1f MiB", double(reader.file_bytes()) / 1048576.0);
  field("file", reader.path() + " (" + std::to_string(reader.file_bytes()) + " bytes, " + mib + ")");
  field("format", "strata checkpoint version " + std::to_string(h.format_version) + ", written by strata " +
                      (h.strata_version.empty() ? std::string("?") : h.strata_version));
  char seconds[64];
  std::snprintf(seconds, sizeof(seconds), "%.2f s", h.train_seconds);
  field("step", std::to_string(h.step) + " completed; next: epoch " + std::to_string(h.epoch) + ", step " +
                    std::to_string(h.step_in_epoch) + " of it");
  field("samples", std::to_string(h.samples) + " (" + std::to_string(h.epoch_samples) + " in this epoch), " +
                       seconds + " of training");
  field("layout", plural(h.producers, "producer", "producers") + ", " + plural(h.trainers, "trainer", "trainers") +
                      ", " + plural(h.servers, "server", "servers") + "; store.mode = " + h.store_mode);
  field("model", std::to_string(h.num_dense) + " dense features, " + plural(h.num_tables, "table", "tables") +
                     ", embedding_dim " + std::to_string(h.embedding_dim) + ", row width " +
                     std::to_string(h.row_width) + " (" + std::to_string(h.row_width - h.embedding_dim) +
                     " sparse optimizer floats)");
  const std::vector<model::ParameterSlice> slices = reader.dense_slices();
  const int64_t dense = reader.num_dense_values();
  field("dense", plural(dense, "value", "values") + " in " + plural(int64_t(slices.size()), "slice", "slices") +
                     "; optimizer " + h.dense_optimizer + " after " + std::to_string(h.dense_optimizer_steps) +
                     " steps");
  for (const model::ParameterSlice& slice : slices) {
    std::printf("%-12s   %-28s %-16s at %zu\n", "", slice.name.c_str(), shape_text(slice.shape).c_str(),
                slice.offset);
  }
  field("sparse", plural(reader.num_rows(), "row", "rows") + "; optimizer " + h.sparse_optimizer);
  const io::TrainerState trainer = reader.trainer_state();
  char window[160];
  std::snprintf(window, sizeof(window), "open window: loss sum %.6g over %lld samples in %lld steps; last window loss %.6g",
                trainer.window_loss, static_cast<long long>(trainer.window_samples),
                static_cast<long long>(trainer.window_steps), trainer.last_window_loss);
  field("trainer", window);
  for (const io::ProducerState& p : reader.producers()) {
    char line[400];
    std::snprintf(line, sizeof(line),
                  "epoch %lld, round %lld; reader at offset %lld, line %lld; shard [%lld, %lld); %lld lines, "
                  "%lld samples, %lld malformed; admission: %llu keys seen, %llu defaulted",
                  static_cast<long long>(p.epoch), static_cast<long long>(p.round_in_epoch),
                  static_cast<long long>(p.byte_offset), static_cast<long long>(p.line),
                  static_cast<long long>(p.shard_begin), static_cast<long long>(p.shard_end),
                  static_cast<long long>(p.lines), static_cast<long long>(p.samples),
                  static_cast<long long>(p.malformed), static_cast<unsigned long long>(p.admission_seen),
                  static_cast<unsigned long long>(p.admission_defaulted));
    field(("producer " + std::to_string(p.producer)).c_str(), line);
  }
  field("admission", h.admission_counters > 0 ? "count-min sketch of 4 x " + std::to_string(h.admission_counters) +
                                                    " counters per producer"
                                              : std::string("none"));
  field("seeds", "train_seed " + std::to_string(h.train_seed) + ", data_seed " + std::to_string(h.data_seed) +
                     " (randomness is counter-based: no generator state)");
}

}  // namespace

int run_ckpt_command(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h" || args[0] == "help")) {
    std::printf("%s", kCkptUsage);
    return 0;
  }
  const std::string example = "e.g. strata ckpt info runs/ckpt/ckpt-0000000500.h5";
  if (args.size() != 2) {
    throw Error("strata ckpt takes a subcommand and one checkpoint file" +
                    (args.empty() ? std::string() : std::string(", not ") + std::to_string(args.size()) + " words"),
                example + "\n" + kCkptUsage);
  }
  const std::string& command = args[0];
  const std::string& path = args[1];
  if (command == "info") {
    print_info(io::CheckpointReader(MPI_COMM_SELF, path));
  } else if (command == "digest") {
    std::printf("%s\n", io::checkpoint_params_digest(path).c_str());
  } else if (command == "verify") {
    io::validate_checkpoint(path, io::ExpectedShape{}, /*verify_rows=*/true);
    std::printf("%s: complete; every dataset matches its checksum\n", path.c_str());
  } else if (command == "config") {
    std::printf("%s", io::CheckpointReader(MPI_COMM_SELF, path).header().config_ini.c_str());
  } else {
    throw Error("strata ckpt: unknown subcommand '" + command + "'", "use info, digest, verify or config\n" +
                                                                         std::string(kCkptUsage));
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace strata
