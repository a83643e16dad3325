// The optuna tuner plugin: forwards ask/tell to tuner/strata_optuna.py, which
// drives an Optuna study kept in a file (journal or SQLite), so that searches
// continue across runs and across processes sharing the study.
//
// Settings: study (path; empty = in memory), sampler (tpe | random | cmaes), seed.
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <vector>

#include "optuna/embedded_python.hpp"
#include "strata/config.hpp"
#include "support/plugin_support.hpp"

// Set by plugins/CMakeLists.txt: share/strata/tuner relative to the installed plugin.
#ifndef STRATA_TUNER_INSTALLED_PYTHON_DIR
#define STRATA_TUNER_INSTALLED_PYTHON_DIR "../share/strata/tuner"
#endif

namespace {

using strata_plugin::GilScope;
using strata_plugin::PluginError;
using strata_plugin::PyRef;
namespace fs = std::filesystem;

const char* const kModule = "strata_optuna";

struct OptunaSession {
  strata_plugin::OwnedSpace space;
  PyObject* session = nullptr;  // a strata_optuna.TunerSession, owned
};

bool has_module(const fs::path& dir) {
  std::error_code error;
  return fs::is_regular_file(dir / (std::string(kModule) + ".py"), error);
}

// Where strata_optuna.py is: $STRATA_TUNER_PYTHON_DIR, an install's
// share/strata/tuner next to this plugin's lib folder, or the source tree.
std::string find_tuner_dir() {
  if (const char* env = std::getenv("STRATA_TUNER_PYTHON_DIR")) {
    if (!has_module(env)) {
      throw PluginError(std::string("STRATA_TUNER_PYTHON_DIR=") + env + " holds no " + kModule +
                        ".py\nfix: point it at strata's tuner/ folder, or unset it");
    }
    return env;
  }
  std::vector<fs::path> candidates;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&find_tuner_dir), &info) && info.dli_fname) {
    candidates.push_back(fs::path(info.dli_fname).parent_path() / STRATA_TUNER_INSTALLED_PYTHON_DIR);
  }
  candidates.push_back(fs::path(STRATA_SOURCE_DIR) / "tuner");
  std::string looked;
  for (const auto& dir : candidates) {
    if (has_module(dir)) return dir.lexically_normal().string();
    looked += (looked.empty() ? "" : ", ") + dir.lexically_normal().string();
  }
  throw PluginError(std::string("cannot find ") + kModule + ".py in " + looked +
                    "\nfix: set STRATA_TUNER_PYTHON_DIR to strata's tuner/ folder");
}

const char* type_name(strata_knob_type type) {
  switch (type) {
    case STRATA_KNOB_INTEGER: return "integer";
    case STRATA_KNOB_FLOAT: return "float";
    case STRATA_KNOB_CATEGORICAL: return "categorical";
  }
  return "?";
}

// [{"name", "type", "low", "high", "log", "candidates"}, ...] for TunerSession.
PyRef knob_list(const strata_plugin::OwnedSpace& space) {
  PyRef knobs(PyList_New(0));
  if (!knobs) throw PluginError(strata_plugin::take_python_error());
  for (const auto& knob : space.knobs) {
    PyRef candidates(PyList_New(0));
    for (const auto& candidate : knob.candidates) {
      PyRef text(PyUnicode_FromString(candidate.c_str()));
      if (!text || PyList_Append(candidates.get(), text.get()) != 0) {
        throw PluginError(strata_plugin::take_python_error());
      }
    }
    PyRef entry(Py_BuildValue("{s:s,s:s,s:d,s:d,s:O,s:O}", "name", knob.name.c_str(), "type", type_name(knob.type),
                              "low", knob.low, "high", knob.high, "log", knob.log_scale ? Py_True : Py_False,
                              "candidates", candidates.get()));
    if (!entry || PyList_Append(knobs.get(), entry.get()) != 0) throw PluginError(strata_plugin::take_python_error());
  }
  return knobs;
}

