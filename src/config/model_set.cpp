#include "config/model_set.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <cctype>
#include <map>

#include "common/error.hpp"
#include "config/deck.hpp"

namespace strata {
namespace {

namespace fs = std::filesystem;

// The sections a model may set for itself; the rest (data, output, links,
// runtime, checkpoint, tune) belongs to the job and is shared.
const char* kModelSections[] = {"model", "optim", "train", "layout", "store"};

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.pop_back();
  const size_t first = s.find_first_not_of(" \t");
  return first == std::string::npos ? std::string() : s.substr(first);
}

std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string name = trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (!name.empty()) names.push_back(name);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return names;
}

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; });
}

// A key of a [model.NAME] section as a full deck key; throws naming the line.
std::string model_key(const std::string& key, const std::string& where) {
  const std::string full = key.find('.') == std::string::npos ? "model." + key : key;
  const std::vector<std::string> keys = deck_keys();
  if (std::find(keys.begin(), keys.end(), full) == keys.end()) {
    throw Error("unknown key '" + key + "'" + where + " (read as " + full + ")",
                "a bare key in [model.NAME] is a model key (kind, embedding_dim, ...); other sections' keys are "
                "written section.key (optim.sparse_lr); 'strata train --help' lists every key");
  }
  const std::string section = full.substr(0, full.find('.'));
  if (std::find(std::begin(kModelSections), std::end(kModelSections), section) == std::end(kModelSections)) {
    throw Error(full + where + " is shared by every model of the deck and cannot be set per model",
                "move it to the deck's [" + section + "] section; a model may set model.*, optim.*, train.*, "
                "layout.* and store.* keys");
  }
  return full;
}

struct DeckModels {
  std::vector<std::string> names;
  std::string shared_ingest, shared_ingest_mb, l2_pool_mb, share_tables;  // as written, with their lines
  int shared_ingest_line = 0, shared_ingest_mb_line = 0, l2_pool_mb_line = 0, share_tables_line = 0;
  std::map<std::string, DeckOverlay> sections;  // name -> its keys
};

DeckModels read_deck_models(const std::string& path) {
  DeckModels found;
  std::ifstream file(path);
  if (!file) return found;  // parse_run_options reports an unreadable deck
  std::string line, section;
  int number = 0, names_line = 0;
  std::map<std::string, int> section_lines;
  while (std::getline(file, line)) {
    ++number;
    const std::string text = trim(line);
    if (text.empty() || text[0] == '#' || text[0] == ';') continue;
    const std::string where = " in deck " + path + ", line " + std::to_string(number);
    if (text[0] == '[') {
      section = trim(text.substr(1, text.find(']') - 1));
      if (section.rfind("model.", 0) == 0) {
        const std::string name = section.substr(6);
        if (!valid_name(name)) {
          throw Error("bad model name '" + name + "' in section [" + section + "]" + where,
                      "model names are 1 to 64 letters, digits, '_' or '-'");
        }
        if (section_lines.count(name)) {
          throw Error("section [" + section + "] appears twice" + where + " (first at line " +
                          std::to_string(section_lines[name]) + ")",
                      "keep one [" + section + "] section");
        }
        section_lines[name] = number;
        found.sections[name];
      }
      continue;
    }
    const size_t equals = text.find('=');
    if (equals == std::string::npos) continue;  // parse_run_options names the bad line
    const std::string key = trim(text.substr(0, equals)), value = trim(text.substr(equals + 1));
    if (section == "models") {
      if (key == "shared_ingest") {
        found.shared_ingest = value, found.shared_ingest_line = number;
        continue;
      }
      if (key == "shared_ingest_mb") {
        found.shared_ingest_mb = value, found.shared_ingest_mb_line = number;
        continue;
      }
      if (key == "l2_pool_mb") {
        found.l2_pool_mb = value, found.l2_pool_mb_line = number;
        continue;
      }
      if (key == "share_tables") {
        found.share_tables = value, found.share_tables_line = number;
        continue;
      }
      if (key != "names") {
        throw Error("unknown key 'models." + key + "'" + where,
                    "[models] has the keys names = a,b,c, shared_ingest = true|false, shared_ingest_mb, l2_pool_mb and "
                    "share_tables = a,b; each "
                    "model's keys go in its [model.NAME] section (--models.only=NAME is given on the command line)");
      }
      found.names = split_names(value);
      names_line = number;
      if (found.names.empty()) {
        throw Error("models.names" + where + " lists no model",
                    "write names = a,b,... (one [model.NAME] section each, or none for the deck's own model), or "
                    "remove the [models] section");
      }
    } else if (section.rfind("model.", 0) == 0) {
      const std::string name = section.substr(6);
      found.sections[name].entries.push_back({model_key(key, where), value, number});
    }
  }
  std::map<std::string, int> seen;
  for (const std::string& name : found.names) {
    const std::string where = " in deck " + path + ", line " + std::to_string(names_line);
    if (!valid_name(name)) {
      throw Error("bad model name '" + name + "' in models.names" + where,
                  "model names are 1 to 64 letters, digits, '_' or '-', separated by commas");
    }
    if (seen[name]++) throw Error("model '" + name + "' is listed twice in models.names" + where, "list each model once");
  }
  for (const auto& [name, line_number] : section_lines) {
    if (!seen.count(name)) {
      throw Error("section [model." + name + "] in deck " + path + ", line " + std::to_string(line_number) +
                      " is for a model that [models] names does not list",
                  found.names.empty() ? "add [models] names = " + name + ",... to co-train models, or remove the section"
                                      : "add " + name + " to models.names, or remove the section");
    }
  }
  return found;
}

