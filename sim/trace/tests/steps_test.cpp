// The steps a trace's optimizer annotations show.
#include "sim/trace/steps.hpp"

#include <gtest/gtest.h>

namespace allocsim {
namespace {

Trace events_at(std::initializer_list<uint64_t> times) {
  Trace t;
  for (const uint64_t time : times) {
    TraceEvent e;
    e.action = TraceAction::kAlloc;
    e.time_us = time;
    t.events.push_back(e);
  }
  return t;
}

TEST(Steps, ZeroGradsEndClosesAStepElseTheOptimizerStepsEnd) {
  Trace t = events_at({});
  EXPECT_EQ(step_marker(t), "");
  EXPECT_TRUE(step_end_times(t, step_marker(t)).empty());
  t.annotations = {{"Optimizer.step#AdamW.step", true, 10},
                   {"Optimizer.step#AdamW.step", false, 20},
                   {"Optimizer.step#AdamW.step", false, 5}};
  EXPECT_EQ(step_marker(t), "Optimizer.step#AdamW.step");
  EXPECT_EQ(step_end_times(t, step_marker(t)), (std::vector<uint64_t>{5, 20}));
  t.annotations.push_back({"Optimizer.zero_grad#AdamW.zero_grad", false, 30});
  EXPECT_EQ(step_marker(t), "Optimizer.zero_grad#AdamW.zero_grad");
  EXPECT_EQ(annotation_times(t, "step", true), (std::vector<uint64_t>{10}));
  EXPECT_EQ(annotation_times(t, "AdamW", false), (std::vector<uint64_t>{5, 20, 30}));
}

// A step ends before the first event after its end: events at its time are its own; a time past
// the last event ends after all of them, and several ends may fall before one event.
TEST(Steps, EachEndIsBeforeTheFirstEventAfterIt) {
  const Trace t = events_at({1, 2, 2, 7, 9});
  EXPECT_EQ(first_events_after(t, {0, 2, 3, 4, 9, 12}), (std::vector<uint64_t>{0, 3, 3, 3, 5, 5}));
}

}  // namespace
}  // namespace allocsim
