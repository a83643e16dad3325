// Waiting on a 32-bit word in memory that several processes map (a node's
// shared memory) without polling: the waiter sleeps in the kernel until a
// waker says the word changed, or until a timeout. On Linux this is a futex;
// elsewhere the wait is a plain sleep of the timeout, which is correct too,
// since every caller re-checks its condition and waits again.
#pragma once

#include <atomic>
#include <cstdint>

namespace strata {

// Sleeps while *word == expected, at most timeout_us (spurious returns happen;
// callers loop). The word must be a lock-free 32-bit atomic in shared memory.
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, int timeout_us);
// Wakes every process sleeping on `word`.
void futex_wake_all(std::atomic<uint32_t>& word);

}  // namespace strata
