// strata::Error: the one error type of the engine. It carries what failed and
// how to fix it, so that rank 0 can print one actionable message and exit non-zero.
#pragma once

#include <stdexcept>
#include <string>

namespace strata {

class Error : public std::runtime_error {
 public:
  Error(std::string what_failed, std::string how_to_fix = {})
      : std::runtime_error(compose(what_failed, how_to_fix)),
        what_failed_(std::move(what_failed)),
        how_to_fix_(std::move(how_to_fix)) {}

  const std::string& what_failed() const { return what_failed_; }
  const std::string& how_to_fix() const { return how_to_fix_; }

 private:
  static std::string compose(const std::string& what, const std::string& fix) {
    return fix.empty() ? what : what + "\n  fix: " + fix;
  }
  std::string what_failed_;
  std::string how_to_fix_;
};

// Bad input found while the job runs (a data file's line, a batch the model
// cannot take, a budget too small for the prefetch window): the job ends with
// kExitBadInput on every rank, like a bad deck found before it starts.
class InputError : public Error {
 public:
  using Error::Error;
};

// Runs f, for which every strata::Error means bad input (a data reader, a
// model's checks of a batch): such an error is rethrown as an InputError.
template <class F>
decltype(auto) as_input_errors(F&& f) {
  try {
    return f();
  } catch (const InputError&) {
    throw;
  } catch (const Error& e) {
    throw InputError(e.what_failed(), e.how_to_fix());
  }
}

}  // namespace strata
