// What a trace's own events say of the recorded run.
#include "sim/trace/trace.hpp"

#include <gtest/gtest.h>

namespace allocsim {
namespace {

Trace of(std::initializer_list<TraceAction> actions) {
  Trace t;
  for (const TraceAction a : actions) {
    TraceEvent e;
    e.action = a;
    t.events.push_back(e);
  }
  return t;
}

TEST(Trace, EndedInOomOnlyWhereNoRequestFollowedTheLastOom) {
  using A = TraceAction;
  EXPECT_FALSE(ended_in_oom(of({})));
  EXPECT_FALSE(ended_in_oom(of({A::kAlloc, A::kFreeRequested})));
  // The job died: only frees (its unwinding) after the OOM.
  EXPECT_TRUE(ended_in_oom(of({A::kAlloc, A::kOom, A::kFreeRequested, A::kFreeCompleted})));
  EXPECT_TRUE(ended_in_oom(of({A::kOom, A::kAlloc, A::kOom})));
  // Caught (cuDNN's next algorithm, a try/except): the run went on to request more.
  EXPECT_FALSE(ended_in_oom(of({A::kOom, A::kSegmentAlloc, A::kAlloc, A::kFreeRequested})));
}

}  // namespace
}  // namespace allocsim
