// Fuzzes the allocator core with decoded operation streams: every step is checked against the
// invariants and a reference model (backends/testing/allocator_harness.hpp); freeing everything at
// the end must leak nothing. Device failures are injected where the bytes say so.
#include <cstdio>
#include <cstdlib>

#include "backends/testing/allocator_harness.hpp"
#include "fuzz/byte_reader.hpp"

namespace {

using allocsim::fuzz::ByteReader;
using allocsim::testing::AllocatorHarness;
using allocsim::testing::HarnessConfig;
using allocsim::testing::Op;

constexpr uint64_t MiB = 1 << 20;
constexpr int kMaxOps = 1000;

HarnessConfig decode_config(ByteReader& in) {
  HarnessConfig c;
  const uint8_t flags = in.byte();
  c.capacity = (64 + in.bytes(2) % 4032) * MiB;
  c.context_bytes = std::min<uint64_t>(in.byte(), c.capacity / MiB / 2) * MiB;
  const uint8_t max_split = in.byte(), gc = in.byte(), divisions = in.byte();
  const uint8_t fail_malloc = in.byte(), fail_map = in.byte();
  c.conf.expandable_segments = flags & 1;
  if (flags & 2) c.conf.max_split_size = (20 + max_split) * MiB;
  if (flags & 4) c.conf.garbage_collection_threshold = (1 + gc % 99) / 100.0;
  if (flags & 8) c.conf.roundup_power2_divisions.fill(uint64_t{1} << (divisions % 6));
  if (flags & 16) c.conf.max_non_split_rounding = (20 + max_split % 100) * MiB;
  if (flags & 32) c.failing_mallocs.push_back(1 + fail_malloc % 64);
  if (flags & 64) c.failing_maps.push_back(1 + fail_map % 64);
  return c;
}

Op decode_op(ByteReader& in) {
  Op op;
  const uint8_t kind = in.byte() % 16;
  if (kind <= 6 || kind == 14) {
    op.kind = Op::kMalloc;
    const uint8_t size_class = in.byte() % 5;
    const uint64_t raw = in.bytes(3);
    switch (size_class) {
      case 0:
        op.size = 1 + raw % 4096;
        break;
      case 1:
        op.size = 1 + raw % MiB;
        break;
      case 2:
        op.size = MiB + raw % (9 * MiB);
        break;
      case 3:
        op.size = 10 * MiB + raw % (64 * MiB);
        break;
      default:
        op.size = (1 + raw % 256) * MiB + (raw & 1 ? 512 : 0);
        break;
    }
    const uint8_t stream = in.byte();
    op.stream = stream % 3;
    const uint8_t pool = (stream / 3) % 8;  // a quarter of the requests captured into a pool
    op.pool = pool < AllocatorHarness::kPools ? pool + 1 : 0;
  } else if (kind <= 9) {
    op.kind = Op::kFree;
    op.which = in.byte();
  } else if (kind == 10) {
    op.kind = Op::kFreeDeferred;
    op.which = in.byte();
  } else if (kind == 11) {
    op.kind = Op::kCompleteDeferred;
    op.which = in.byte();
  } else if (kind == 12) {
    op.kind = Op::kEmptyCache;
  } else if (kind == 15) {
    op.kind = Op::kReleasePool;
    op.pool = 1 + in.byte() % AllocatorHarness::kPools;
  } else {
    op.kind = Op::kSetFraction;
    op.fraction = (5 + in.byte() % 96) / 100.0;
  }
  return op;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  const HarnessConfig config = decode_config(in);
  AllocatorHarness harness(config);
  try {
    for (int i = 0; i < kMaxOps && !in.empty(); ++i) harness.apply(decode_op(in));
    harness.finish();
  } catch (const allocsim::testing::PropertyViolation& e) {
    std::fprintf(stderr, "property violated (%s): %s\n",
                 allocsim::testing::to_string(config).c_str(), e.what());
    std::abort();
  }
  return 0;
}
