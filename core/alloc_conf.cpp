#include "core/alloc_conf.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace allocsim {

namespace {

using Kind = AllocConfError::Kind;

std::string what_of(Kind kind, const std::string& message) {
  switch (kind) {
    case Kind::kAbort:
      return "PyTorch aborts the process on it (an internal assertion: " + message + ")";
    case Kind::kRuntimeError:
      return "RuntimeError: " + message;
    case Kind::kIndexError:
      return message + " (IndexError: a number out of range)";
    case Kind::kValueError:
      if (message == "stoull" || message == "stod") return message + " (ValueError: not a number)";
      return message;
    case Kind::kAllocsim:
      return message;
  }
  return message;
}

}  // namespace

AllocConfError::AllocConfError(Kind kind, const std::string& pytorch_message)
    : std::invalid_argument(what_of(kind, pytorch_message)),
      kind_(kind),
      message_(pytorch_message) {}

namespace {

constexpr uint64_t kMB = uint64_t{1024} * 1024;
constexpr uint64_t kMaxMB = std::numeric_limits<uint64_t>::max() / kMB;

[[noreturn]] void fail(const std::string& message) {
  throw AllocConfError(Kind::kValueError, message);
}

// PyTorch's ConfigTokenizer: `, : [ ]` are single tokens, white space vanishes, anything else
// accumulates into a word. Its reads mirror the tokenizer's: a token past the end is an internal
// assertion, raised as RuntimeError, except in the CUDA pass, where it aborts the process.
class Tokens {
 public:
  Tokens(std::string_view text, bool assertion_aborts) : aborts_(assertion_aborts) {
    std::string word;
    for (char c : text) {
      if (c == ',' || c == ':' || c == '[' || c == ']') {
        if (!word.empty()) tokens_.push_back(std::move(word)), word.clear();
        tokens_.emplace_back(1, c);
      } else if (!std::isspace(static_cast<unsigned char>(c))) {
        word.push_back(c);
      }
    }
    if (!word.empty()) tokens_.push_back(std::move(word));
  }

  size_t size() const { return tokens_.size(); }

  const std::string& operator[](size_t i) const {
    if (i >= tokens_.size()) assertion("Index out of bounds in ConfigTokenizer");
    return tokens_[i];
  }

  // checkToken: PyTorch compares and goes on whatever the answer.
  bool is(size_t i, std::string_view token) const { return (*this)[i] == token; }

  // std::stoull: a numeric prefix is enough (a sign too: "-1" wraps), none is ValueError, one
  // beyond 64 bits IndexError.
  uint64_t to_size(size_t i) const {
    const std::string& token = (*this)[i];
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(token.c_str(), &end, 10);
    if (end == token.c_str()) fail("stoull");
    if (errno == ERANGE) throw AllocConfError(Kind::kIndexError, "stoull");
    return v;
  }

  double to_double(size_t i) const {
    const std::string& token = (*this)[i];
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(token.c_str(), &end);
    if (end == token.c_str()) fail("stod");
    if (errno == ERANGE) throw AllocConfError(Kind::kIndexError, "stod");
    return v;
  }

  bool to_bool(size_t i) const {
    const std::string& token = (*this)[i];
    if (token == "True") return true;
    if (token == "False") return false;
    fail("Expected 'True' or 'False' at index " + std::to_string(i) +
         " in ConfigTokenizer but got '" + token + "'");
  }

  // skipKey: past the key's ':' to its value, or to the ']' that closes a list value.
  size_t skip_key(size_t i) const {
    (void)is(++i, ":");
    ++i;
    if ((*this)[i] != "[") return i;
    while (++i < tokens_.size() && tokens_[i] != "]") {
    }
    if (i >= tokens_.size()) {
      assertion("Expected closing bracket ']' in ConfigTokenizer but reached end of config");
    }
    return i;
  }

  // After a key's value: past the ',' that should follow, whatever is there.
  size_t next_item(size_t i) const {
    if (i + 1 < tokens_.size()) (void)is(++i, ",");
    return i;
  }

 private:
  [[noreturn]] void assertion(const std::string& message) const {
    throw AllocConfError(aborts_ ? Kind::kAbort : Kind::kRuntimeError, message);
  }

