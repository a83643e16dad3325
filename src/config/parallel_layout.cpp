#include "config/parallel_layout.hpp"

#include <string>

#include "common/error.hpp"

namespace strata {

ParallelLayout resolve_parallel_layout(const LayoutOptions& layout) {
  const std::string values = "layout.dp = " + std::to_string(layout.dp) + ", layout.sp = " +
                             std::to_string(layout.sp) + ", layout.ep = " + std::to_string(layout.ep) +
                             " over layout.trainers = " + std::to_string(layout.trainers);
  if (layout.sp < 1 || layout.ep < 1 || layout.dp < 0) {
    throw Error("bad parallel layout: " + values,
                "layout.sp and layout.ep must be >= 1, layout.dp >= 1 (or 0: trainers / (sp x ep))");
  }
  ParallelLayout resolved{layout.dp, layout.sp, layout.ep};
  const long long inner = static_cast<long long>(layout.sp) * layout.ep;
  if (resolved.dp == 0) {
    if (layout.trainers % inner != 0) {
      throw Error("bad parallel layout: " + values + ": sp x ep = " + std::to_string(inner) +
                      " does not divide the trainer count",
                  "choose layout.sp and layout.ep whose product divides layout.trainers, or change layout.trainers");
    }
    resolved.dp = static_cast<int>(layout.trainers / inner);
  }
  if (resolved.dp * inner != layout.trainers) {
    throw Error("bad parallel layout: " + values + ": dp x sp x ep = " + std::to_string(resolved.dp * inner) +
                    " is not the trainer count",
                "make layout.dp x layout.sp x layout.ep equal layout.trainers (" + std::to_string(layout.trainers) +
                    "), or leave layout.dp = 0 to take trainers / (sp x ep)");
  }
  return resolved;
}

}  // namespace strata
