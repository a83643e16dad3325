// A tuner plugin library (plugins/strata_tuner_plugin.h) loaded with dlopen, by
// short name or by path, with its entry symbol and ABI version checked.
#pragma once

#include <memory>
#include <string>
#include <vector>

// The C ABI's function table; only tuner_plugin.cpp and tuner.cpp include the header.
struct strata_tuner_plugin;

namespace strata {

class TunerPlugin {
 public:
  // `name_or_path`: a short name N (grid, random, optuna, ...), found as
  // libstrata_tuner_N.so in search_directories(), or a path to a plugin .so
  // (anything containing '/' or ending in .so). A missing file, a missing entry
  // symbol or another ABI version is a strata::Error naming the file and the fix.
  static TunerPlugin load(const std::string& name_or_path);

  // The file `name_or_path` resolves to; throws when there is none.
  static std::string locate(const std::string& name_or_path);

  // Where short names are looked for, in order: $STRATA_TUNER_PLUGIN_PATH
  // (colon-separated), the running executable's folder, its ../lib (an install),
  // and the build tree's lib folder.
  static std::vector<std::string> search_directories();

  const std::string& path() const { return path_; }
  std::string name() const;  // the plugin's own short name
  const strata_tuner_plugin& api() const { return *api_; }

 private:
  TunerPlugin(std::shared_ptr<void> library, const strata_tuner_plugin* api, std::string path)
      : library_(std::move(library)), api_(api), path_(std::move(path)) {}

  std::shared_ptr<void> library_;  // the dlopen handle; closed with the last copy
  const strata_tuner_plugin* api_ = nullptr;
  std::string path_;
};

}  // namespace strata