  std::vector<std::string> tokens_;
  bool aborts_;
};

bool power_of_two(uint64_t v) {
  return std::has_single_bit(v);
}

// The keys the device-independent pass reads (AcceleratorAllocatorConfig).
bool accelerator_key(const std::string& key) {
  return key == "large_segment_size_mb" || key == "max_split_size_mb" ||
         key == "max_non_split_rounding_mb" || key == "garbage_collection_threshold" ||
         key == "roundup_power2_divisions" || key == "expandable_segments" ||
         key == "pinned_use_background_threads";
}

// The CUDA pass (CUDAAllocatorConfig), first: it reads the CUDA keys' values, refuses any key it
// does not know, and skips the others' values.
void parse_cuda_keys(const Tokens& t, AllocConf& conf, TorchVersion version) {
  for (size_t i = 0; i < t.size(); ++i) {
    const std::string& key = t[i];
    if (key == "backend") {
      (void)t.is(++i, ":");
      const std::string& v = t[++i];
      if (v != "native" && v != "cudaMallocAsync") {
        fail("Unknown allocator backend, options are native and cudaMallocAsync");
      }
      conf.use_malloc_async = v == "cudaMallocAsync";
    } else if (key == "release_lock_on_cudamalloc" || key == "release_lock_on_hipmalloc") {
      (void)t.is(++i, ":");
      conf.release_lock_on_cudamalloc = t.to_bool(++i);
    } else if (key == "pinned_use_cuda_host_register" || key == "pinned_use_hip_host_register" ||
               key == "graph_capture_record_stream_reuse") {
      (void)t.is(++i, ":");
      (void)t.to_bool(++i);  // host-side or capture-only: no effect on a replay
    } else if (key == "pinned_num_register_threads") {
      (void)t.is(++i, ":");
      const uint64_t v = t.to_size(++i);
      if (!power_of_two(v)) {
        fail("Number of register threads has to be power of 2, got " + std::to_string(v));
      }
      if (v > 128) {
        fail("Number of register threads should be less than or equal to 128, got " +
             std::to_string(v));
      }
    } else if (key == "pinned_reserve_segment_size_mb") {
      (void)t.is(++i, ":");
      if (t.to_size(++i) == 0) fail("Pinned reserve segment size has to be greater than 0");
    } else if (key == "per_process_memory_fraction") {
      (void)t.is(++i, ":");
      const double v = t.to_double(++i);
      if (!(v >= 0.0 && v <= 1.0)) {
        fail("per_process_memory_fraction is invalid, set it in [0.0, 1.0]");
      }
      conf.per_process_memory_fraction = v;
    } else if (key == "throw_on_cudamalloc_oom" && version.has_oom_rejections()) {
      (void)t.is(++i, ":");
      conf.throw_on_cudamalloc_oom = t.to_bool(++i);
    } else {
      i = t.skip_key(i);
      if (!accelerator_key(key)) fail("Unrecognized key '" + key + "' in CUDA allocator config.");
    }
    i = t.next_item(i);
  }
}

// A size in MB of at least `min_mb`, as bytes (clamped so that the bytes fit).
uint64_t parse_mb(const Tokens& t, size_t i, const std::string& key, uint64_t min_mb) {
  const uint64_t mb = t.to_size(i);
  if (mb < min_mb) {
    fail("CachingAllocator option " + key + " too small, must be >= " + std::to_string(min_mb));
  }
  return std::min(mb, kMaxMB) * kMB;
}

size_t parse_roundup(const Tokens& t, size_t i, RoundupDivisions& table) {
  (void)t.is(++i, ":");
  if (t[++i] != "[") {  // the legacy form: one value for every interval
    const uint64_t d = t.to_size(i);
    if (!power_of_two(d)) fail("For roundups, the divisions has to be power of 2 ");
    table.fill(d);
    return i;
  }
  bool first_value = true;
  size_t last_index = 0;
  while (++i < t.size() && t[i] != "]") {
    const size_t interval = i;
    (void)t.is(++i, ":");
    const uint64_t d = t.to_size(++i);
    if (d != 0 && !power_of_two(d)) {
      fail("For roundups, the divisions has to be power of 2 or 0 to disable roundup ");
    }
    if (t[interval] == ">") {  // every interval above the last one given
      std::fill(table.begin() + static_cast<long>(last_index + 1), table.end(), d);
    } else {
      const uint64_t mb = t.to_size(interval);
      if (!power_of_two(mb)) fail("For roundups, the intervals have to be power of 2 ");
      const size_t index =
          std::min<size_t>(static_cast<size_t>(63 - std::countl_zero(mb)), table.size() - 1);
      if (first_value) {
        std::fill(table.begin(), table.begin() + static_cast<long>(index), d);
        first_value = false;
      }
      table[index] = d;
      last_index = index;
    }
    if (t[i + 1] != "]") (void)t.is(++i, ",");
  }
  if (i >= t.size()) {
    throw AllocConfError(Kind::kRuntimeError,
                         "Expected closing bracket ']' in ConfigTokenizer but reached end of "
                         "config");
  }
  return i;
}

// The device-independent pass (AcceleratorAllocatorConfig), second: large_segment_size_mb
// first, since the other sizes are bounded by it.
void parse_accelerator_keys(const Tokens& t, AllocConf& conf) {
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] != "large_segment_size_mb") continue;
    (void)t.is(++i, ":");
    const uint64_t mb = t.to_size(++i);
    if (mb <= kMinLargeAlloc / kMB) {
      fail("CachingAllocator option large_segment_size_mb must be > " +
           std::to_string(kMinLargeAlloc / kMB) + " MB");
    }
    conf.large_segment_size = std::min(mb, kMaxMB) * kMB;
  }
  conf.max_non_split_rounding = conf.large_segment_size;
  const uint64_t min_mb = conf.large_segment_size / kMB;
  for (size_t i = 0; i < t.size(); ++i) {
    const std::string& key = t[i];
    if (key == "max_split_size_mb") {
      (void)t.is(++i, ":");
      conf.max_split_size = parse_mb(t, ++i, key, min_mb);
    } else if (key == "max_non_split_rounding_mb") {
      (void)t.is(++i, ":");
      conf.max_non_split_rounding = parse_mb(t, ++i, key, min_mb);
    } else if (key == "garbage_collection_threshold") {
      (void)t.is(++i, ":");
      const double v = t.to_double(++i);
      if (!(v > 0 && v < 1.0)) fail("garbage_collect_threshold is invalid, set it in (0.0, 1.0)");
      conf.garbage_collection_threshold = v;
    } else if (key == "roundup_power2_divisions") {
      i = parse_roundup(t, i, conf.roundup_power2_divisions);
    } else if (key == "expandable_segments") {
      (void)t.is(++i, ":");
      conf.expandable_segments = t.to_bool(++i);
    } else if (key == "pinned_use_background_threads") {
      (void)t.is(++i, ":");
      (void)t.to_bool(++i);  // host-side: no effect on a replay
    } else {
      i = t.skip_key(i);  // large_segment_size_mb, read above, and the CUDA pass's keys
    }
    i = t.next_item(i);
  }
}

}  // namespace