std::string config_path(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config" && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind("--config=", 0) == 0) return args[i].substr(9);
  }
  return {};
}

// [models] shared_ingest and shared_ingest_mb, the command line winning over the deck.
void read_shared_ingest(const DeckModels& deck, const std::string& path, const std::string& ingest_arg,
                        const std::string& mb_arg, ModelSet& set) {
  const bool from_line = ingest_arg.empty();
  const std::string ingest = from_line ? deck.shared_ingest : ingest_arg;
  const std::string where = from_line ? " in deck " + path + ", line " + std::to_string(deck.shared_ingest_line)
                                      : " on the command line";
  if (ingest == "true" || ingest == "1" || ingest == "yes") {
    set.shared_ingest = true;
  } else if (ingest == "false" || ingest == "0" || ingest == "no") {
    set.shared_ingest = false;
  } else if (!ingest.empty()) {
    throw Error("models.shared_ingest = '" + ingest + "'" + where + " is not true or false",
                "write models.shared_ingest = true (the models' producers make each sample once) or false");
  }
  const bool mb_from_line = mb_arg.empty();
  const std::string mb = mb_from_line ? deck.shared_ingest_mb : mb_arg;
  if (mb.empty()) return;
  const std::string mb_where = mb_from_line
                                   ? " in deck " + path + ", line " + std::to_string(deck.shared_ingest_mb_line)
                                   : " on the command line";
  char* end = nullptr;
  const double value = std::strtod(mb.c_str(), &end);
  if (end == mb.c_str() || *end != '\0' || !(value >= 1) || value > 65536) {
    throw Error("models.shared_ingest_mb = '" + mb + "'" + mb_where + " is not a size from 1 to 65536 MiB",
                "give the shared memory per node for the models' common samples in MiB, e.g. 64");
  }
  set.shared_ingest_mb = value;
}

void read_l2_pool(const DeckModels& deck, const std::string& path, const std::string& arg, ModelSet& set) {
  const std::string text = arg.empty() ? deck.l2_pool_mb : arg;
  if (text.empty()) return;
  const std::string where =
      arg.empty() ? " in deck " + path + ", line " + std::to_string(deck.l2_pool_mb_line) : " on the command line";
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(value >= 0) || value > 1048576) {
    throw Error("models.l2_pool_mb = '" + text + "'" + where + " is not a size in MiB",
                "give the host memory per node that the tiered models' L2 tiers share, e.g. 512 (0 = each its own "
                "store.l2_mb)");
  }
  set.l2_pool_mb = value;
}

