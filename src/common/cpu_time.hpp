// CPU time of this process (user and system, from getrusage) and of the
// calling thread, for the per-role CPU accounting in summary.json, and its peak
// resident memory.
#pragma once

#include <sys/resource.h>

#include <ctime>

namespace strata {

struct CpuTimes {
  double user = 0;
  double sys = 0;
  double total() const { return user + sys; }
  CpuTimes operator-(const CpuTimes& o) const { return {user - o.user, sys - o.sys}; }
};

inline CpuTimes process_cpu_times() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return {double(usage.ru_utime.tv_sec) + 1e-6 * double(usage.ru_utime.tv_usec),
          double(usage.ru_stime.tv_sec) + 1e-6 * double(usage.ru_stime.tv_usec)};
}

// This process's peak resident set so far (getrusage: KiB on Linux), in MiB.
inline double process_peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;
}

inline double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

}  // namespace strata
