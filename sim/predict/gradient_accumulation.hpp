// Gradient accumulation as a what-if: the requests a training job makes when each optimizer step
// follows k forward and backward passes over micro-batches, from its trace at the micro-batch
// size (recorded, or predicted by SizeSweep) and that trace's step structure (the optimizer's
// record_function annotations).
#pragma once

#include "sim/trace/trace.hpp"

namespace allocsim {

// Each step's requests before the optimizer's step (the forward and backward pass) run k times:
// the first as recorded; in each later one the gradients, which the first pass left allocated
// for the optimizer, are accumulated into those (each new gradient freed as soon as it is
// allocated), and the blocks of the passes before it are not freed again. The optimizer step and
// zero_grad follow once. The gradients are told by their lifetimes: allocated before the
// optimizer step begins, freed after it (or never).
//
// Throws InputError where the trace has no optimizer annotations (Optimizer.step START and
// zero_grad END), or k is not 1 to 64.
[[nodiscard]] Trace accumulate_gradients(const Trace& micro_batch, int k);

}  // namespace allocsim
