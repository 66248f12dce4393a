#include "sim/trace/event_feed.hpp"

namespace allocsim {

void EventFeed::publish(const TraceEvent* events, size_t count) {
  update(events, count, false);
}

void EventFeed::finish(const TraceEvent* events, size_t count) {
  update(events, count, true);
}

void EventFeed::update(const TraceEvent* events, size_t count, bool finished) {
  const std::lock_guard lock(mutex_);
  events_.store(events, std::memory_order_release);
  published_.store(count, std::memory_order_release);
  finished_ = finished;
  changed_.notify_all();
}

void EventFeed::abandon() {
  std::unique_lock lock(mutex_);
  abandoned_ = true;
  changed_.notify_all();
  changed_.wait(lock, [&] { return !reader_attached_; });
}

void EventFeed::attach() {
  const std::lock_guard lock(mutex_);
  reader_attached_ = !abandoned_;
}

void EventFeed::detach() {
  const std::lock_guard lock(mutex_);
  reader_attached_ = false;
  changed_.notify_all();
}

bool EventFeed::wait_for(size_t i) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] {
    return abandoned_ || finished_ || i < published_.load(std::memory_order_relaxed);
  });
  if (abandoned_) throw FeedAbandoned{};
  return i < published_.load(std::memory_order_relaxed);
}

bool EventFeed::finished() const {
  const std::lock_guard lock(mutex_);
  return finished_ && !abandoned_;
}

}  // namespace allocsim
