// Capture marks: a recorder may name, in each trace entry's user_metadata, the private pool of
// the CUDA graph being captured, which a PyTorch trace does not record otherwise. While a capture
// is underway it sets the metadata to "cuda_graph_pool=A,B" (the pool's id: a handle made before
// the capture, as CUDAGraph.pool() answers only after it), and back to "" when it ends:
//
//   pool = torch.cuda.graph_pool_handle()
//   with torch.cuda.graph(g, pool=pool):
//       torch.cuda.memory._set_memory_metadata(f"cuda_graph_pool={pool[0]},{pool[1]}")
//       ...
//       torch.cuda.memory._set_memory_metadata("")
//
// Every request (and OOM) recorded in between carries the mark; the replay serves it from that
// pool instead of inferring the pool (sim/trace/private_pool_inference.hpp).
#pragma once

#include <optional>
#include <string_view>

#include "core/types.hpp"

namespace allocsim {

inline constexpr std::string_view kCaptureMarkPrefix = "cuda_graph_pool=";

// The pool a user_metadata string names, or nullopt for any other string.
std::optional<MempoolId> parse_capture_mark(std::string_view metadata);

}  // namespace allocsim
