// EventFeed: a snapshot's events handed from the thread decoding them to a thread replaying them
// while the decoding goes on. The decoder publishes a growing prefix of one array that never moves;
// when it cannot keep that promise (the array must grow, or the events turn out not to be the
// trace's) it abandons the feed and waits until the reader has let go of the array.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>

#include "sim/trace/trace.hpp"

namespace allocsim {

// Thrown to the reader of an abandoned feed.
struct FeedAbandoned {};

class EventFeed {
 public:
  // The decoder's side. `events` is the same array at every call.
  void publish(const TraceEvent* events, size_t count);
  // The events are complete: `count` of them.
  void finish(const TraceEvent* events, size_t count);
  // Returns once the reader has stopped (at once if it has, or if there is none).
  void abandon();

  // The reader's side. The reader is attached until it calls detach(), on every path out.
  void attach();
  void detach();
  // Whether event i exists, waiting until it is published or the feed finishes; throws
  // FeedAbandoned.
  bool wait_for(size_t i);
  const TraceEvent* events() const { return events_.load(std::memory_order_acquire); }
  size_t published() const { return published_.load(std::memory_order_acquire); }
  bool finished() const;

 private:
  void update(const TraceEvent* events, size_t count, bool finished);

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::atomic<const TraceEvent*> events_{nullptr};  // read without the lock, as the events are
  std::atomic<size_t> published_{0};
  bool finished_ = false;
  bool abandoned_ = false;
  bool reader_attached_ = false;
};

}  // namespace allocsim
