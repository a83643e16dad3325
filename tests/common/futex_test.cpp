// futex_wait / futex_wake_all: a waiter returns at once when the word has
// already moved on, is woken by a waker long before its timeout, and returns
// by itself when nobody wakes it.
#include "common/futex.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace strata {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(Futex, AWordThatMovedOnDoesNotSleep) {
  std::atomic<uint32_t> word{7};
  const auto start = std::chrono::steady_clock::now();
  futex_wait(word, 6, 10'000'000);  // expects 6, holds 7: no sleep of 10 s
  EXPECT_LT(seconds_since(start), 5.0);
}

TEST(Futex, AWakerEndsTheSleepBeforeItsTimeout) {
  std::atomic<uint32_t> word{0};
  std::atomic<bool> woken{false};
  std::thread waiter([&] {
    while (word.load() == 0) futex_wait(word, 0, 10'000'000);  // 10 s each
    woken = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto start = std::chrono::steady_clock::now();
  word.fetch_add(1);
  futex_wake_all(word);
  waiter.join();
  EXPECT_TRUE(woken);
  EXPECT_LT(seconds_since(start), 5.0);  // not the 10 s timeout
}

TEST(Futex, NobodyWakingMeansTheTimeoutEndsTheSleep) {
  std::atomic<uint32_t> word{3};
  const auto start = std::chrono::steady_clock::now();
  futex_wait(word, 3, 30'000);  // 30 ms
  const double waited = seconds_since(start);
  EXPECT_GE(waited, 0.025);  // it did sleep (no signal reaches this process)
  EXPECT_LT(waited, 5.0);
}

}  // namespace
}  // namespace strata