// store.l2_min_mb / l2_max_mb mean something only inside a shared pool.
void check_pool_keys(const ModelSet& set) {
  if (set.l2_pool_mb > 0) {
    double floors = 0;
    for (const NamedModel& model : set.models) {
      if (model.options.autotune.online && model.options.store.mode == "tiered") {
        throw Error("model '" + model.name + "' sets autotune.online, which moves its own L2 budget, inside the "
                        "shared L2 pool (models.l2_pool_mb), which moves it between the models",
                    "use one of the two: drop autotune.online for this model, or models.l2_pool_mb");
      }
      if (model.options.store.mode == "tiered") floors += model.options.store.l2_min_mb * model.options.layout.producers;
    }
    if (floors > set.l2_pool_mb) {
      throw Error("the models' store.l2_min_mb (times their producers) add up to " + std::to_string(floors) +
                      " MiB, more than models.l2_pool_mb = " + std::to_string(set.l2_pool_mb),
                  "raise models.l2_pool_mb or lower the floors");
    }
    return;
  }
  for (const NamedModel& model : set.models) {
    if (model.options.store.l2_min_mb > 0 || model.options.store.l2_max_mb > 0) {
      throw Error(std::string(model.name.empty() ? "the deck" : "model '" + model.name + "'") +
                      " sets store.l2_min_mb or store.l2_max_mb, which bound a share of a shared L2 pool, but there "
                      "is none",
                  "co-train models with [models] l2_pool_mb = N, or set store.l2_mb (this producer's own L2)");
    }
  }
}

// [models] share_tables: which models train one set of tables, and whether they can.
void read_share_tables(const DeckModels& deck, const std::string& path, const std::string& arg, ModelSet& set) {
  const std::string text = arg.empty() ? deck.share_tables : arg;
  if (text.empty()) return;
  const std::string where =
      arg.empty() ? " in deck " + path + ", line " + std::to_string(deck.share_tables_line) : " on the command line";
  const std::vector<std::string> names = split_names(text);
  std::string listed;
  for (const auto& name : deck.names) listed += (listed.empty() ? "" : ", ") + name;
  if (names.size() < 2) {
    throw Error("models.share_tables = '" + text + "'" + where + " names fewer than two models",
                "list the models that train one set of tables, e.g. share_tables = " +
                    (deck.names.size() >= 2 ? deck.names[0] + ", " + deck.names[1] : std::string("a, b")));
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (std::find(deck.names.begin(), deck.names.end(), names[i]) == deck.names.end()) {
      throw Error("models.share_tables" + where + " names '" + names[i] + "', which models.names does not list",
                  "the deck's models: " + listed);
    }
    if (std::find(names.begin(), names.begin() + i, names[i]) != names.begin() + i) {
      throw Error("models.share_tables" + where + " names '" + names[i] + "' twice", "name each model once");
    }
  }
  // --models.only trains one model alone: it has its tables to itself.
  if (!set.only.empty()) return;
  const NamedModel* owner = nullptr;
  for (const std::string& name : names) {
    const NamedModel& model = *std::find_if(set.models.begin(), set.models.end(),
                                            [&](const NamedModel& m) { return m.name == name; });
    const RunOptions& o = model.options;
    const std::string who = "model '" + name + "' in models.share_tables" + where;
    if (o.store.mode != "ps") {
      throw Error(who + " has store.mode = " + o.store.mode +
                      ": shared tables are served by the first model's servers to every sharing model in step, and "
                      "a tiered model's L1 and L2 would hold copies of shared rows that the other models change",
                  "set store.mode = ps for every model in models.share_tables");
    }
    if (owner == nullptr) {
      owner = &model;
      continue;
    }
    const RunOptions& first = owner->options;
    // The servers take one request of every sharing trainer per round: the
    // models must make the same rounds, and the rows have one optimizer and one width.
    const std::pair<const char*, bool> same[] = {
        {"layout.trainers", o.layout.trainers == first.layout.trainers},
        {"layout.producers", o.layout.producers == first.layout.producers},  // they split the held-out data
        {"train.batch_size", o.train.batch_size == first.train.batch_size},
        {"train.steps", o.train.steps == first.train.steps},
        {"train.epochs", o.train.epochs == first.train.epochs},
        {"train.eval", o.train.eval == first.train.eval},
        {"train.eval_batch_size", o.train.eval_batch_size == first.train.eval_batch_size},
        {"model.embedding_dim", o.model.embedding_dim == first.model.embedding_dim},
        {"model.row_init_scale", o.model.row_init_scale == first.model.row_init_scale},
        {"optim.sparse", o.optim.sparse == first.optim.sparse},
        {"optim.sparse_lr", o.optim.sparse_lr == first.optim.sparse_lr},
        {"optim.adagrad_init", o.optim.adagrad_init == first.optim.adagrad_init},
        {"optim.eps", o.optim.eps == first.optim.eps},
        {"optim.beta1", o.optim.beta1 == first.optim.beta1},
        {"optim.beta2", o.optim.beta2 == first.optim.beta2},
        {"layout.sp", o.layout.sp == first.layout.sp},
        {"layout.ep", o.layout.ep == first.layout.ep},
    };
    for (const auto& [key, equal] : same) {
      if (!equal) {
        throw Error(who + " sets " + key + " unlike '" + owner->name +
                        "': models that share tables step together through one set of servers and one sparse "
                        "optimizer",
                    std::string("give every model in models.share_tables the same ") + key +
                        " (layout.trainers and producers, train.*, model.embedding_dim and the sparse optimizer's keys)");
      }
    }
  }
  set.share_tables = names;
}

}  // namespace

