// The card's memory as a trace's expandable segments show it: each reserves 1 1/8 of the device's
// memory in address space (2 MiB pages for the small pool, large_segment_size's for the large),
// and the driver places the second pool's reservation right after the first's. Where that layout
// puts the second inside the first as a card of `capacity` would reserve it, the recording came
// from a smaller card.
#pragma once

#include <cstdint>
#include <optional>

#include "sim/trace/trace.hpp"

namespace allocsim {

// The largest card whose reservations the trace's first maps of its two pools leave room for,
// where that is smaller than `capacity`; nullopt where `capacity` fits the layout or the trace
// does not show it (fewer than two pools' expandable segments).
std::optional<uint64_t> capacity_from_layout(const Trace& trace, uint64_t capacity,
                                             uint64_t large_page);

}  // namespace allocsim
