// The CPython interpreter the optuna plugin embeds: started once per process
// (an interpreter cannot be restarted once numpy is loaded, so it is never
// finalised), isolated from the user's environment, with a sys.path of only the
// standard library, Debian's dist-packages and strata's tuner/ folder.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string>

namespace strata_plugin {

// Starts the interpreter if needed and puts `tuner_dir` on sys.path. Throws
// PluginError when Python cannot start. Returns with the GIL released.
void start_python(const std::string& tuner_dir);

// Holds the GIL for a scope; any thread may call into Python under one.
class GilScope {
 public:
  GilScope() : state_(PyGILState_Ensure()) {}
  ~GilScope() { PyGILState_Release(state_); }
  GilScope(const GilScope&) = delete;
  GilScope& operator=(const GilScope&) = delete;

 private:
  PyGILState_STATE state_;
};

// An owned reference (decref on scope exit). Use under a GilScope.
class PyRef {
 public:
  PyRef() = default;
  explicit PyRef(PyObject* object) : object_(object) {}
  ~PyRef() { Py_XDECREF(object_); }
  PyRef(PyRef&& other) noexcept : object_(other.object_) { other.object_ = nullptr; }
  PyRef& operator=(PyRef&& other) noexcept {
    std::swap(object_, other.object_);
    return *this;
  }
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;

  PyObject* get() const { return object_; }
  PyObject* release() {
    PyObject* object = object_;
    object_ = nullptr;
    return object;
  }
  explicit operator bool() const { return object_ != nullptr; }

 private:
  PyObject* object_ = nullptr;
};

// The pending Python exception as a message ("Type: message", or just the
// message for strata_optuna.TunerError, which is written for the user), and
// clears it. Use under a GilScope, right after a call returned NULL.
std::string take_python_error();

}  // namespace strata_plugin
