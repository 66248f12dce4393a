// StreamedReplay: replays a snapshot on a second thread while it is still being decoded, so that
// `allocsim replay` takes little longer than reading the file.
//
// The replay starts before the snapshot's settings, final segments and last events are known, on
// the guess that they change nothing: the settings are the ones given (or the defaults) and the
// history is whole (nothing allocated before its first event). finish() checks the guess against
// the decoded trace (and that no CUDA graph's private pool served a request) and falls back to
// the ordinary replay() where it was wrong, or where the feed
// was abandoned, so the result is always exactly replay()'s.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "sim/replay/replay.hpp"
#include "sim/trace/event_feed.hpp"

namespace allocsim {

class StreamedReplay {
 public:
  // Whether a replay with these options can run alongside the decoding: with the trace's own
  // recorded addresses (not a GPU run's). It is always on the simulated device.
  static bool supports(const ReplayOptions& options);

  // Starts the replay thread; it waits for the feed's first events.
  StreamedReplay(const ReplayOptions& options, std::string source);
  // Abandons the feed (if the decoding ended in an error) and joins the thread.
  ~StreamedReplay();
  StreamedReplay(const StreamedReplay&) = delete;
  StreamedReplay& operator=(const StreamedReplay&) = delete;

  // For the decoder (read_trace_file).
  EventFeed& feed() { return feed_; }

  // Once `trace` is decoded: the streamed replay's result if its guess holds for `trace`, else
  // replay(trace, options). Either way, what replay(trace, options) returns.
  ReplayResult finish(const Trace& trace);
  // Whether the last finish() used the streamed result (for tests and measurements).
  bool streamed() const { return streamed_; }

 private:
  struct Run;  // the replay thread's state
  void run();

  ReplayOptions options_;
  std::string source_;
  EventFeed feed_;
  std::unique_ptr<Run> run_;
  std::thread thread_;
  bool streamed_ = false;
};

}  // namespace allocsim