AllocConf parse_alloc_conf(std::string_view text, TorchVersion version) {
  return change_alloc_conf(AllocConf{}, text, version);
}

AllocConf change_alloc_conf(const AllocConf& current, std::string_view text, TorchVersion version) {
  AllocConf conf = current;
  // Every parse starts these from their defaults; the other keys keep what was set before.
  conf.max_split_size = kNoMaxSplitSize;
  conf.roundup_power2_divisions = {};
  conf.garbage_collection_threshold = 0.0;
  conf.source = std::string(text);
  parse_cuda_keys(Tokens(text, /*assertion_aborts=*/true), conf, version);
  parse_accelerator_keys(Tokens(text, /*assertion_aborts=*/false), conf);
  return conf;
}

void check_known_to(const AllocConf& conf, TorchVersion version) {
  if (conf.throw_on_cudamalloc_oom && !version.has_oom_rejections()) {
    fail("Unrecognized key 'throw_on_cudamalloc_oom' in CUDA allocator config.");
  }
}

namespace {

// A megabyte count as the parser reads it back (stoull reads every 64-bit count).
std::string mb_text(uint64_t bytes) {
  return std::to_string(bytes / kMB);
}

// The shortest decimal text that reads back as the same double.
std::string shortest(double v) {
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

}  // namespace

std::string AllocConf::to_string() const {
  std::string out;
  auto add = [&out](const std::string& item) {
    if (!out.empty()) out += ',';
    out += item;
  };
  if (large_segment_size != kLargeBuffer) {
    add("large_segment_size_mb:" + mb_text(large_segment_size));
  }
  if (max_split_size != kNoMaxSplitSize) add("max_split_size_mb:" + mb_text(max_split_size));
  if (max_non_split_rounding != large_segment_size) {
    add("max_non_split_rounding_mb:" + mb_text(max_non_split_rounding));
  }
  if (garbage_collection_threshold > 0) {
    add("garbage_collection_threshold:" + shortest(garbage_collection_threshold));
  }
  if (std::any_of(roundup_power2_divisions.begin(), roundup_power2_divisions.end(),
                  [](uint64_t d) { return d != 0; })) {
    std::string list = "roundup_power2_divisions:[";
    for (size_t i = 0; i < roundup_power2_divisions.size(); ++i) {
      if (i) list += ',';
      list += std::to_string(uint64_t{1} << i) + ':' + std::to_string(roundup_power2_divisions[i]);
    }
    add(list + "]");
  }
  if (expandable_segments) add("expandable_segments:True");
  if (release_lock_on_cudamalloc) add("release_lock_on_cudamalloc:True");
  if (use_malloc_async) add("backend:cudaMallocAsync");
  if (per_process_memory_fraction)
    add("per_process_memory_fraction:" + shortest(*per_process_memory_fraction));
  if (throw_on_cudamalloc_oom) add("throw_on_cudamalloc_oom:True");
  return out;
}

bool AllocConf::same_policy(const AllocConf& o) const {
  return max_split_size == o.max_split_size && large_segment_size == o.large_segment_size &&
         max_non_split_rounding == o.max_non_split_rounding &&
         garbage_collection_threshold == o.garbage_collection_threshold &&
         roundup_power2_divisions == o.roundup_power2_divisions &&
         expandable_segments == o.expandable_segments &&
         release_lock_on_cudamalloc == o.release_lock_on_cudamalloc &&
         use_malloc_async == o.use_malloc_async &&
         per_process_memory_fraction == o.per_process_memory_fraction &&
         throw_on_cudamalloc_oom == o.throw_on_cudamalloc_oom;
}

}  // namespace allocsim
