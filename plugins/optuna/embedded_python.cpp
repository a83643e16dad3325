// Starting the embedded interpreter (see embedded_python.hpp for why it is never stopped).
#include "optuna/embedded_python.hpp"

#include <dlfcn.h>

#include <mutex>

#include "strata/config.hpp"
#include "support/plugin_support.hpp"

namespace strata_plugin {

namespace {

// The engine dlopens plugins RTLD_LOCAL, so libpython's symbols would stay
// invisible to the extension modules Python loads later (_ctypes, numpy, ...),
// which Debian builds without linking libpython. Re-open libpython GLOBAL, and
// pin it and this plugin (NODELETE): an interpreter cannot be unloaded.
void make_python_symbols_global() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&Py_InitializeFromConfig), &info) && info.dli_fname) {
    dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD | RTLD_NODELETE);
  }
  if (dladdr(reinterpret_cast<void*>(&start_python), &info) && info.dli_fname) {
    dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  }
}

void check(PyStatus status, const char* step) {
  if (PyStatus_Exception(status)) {
    throw PluginError(std::string("cannot start the embedded Python (") + STRATA_PYTHON_EXECUTABLE + ") at " + step +
                      ": " + (status.err_msg ? status.err_msg : "unknown error") +
                      "\nfix: check that Debian's python3 is installed (apt-get install python3 python3-optuna)");
  }
}

void start_interpreter() {
  make_python_symbols_global();
  PyConfig config;
  PyConfig_InitIsolatedConfig(&config);  // ignores PYTHONPATH, PYTHONHOME, user site, cwd
  config.install_signal_handlers = 0;    // SIGINT and friends stay with the engine and MPI
  config.site_import = 0;                // no site.py: sys.path is set explicitly below
  config.write_bytecode = 0;             // leave no __pycache__ in the source tree
  config.parse_argv = 0;
  PyStatus status = PyConfig_SetBytesString(&config, &config.program_name, STRATA_PYTHON_EXECUTABLE);
  if (PyStatus_Exception(status)) PyConfig_Clear(&config);
  check(status, "program_name");
  status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  check(status, "initialisation");
  // Without site.py, sys.path is the standard library of program_name's prefix;
  // add Debian's dist-packages (python3-optuna and its dependencies) only.
  const char* setup =
      "import os, sys\n"
      "_dist = os.path.join(sys.prefix, 'lib', 'python3', 'dist-packages')\n"
      "if os.path.isdir(_dist) and _dist not in sys.path:\n"
      "    sys.path.append(_dist)\n"
      "del _dist\n";
  if (PyRun_SimpleString(setup) != 0) {
    throw PluginError("cannot set sys.path in the embedded Python");
  }
  PyEval_SaveThread();  // release the GIL; every call takes it through GilScope
}

// " (at FILE:LINE)" of the innermost frame, for errors that are not the user's.
std::string where_raised(PyObject* traceback) {
  if (traceback == nullptr) return "";
  PyRef innermost(Py_NewRef(traceback));
  while (true) {
    PyRef next(PyObject_GetAttrString(innermost.get(), "tb_next"));
    if (!next || next.get() == Py_None) break;
    innermost = std::move(next);
  }
  PyRef line(PyObject_GetAttrString(innermost.get(), "tb_lineno"));
  PyRef frame(PyObject_GetAttrString(innermost.get(), "tb_frame"));
  PyRef code(frame ? PyObject_GetAttrString(frame.get(), "f_code") : nullptr);
  PyRef file(code ? PyObject_GetAttrString(code.get(), "co_filename") : nullptr);
  std::string where;
  if (line && file && PyUnicode_Check(file.get())) {
    const char* name = PyUnicode_AsUTF8(file.get());
    if (name != nullptr) where = std::string(" (at ") + name + ":" + std::to_string(PyLong_AsLong(line.get())) + ")";
  }
  PyErr_Clear();
  return where;
}

}  // namespace

void start_python(const std::string& tuner_dir) {
  static std::once_flag started;
  std::call_once(started, [] {
    if (!Py_IsInitialized()) start_interpreter();
  });
  GilScope gil;
  PyObject* path = PySys_GetObject("path");  // borrowed
  PyRef dir(PyUnicode_FromString(tuner_dir.c_str()));
  if (path == nullptr || !dir) throw PluginError("cannot read sys.path of the embedded Python");
  const int present = PySequence_Contains(path, dir.get());
  if (present < 0 || (present == 0 && PyList_Append(path, dir.get()) != 0)) {
    throw PluginError("cannot extend sys.path: " + take_python_error());
  }
}

std::string take_python_error() {
  PyObject* type = nullptr;
  PyObject* value = nullptr;
  PyObject* traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  if (type == nullptr) return "unknown Python error";
  PyErr_NormalizeException(&type, &value, &traceback);
  PyRef owned_type(type), owned_value(value), owned_traceback(traceback);
  std::string type_name = reinterpret_cast<PyTypeObject*>(type)->tp_name;
  std::string message;
  if (value != nullptr) {
    PyRef text(PyObject_Str(value));
    if (text) {
      const char* utf8 = PyUnicode_AsUTF8(text.get());
      if (utf8 != nullptr) message = utf8;
    }
    PyErr_Clear();
  }
  const bool for_the_user = type_name.size() >= 10 && type_name.compare(type_name.size() - 10, 10, "TunerError") == 0;
  if (for_the_user) return message;
  return type_name + (message.empty() ? "" : ": " + message) + where_raised(traceback);
}

}  // namespace strata_plugin
