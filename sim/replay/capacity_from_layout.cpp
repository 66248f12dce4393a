#include "sim/replay/capacity_from_layout.hpp"

#include "core/size_rounding.hpp"

namespace allocsim {
namespace {

// PyTorch's ExpandableSegment: pages for totalGlobalMem + totalGlobalMem / 8, rounded up.
uint64_t reservation(uint64_t capacity, uint64_t page) {
  return (capacity + capacity / 8 + page - 1) / page * page;
}

// The largest capacity whose reservation in `page`s fits in `room`.
uint64_t largest_fitting(uint64_t room, uint64_t page) {
  const uint64_t most = room / page * page;
  uint64_t c = most / 9 * 8;
  while (c + c / 8 > most) --c;
  while ((c + 1) + (c + 1) / 8 <= most) ++c;
  return c;
}

}  // namespace

std::optional<uint64_t> capacity_from_layout(const Trace& trace, uint64_t capacity,
                                             uint64_t large_page) {
  std::optional<uint64_t> small_base, large_base;
  for (const TraceEvent& e : trace.events) {
    if (e.action != TraceAction::kSegmentMap) continue;
    if (e.size % large_page == 0) {
      if (!large_base) large_base = e.addr;
    } else if (e.size == kSmallBuffer) {
      if (!small_base) small_base = e.addr;
    }
    if (small_base && large_base) break;
  }
  if (!small_base || !large_base) return std::nullopt;
  // The second reservation made, and the page of the first's.
  const bool small_second = *small_base > *large_base;
  const uint64_t first = small_second ? *large_base : *small_base;
  const uint64_t second = small_second ? *small_base : *large_base;
  const uint64_t page = small_second ? large_page : kSmallBuffer;
  if (second - first >= reservation(capacity, page)) return std::nullopt;
  const uint64_t fits = largest_fitting(second - first, page);
  if (fits == 0 || fits >= capacity) return std::nullopt;
  return fits;
}

}  // namespace allocsim