strata_tuner_session* optuna_create(const strata_search_space* space, const strata_setting* settings,
                                    size_t num_settings, char* error, size_t error_size) {
  try {
    auto session = std::make_unique<OptunaSession>();
    session->space = strata_plugin::copy_space(space);
    const std::string study = strata_plugin::setting(settings, num_settings, "study", "");
    const std::string sampler = strata_plugin::setting(settings, num_settings, "sampler", "tpe");
    const unsigned long long seed = strata_plugin::unsigned_setting(settings, num_settings, "seed", 0);
    strata_plugin::start_python(find_tuner_dir());

    GilScope gil;
    PyRef module(PyImport_ImportModule(kModule));
    if (!module) throw PluginError(strata_plugin::take_python_error());
    PyRef session_type(PyObject_GetAttrString(module.get(), "TunerSession"));
    if (!session_type) throw PluginError(strata_plugin::take_python_error());
    PyRef knobs = knob_list(session->space);
    const char* direction = session->space.direction == STRATA_MINIMIZE ? "minimize" : "maximize";
    session->session = PyObject_CallFunction(session_type.get(), "OssssK", knobs.get(),
                                             session->space.objective_name.c_str(), direction, study.c_str(),
                                             sampler.c_str(), seed);
    if (session->session == nullptr) throw PluginError(strata_plugin::take_python_error());
    return reinterpret_cast<strata_tuner_session*>(session.release());
  } catch (const std::exception& e) {
    strata_plugin::write_error(error, error_size, e.what());
    return nullptr;
  }
}

int optuna_ask(strata_tuner_session* handle, int64_t* trial_number, strata_knob_value* values, char* error,
               size_t error_size) {
  try {
    auto* session = reinterpret_cast<OptunaSession*>(handle);
    if (session == nullptr) throw PluginError("ask on a null session");
    GilScope gil;
    PyRef result(PyObject_CallMethod(session->session, "ask", nullptr));
    if (!result) throw PluginError(strata_plugin::take_python_error());
    if (result.get() == Py_None) return 0;
    long long number = 0;
    PyObject* proposed = nullptr;  // borrowed from result
    if (!PyArg_ParseTuple(result.get(), "LO", &number, &proposed)) {
      throw PluginError("strata_optuna.ask returned something else than (number, values): " +
                        strata_plugin::take_python_error());
    }
    PyRef sequence(PySequence_Fast(proposed, "values is not a sequence"));
    if (!sequence) throw PluginError(strata_plugin::take_python_error());
    const auto& knobs = session->space.knobs;
    if (size_t(PySequence_Fast_GET_SIZE(sequence.get())) != knobs.size()) {
      throw PluginError("strata_optuna.ask returned " + std::to_string(PySequence_Fast_GET_SIZE(sequence.get())) +
                        " values for " + std::to_string(knobs.size()) + " knobs");
    }
    for (size_t k = 0; k < knobs.size(); ++k) {
      PyObject* item = PySequence_Fast_GET_ITEM(sequence.get(), Py_ssize_t(k));  // borrowed
      values[k] = strata_knob_value{0, 0.0, 0};
      if (knobs[k].type == STRATA_KNOB_INTEGER) {
        values[k].integer = PyLong_AsLongLong(item);
        values[k].real = double(values[k].integer);
      } else if (knobs[k].type == STRATA_KNOB_FLOAT) {
        values[k].real = PyFloat_AsDouble(item);
      } else {
        values[k].category = PyLong_AsUnsignedLongLong(item);
      }
      if (PyErr_Occurred()) {
        throw PluginError("bad value for " + knobs[k].name + " from strata_optuna.ask: " +
                          strata_plugin::take_python_error());
      }
    }
    *trial_number = number;
    return 1;
  } catch (const std::exception& e) {
    strata_plugin::write_error(error, error_size, e.what());
    return -1;
  }
}

int optuna_tell(strata_tuner_session* handle, int64_t trial_number, strata_trial_state state, double objective,
                const char* reason, char* error, size_t error_size) {
  try {
    auto* session = reinterpret_cast<OptunaSession*>(handle);
    if (session == nullptr) throw PluginError("tell on a null session");
    const char* state_name = state == STRATA_TRIAL_COMPLETE ? "complete"
                             : state == STRATA_TRIAL_PRUNED ? "pruned"
                                                            : "failed";
    GilScope gil;
    PyRef result(PyObject_CallMethod(session->session, "tell", "Lsds", static_cast<long long>(trial_number),
                                     state_name, objective, reason ? reason : ""));
    if (!result) throw PluginError(strata_plugin::take_python_error());
    return 0;
  } catch (const std::exception& e) {
    strata_plugin::write_error(error, error_size, e.what());
    return -1;
  }
}

void optuna_destroy(strata_tuner_session* handle) {
  auto* session = reinterpret_cast<OptunaSession*>(handle);
  if (session == nullptr) return;
  if (session->session != nullptr) {
    GilScope gil;
    Py_DECREF(session->session);
  }
  delete session;
}

const strata_tuner_plugin kOptunaPlugin = {STRATA_TUNER_ABI_VERSION, "optuna", optuna_create, optuna_ask,
                                           optuna_tell, optuna_destroy};

}  // namespace

extern "C" __attribute__((visibility("default"))) const strata_tuner_plugin* strata_tuner_plugin_v1(void) {
  return &kOptunaPlugin;
}
