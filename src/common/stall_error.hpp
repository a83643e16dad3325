// strata::StallError: a wait saw no progress for runtime.stall_timeout_s (see
// comm/stall_watchdog.hpp). It names the rank that waited and what it waited
// for; the job then ends with kExitStalled rather than hanging for ever.
#pragma once

#include "common/error.hpp"

namespace strata {

class StallError : public Error {
 public:
  StallError(std::string what_failed, std::string how_to_fix, double waited_s)
      : Error(std::move(what_failed), std::move(how_to_fix)), waited_s_(waited_s) {}

  double waited_s() const { return waited_s_; }

 private:
  double waited_s_;
};

}  // namespace strata
