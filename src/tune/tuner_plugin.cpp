// Locating and loading tuner plugins.
#include "tune/tuner_plugin.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>

#include "common/error.hpp"
#include "strata/config.hpp"
#include "strata_tuner_plugin.h"

// Set by src/tune/CMakeLists.txt for this file only.
#ifndef STRATA_TUNER_BUILD_PLUGIN_DIR
#define STRATA_TUNER_BUILD_PLUGIN_DIR ""
#endif
#ifndef STRATA_TUNER_INSTALL_LIBDIR
#define STRATA_TUNER_INSTALL_LIBDIR "lib"
#endif

namespace fs = std::filesystem;

namespace strata {

namespace {

const char* const kBuiltIn = "grid | random | optuna";

bool looks_like_path(const std::string& text) {
  return text.find('/') != std::string::npos ||
         (text.size() > 3 && text.compare(text.size() - 3, 3, ".so") == 0);
}

bool valid_short_name(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  }
  return true;
}

std::string executable_directory() {
  std::error_code error;
  const fs::path exe = fs::read_symlink("/proc/self/exe", error);
  return error ? std::string() : exe.parent_path().string();
}

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

std::string not_found_fix(const std::string& name, const std::string& file) {
  if (name == "optuna" && !STRATA_HAVE_PYTHON) {
    return "this strata was built without embedded Python: install python3-dev and python3-optuna "
           "(scripts/deps.sh), reconfigure with -DSTRATA_ENABLE_PYTHON=ON and rebuild; or use grid or random";
  }
  if (name == "grid" || name == "random" || name == "optuna") {
    return "build the plugin (cmake --build BUILD --target strata_tuner_" + name +
           ") or point STRATA_TUNER_PLUGIN_PATH at the folder holding " + file;
  }
  return std::string("tune.plugin takes ") + kBuiltIn + " or the path of a plugin .so; or put " + file +
         " into STRATA_TUNER_PLUGIN_PATH";
}

}  // namespace

std::vector<std::string> TunerPlugin::search_directories() {
  std::vector<std::string> dirs;
  auto add = [&dirs](const std::string& dir) {
    if (dir.empty()) return;
    const std::string normal = fs::path(dir).lexically_normal().string();
    for (const auto& seen : dirs) {
      if (seen == normal) return;
    }
    dirs.push_back(normal);
  };
  if (const char* env = std::getenv("STRATA_TUNER_PLUGIN_PATH")) {
    const std::string paths = env;
    std::string::size_type start = 0;
    while (start <= paths.size()) {
      const auto colon = paths.find(':', start);
      add(paths.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  }
  const std::string exe_dir = executable_directory();
  if (!exe_dir.empty()) {
    add(exe_dir);
    add(exe_dir + "/../lib");
    add(exe_dir + "/../" STRATA_TUNER_INSTALL_LIBDIR);
  }
  add(STRATA_TUNER_BUILD_PLUGIN_DIR);
  return dirs;
}

std::string TunerPlugin::locate(const std::string& name_or_path) {
  if (looks_like_path(name_or_path)) {
    std::error_code error;
    if (!fs::is_regular_file(name_or_path, error)) {
      throw Error("tuner plugin file '" + name_or_path + "' " +
                      (fs::exists(name_or_path, error) ? "is not a regular file" : "does not exist"),
                  std::string("set tune.plugin to the path of a plugin .so, or to ") + kBuiltIn);
    }
    return fs::absolute(name_or_path).lexically_normal().string();
  }
  if (!valid_short_name(name_or_path)) {
    throw Error("bad value '" + name_or_path + "' for tune.plugin",
                std::string("tune.plugin takes ") + kBuiltIn + " or the path of a plugin .so");
  }
  const std::string file = "libstrata_tuner_" + name_or_path + ".so";
  const auto dirs = search_directories();
  for (const auto& dir : dirs) {
    std::error_code error;
    const fs::path candidate = fs::path(dir) / file;
    if (fs::is_regular_file(candidate, error)) return candidate.string();
  }
  throw Error("tuner plugin '" + name_or_path + "' not found: no " + file + " in " + join(dirs, ", "),
              not_found_fix(name_or_path, file));
}

TunerPlugin TunerPlugin::load(const std::string& name_or_path) {
  const std::string path = locate(name_or_path);
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    throw Error("cannot load tuner plugin " + path + ": " + (why ? why : "unknown dlopen error"),
                "check that it is a shared library for this machine whose dependencies resolve (ldd " + path + ")");
  }
  std::shared_ptr<void> library(handle, [](void* h) { dlclose(h); });

  dlerror();
  void* symbol = dlsym(handle, STRATA_TUNER_PLUGIN_ENTRY);
  if (symbol == nullptr) {
    throw Error("tuner plugin " + path + " does not export " STRATA_TUNER_PLUGIN_ENTRY,
                "a plugin exports `const strata_tuner_plugin* " STRATA_TUNER_PLUGIN_ENTRY
                "(void)` with C linkage (see plugins/strata_tuner_plugin.h); one built for another "
                "ABI version exports another symbol: rebuild it against this strata");
  }
  auto entry = reinterpret_cast<strata_tuner_plugin_entry_fn>(symbol);
  const strata_tuner_plugin* api = entry();
  if (api == nullptr) {
    throw Error("tuner plugin " + path + ": " STRATA_TUNER_PLUGIN_ENTRY "() returned NULL",
                "the entry function must return a pointer to a static strata_tuner_plugin");
  }
  if (api->abi_version != STRATA_TUNER_ABI_VERSION) {
    throw Error("tuner plugin " + path + " was built for tuner ABI version " + std::to_string(api->abi_version) +
                    ", this strata speaks version " + std::to_string(STRATA_TUNER_ABI_VERSION),
                "rebuild the plugin against this strata's plugins/strata_tuner_plugin.h");
  }
  if (!api->create || !api->ask || !api->tell || !api->destroy) {
    throw Error("tuner plugin " + path + " leaves create, ask, tell or destroy NULL",
                "a plugin fills every function pointer of strata_tuner_plugin");
  }
  return TunerPlugin(std::move(library), api, path);
}

std::string TunerPlugin::name() const { return api_->name ? api_->name : fs::path(path_).stem().string(); }

}  // namespace strata
