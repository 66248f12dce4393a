#include "sim/trace/trace.hpp"

namespace allocsim {

std::optional<DeviceOpKind> device_op_kind(TraceAction action) {
  switch (action) {
    case TraceAction::kSegmentAlloc:
      return DeviceOpKind::kSegmentAlloc;
    case TraceAction::kSegmentFree:
      return DeviceOpKind::kSegmentFree;
    case TraceAction::kSegmentMap:
      return DeviceOpKind::kSegmentMap;
    case TraceAction::kSegmentUnmap:
      return DeviceOpKind::kSegmentUnmap;
    default:
      return std::nullopt;
  }
}

const char* to_string(TraceAction action) {
  switch (action) {
    case TraceAction::kAlloc:
      return "alloc";
    case TraceAction::kFreeRequested:
      return "free_requested";
    case TraceAction::kFreeCompleted:
      return "free_completed";
    case TraceAction::kSegmentAlloc:
      return "segment_alloc";
    case TraceAction::kSegmentFree:
      return "segment_free";
    case TraceAction::kSegmentMap:
      return "segment_map";
    case TraceAction::kSegmentUnmap:
      return "segment_unmap";
    case TraceAction::kOom:
      return "oom";
    case TraceAction::kOther:
      return "other";
    case TraceAction::kAnnotate:
      return "annotate";
    case TraceAction::kUnknown:
      return "unknown";
  }
  return "?";
}

bool ended_in_oom(const Trace& trace) {
  for (auto e = trace.events.rbegin(); e != trace.events.rend(); ++e) {
    if (e->action == TraceAction::kOom) return true;
    if (e->action == TraceAction::kAlloc) return false;
  }
  return false;
}

}  // namespace allocsim