ModelSet parse_model_set(const std::vector<std::string>& raw_args) {
  ModelSet set;
  // --models.only and --model.NAME.KEY=VALUE are this file's; the rest is parse_run_options's.
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> model_args;  // "--model.NAME.KEY=VALUE"
  std::string shared_ingest_arg, shared_ingest_mb_arg, l2_pool_arg, share_tables_arg;
  for (size_t i = 0; i < raw_args.size(); ++i) {
    const std::string& arg = raw_args[i];
    if (arg == "--models.only" && i + 1 < raw_args.size()) {
      set.only = raw_args[++i];
    } else if (arg.rfind("--models.only=", 0) == 0) {
      set.only = arg.substr(14);
    } else if (arg.rfind("--models.shared_ingest=", 0) == 0) {
      shared_ingest_arg = arg.substr(23);
    } else if (arg.rfind("--models.shared_ingest_mb=", 0) == 0) {
      shared_ingest_mb_arg = arg.substr(26);
    } else if (arg.rfind("--models.l2_pool_mb=", 0) == 0) {
      l2_pool_arg = arg.substr(20);
    } else if (arg.rfind("--models.share_tables=", 0) == 0) {
      share_tables_arg = arg.substr(22);
    } else {
      args.push_back(arg);
    }
  }
  const std::string path = config_path(args);
  DeckModels deck = path.empty() || !fs::is_regular_file(path) ? DeckModels{} : read_deck_models(path);
  set.names = deck.names;
  read_shared_ingest(deck, path, shared_ingest_arg, shared_ingest_mb_arg, set);
  read_l2_pool(deck, path, l2_pool_arg, set);
  // Per-model command-line keys: --model.NAME.KEY=VALUE for a NAME the deck lists.
  std::vector<std::string> shared_args;
  for (const std::string& arg : args) {
    bool mine = false;
    for (const std::string& name : deck.names) {
      const std::string prefix = "--model." + name + ".";
      if (arg.rfind(prefix, 0) != 0) continue;
      const size_t equals = arg.find('=');
      if (equals == std::string::npos) {
        throw Error("'" + arg + "' has no value", "write --model." + name + ".KEY=VALUE");
      }
      const std::string key = model_key(arg.substr(prefix.size(), equals - prefix.size()), " on the command line");
      model_args.push_back({name, "--" + key + arg.substr(equals)});
      mine = true;
    }
    if (!mine) shared_args.push_back(arg);
  }
  if (deck.names.empty()) {
    if (!set.only.empty()) {
      throw Error("--models.only=" + set.only + " but the deck lists no models",
                  "drop --models.only, or list the models in the deck: [models] names = a,b with a [model.NAME] "
                  "section each");
    }
    set.models.push_back({"", parse_run_options(args)});
    set.output_dir = set.models.front().options.output.dir;
    if (!share_tables_arg.empty() || !deck.share_tables.empty()) {
      throw Error("models.share_tables is set but the deck lists no models",
                  "shared tables are for co-trained models: list them with [models] names = a,b");
    }
    if (set.l2_pool_mb > 0) {
      throw Error("models.l2_pool_mb is set but the deck lists no models",
                  "a shared L2 pool is for co-trained models: list them with [models] names = a,b");
    }
    check_pool_keys(set);
    return set;
  }
  if (!set.only.empty() && std::find(deck.names.begin(), deck.names.end(), set.only) == deck.names.end()) {
    std::string list;
    for (const auto& name : deck.names) list += (list.empty() ? "" : ", ") + name;
    throw Error("--models.only=" + set.only + ": the deck lists no model of that name", "the deck's models: " + list);
  }
  for (const std::string& name : deck.names) {
    if (!set.only.empty() && name != set.only) continue;
    std::vector<std::string> model_words;
    for (const auto& [owner, word] : model_args) {
      if (owner == name) model_words.push_back(word);
    }
    // A shared command-line key this model sets for itself is the model's.
    for (size_t i = 0; i < shared_args.size(); ++i) {
      const std::string& word = shared_args[i];
      bool overridden = false;
      for (const auto& [owner, mine] : model_args) {
        const std::string key = mine.substr(0, mine.find('='));  // "--optim.sparse_lr"
        if (owner != name) continue;
        if (word.rfind(key + "=", 0) == 0) overridden = true;
        if (word == key) overridden = true, ++i;  // "--key value": skip the value too
      }
      if (!overridden) model_words.push_back(word);
    }
    RunOptions options;
    try {
      options = parse_run_options(model_words, &deck.sections[name]);
    } catch (const Error& e) {
      throw Error("model '" + name + "': " + e.what_failed(), e.how_to_fix());
    }
    if (set.output_dir.empty()) set.output_dir = options.output.dir;
    options.output.dir = (fs::path(set.output_dir) / name).string();
    if (!options.checkpoint.dir.empty()) options.checkpoint.dir = (fs::path(options.checkpoint.dir) / name).string();
    if (!options.checkpoint.resume.empty() && options.checkpoint.resume != "latest" && !set.only.empty() &&
        !fs::is_directory(options.checkpoint.resume)) {
      // One model of the deck (--models.only) may resume from a file of its own.
    } else if (!options.checkpoint.resume.empty() && options.checkpoint.resume != "latest") {
      if (!fs::is_directory(options.checkpoint.resume)) {
        throw Error("checkpoint.resume = '" + options.checkpoint.resume +
                        "': a co-training job resumes each model from its own folder of checkpoints",
                    "give --resume=latest, or the checkpoint.dir the job wrote (each model resumes from DIR/NAME), or "
                    "resume one model from a file with --models.only=NAME");
      }
      options.checkpoint.resume = (fs::path(options.checkpoint.resume) / name).string();
    }
    set.models.push_back({name, std::move(options)});
  }
  check_pool_keys(set);
  read_share_tables(deck, path, share_tables_arg, set);
  return set;
}

int model_set_world_size(const ModelSet& set) {
  int ranks = 0;
  for (const auto& model : set.models) {
    ranks += model.options.layout.trainers + model.options.layout.producers + model.options.layout.servers;
  }
  return ranks;
}

}  // namespace strata
