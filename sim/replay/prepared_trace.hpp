// A trace made ready for many replays (plan's searches, one trace under several settings): what
// replay() works out before and during its replay that no setting changes, worked out once. The
// scans of the events (recorded addresses, bounded history) and the events turned into requests,
// each alloc given a slot and each free the slot of its block, are kept; a replay then only runs
// the requests through the allocator.
#pragma once

#include <cstdint>
#include <memory>

#include "sim/replay/replay.hpp"
#include "sim/trace/trace.hpp"

namespace allocsim {

class PreparedTrace {
 public:
  // For replays on a device of `capacity` bytes (others scan the events again). `trace` must
  // outlive this object.
  PreparedTrace(const Trace& trace, uint64_t capacity);
  ~PreparedTrace();
  PreparedTrace(const PreparedTrace&) = delete;
  PreparedTrace& operator=(const PreparedTrace&) = delete;

  const Trace& trace() const { return trace_; }
  uint64_t capacity() const { return capacity_; }

 private:
  friend ReplayResult replay(const PreparedTrace& prepared, const ReplayOptions& options);
  struct Work;  // the scans and the requests (sim/replay/detail/replay_run.hpp)

  const Trace& trace_;
  uint64_t capacity_;
  std::unique_ptr<const Work> work_;
};

// The same result as replay(prepared.trace(), options), safe to call from several threads at once.
// Throws as replay() does.
[[nodiscard]] ReplayResult replay(const PreparedTrace& prepared, const ReplayOptions& options);

}  // namespace allocsim
