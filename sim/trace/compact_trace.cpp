#include "sim/trace/compact_trace.hpp"

#include "sim/trace/input_error.hpp"

namespace allocsim {
namespace {

constexpr std::string_view kMagic = "ATRACE1\n";
constexpr uint8_t kLastAction = static_cast<uint8_t>(TraceAction::kOther);

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

uint64_t zigzag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
int64_t unzigzag(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

class Reader {
 public:
  Reader(std::string_view in, const std::string& source) : in_(in), source_(source) {}
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(source_ + ": byte offset " + std::to_string(pos_) + ": " + what);
  }
  uint8_t byte() {
    if (pos_ >= in_.size()) fail("the trace ends early (truncated?)");
    return static_cast<uint8_t>(in_[pos_++]);
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const uint8_t b = byte();
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    fail("a number longer than 64 bits");
  }
  std::string_view take(uint64_t n) {
    if (n > in_.size() - pos_) fail("a length of " + std::to_string(n) + " runs past the end");
    const std::string_view s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  size_t left() const { return in_.size() - pos_; }

 private:
  std::string_view in_;
  const std::string& source_;
  size_t pos_ = 0;
};

}  // namespace

bool looks_like_compact_trace(std::string_view bytes) {
  return bytes.substr(0, kMagic.size()) == kMagic;
}

std::string write_compact_trace(const Trace& trace, bool with_segments) {
  std::string out(kMagic);
  const std::string conf = trace.settings ? trace.settings->to_string() : "";
  put_varint(out, conf.size());
  out += conf;
  put_varint(out, trace.events.size());
  uint64_t addr = 0, time = 0;
  for (const TraceEvent& e : trace.events) {
    // What no PyTorch writes was warned of when it was read; carried as a marker.
    out.push_back(
        static_cast<char>(e.action > TraceAction::kOther ? TraceAction::kOther : e.action));
    put_varint(out, zigzag(static_cast<int64_t>(e.addr - addr)));
    put_varint(out, e.size);
    put_varint(out, e.stream);
    put_varint(out, zigzag(static_cast<int64_t>(e.time_us - time)));
    if (e.action == TraceAction::kOom) put_varint(out, e.device_free);
    addr = e.addr;
    time = e.time_us;
  }
  if (with_segments) {
    put_varint(out, trace.addresses_recorded ? 0 : 1);
    put_varint(out, trace.segments.size());
    for (const SnapshotSegment& seg : trace.segments) {
      put_varint(out, seg.address);
      put_varint(out, seg.total_size);
      put_varint(out, seg.stream);
      out.push_back(static_cast<char>(seg.small ? 1 : 0));
      put_varint(out, seg.blocks.size());
      for (const SnapshotBlock& b : seg.blocks) {
        put_varint(out, b.address - seg.address);
        put_varint(out, b.size);
        put_varint(out, b.requested);
        out.push_back(static_cast<char>((b.active ? 1 : 0) | (b.allocated ? 2 : 0)));
      }
    }
  }
  return out;
}

Trace read_compact_trace(std::string_view bytes, const std::string& source) {
  Reader in(bytes, source);
  if (!looks_like_compact_trace(bytes))
    in.fail("expected the magic \"ATRACE1\\n\" of an allocsim trace");
  in.take(kMagic.size());
  Trace trace;
  trace.source = source;
  const std::string conf(in.take(in.varint()));
  try {
    trace.settings = parse_alloc_conf(conf, kNewestTorchVersion);
  } catch (const AllocConfError& e) {
    in.fail(std::string("the recorded PYTORCH_CUDA_ALLOC_CONF is refused: ") + e.what());
  }
  const uint64_t count = in.varint();
  if (count > in.left() / 5)
    in.fail("claims " + std::to_string(count) + " events, more than its bytes can hold");
  trace.events.reserve(count);
  uint64_t addr = 0, time = 0;
  for (uint64_t i = 0; i < count; ++i) {
    TraceEvent e;
    const uint8_t action = in.byte();
    if (action > kLastAction)
      in.fail("event " + std::to_string(i) + ": unknown action " + std::to_string(action));
    e.action = static_cast<TraceAction>(action);
    addr += static_cast<uint64_t>(unzigzag(in.varint()));
    e.addr = addr;
    e.size = in.varint();
    e.stream = in.varint();
    time += static_cast<uint64_t>(unzigzag(in.varint()));
    e.time_us = time;
    if (e.action == TraceAction::kOom) e.device_free = in.varint();
    trace.events.push_back(e);
  }
  if (in.left() == 0) return trace;
  const uint64_t flags = in.varint();
  if (flags > 1) in.fail("unknown flags " + std::to_string(flags) + " before the segments");
  trace.addresses_recorded = flags == 0;
  const uint64_t segments = in.varint();
  if (segments > in.left() / 5)
    in.fail("claims " + std::to_string(segments) + " segments, more than its bytes can hold");
  for (uint64_t i = 0; i < segments; ++i) {
    SnapshotSegment seg{in.varint(), in.varint(), in.varint(), false, false, {}};
    const uint8_t flags = in.byte();
    if (flags > 1)
      in.fail("segment " + std::to_string(i) + ": unknown flags " + std::to_string(flags));
    seg.small = flags == 1;
    const uint64_t blocks = in.varint();
    if (blocks > in.left() / 4)
      in.fail("segment " + std::to_string(i) + " claims " + std::to_string(blocks) +
              " blocks, more than its bytes can hold");
    for (uint64_t k = 0; k < blocks; ++k) {
      const uint64_t offset = in.varint();
      SnapshotBlock b{seg.address + offset, in.varint(), in.varint(), false, false};
      const uint8_t state = in.byte();
      if (state > 3 || offset >= seg.total_size || b.size > seg.total_size - offset)
        in.fail("segment " + std::to_string(i) + ", block " + std::to_string(k) +
                ": expected a block inside its segment, with flags 0 to 3");
      b.active = state & 1;
      b.allocated = state & 2;
      seg.blocks.push_back(b);
    }
    trace.segments.push_back(std::move(seg));
  }
  if (in.left() != 0) in.fail("bytes after the last segment");
  return trace;
}

}  // namespace allocsim
