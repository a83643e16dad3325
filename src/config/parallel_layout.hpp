// ParallelLayout: how the trainers divide the work, dp x sp x ep = layout.trainers.
// dp replicas each train their own samples (dense gradients summed over them);
// sp shares the attention of sasrec/hstu (model/sequence_parallel.hpp) or din's activation unit
// (model/din_activation_unit.hpp) over its group; ep shards the
// experts of a mixture-of-experts model over its group. The row ownership of the
// embedding tables (model parallel) always spans every trainer.
#pragma once

#include "config/options.hpp"

namespace strata {

struct ParallelLayout {
  int dp = 1;  // data-parallel replicas
  int sp = 1;  // sequence-parallel degree
  int ep = 1;  // expert-parallel degree
};

// The layout the deck asks for, with layout.dp = 0 resolved to trainers / (sp * ep).
// strata::Error naming layout.dp, layout.sp, layout.ep and layout.trainers when
// the product does not equal the trainer count or a degree is below 1.
ParallelLayout resolve_parallel_layout(const LayoutOptions& layout);

}  // namespace strata
