#include "common/futex.hpp"

#include <chrono>
#include <climits>
#include <thread>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#endif

namespace strata {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free,
              "a futex word is a plain 32-bit word");

void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, int timeout_us) {
#if defined(__linux__)
  // Not FUTEX_PRIVATE: the word is shared between processes.
  timespec timeout{timeout_us / 1000000, static_cast<long>(timeout_us % 1000000) * 1000};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected, &timeout, nullptr, 0);
#else
  if (word.load(std::memory_order_acquire) == expected) {
    std::this_thread::sleep_for(std::chrono::microseconds(timeout_us));
  }
#endif
}

void futex_wake_all(std::atomic<uint32_t>& word) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
#else
  (void)word;
#endif
}

}  // namespace strata
