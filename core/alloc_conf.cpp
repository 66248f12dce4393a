#include "core/alloc_conf.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <vector>

namespace allocsim {
namespace {

constexpr uint64_t kMB = uint64_t{1024} * 1024;

[[noreturn]] void fail(const std::string& message) {
  throw AllocConfError(message);
}

// `, : [ ]` are single tokens, spaces vanish, anything else accumulates into a word.
std::vector<std::string> lex(std::string_view text) {
  std::vector<std::string> tokens;
  std::string word;
  for (char c : text) {
    if (c == ',' || c == ':' || c == '[' || c == ']') {
      if (!word.empty()) tokens.push_back(std::move(word)), word.clear();
      tokens.emplace_back(1, c);
    } else if (c != ' ') {
      word.push_back(c);
    }
  }
  if (!word.empty()) tokens.push_back(std::move(word));
  return tokens;
}

// std::stoi / std::stoul / std::stod semantics: a numeric prefix is enough, none is an error.
long long parse_integer_prefix(const std::string& token, const char* what, bool is_unsigned) {
  errno = 0;
  char* end = nullptr;
  long long value = 0;
  if (is_unsigned) {
    value = static_cast<long long>(std::strtoull(token.c_str(), &end, 10));
  } else {
    const long v = std::strtol(token.c_str(), &end, 10);
    if (errno == 0 &&
        (v > std::numeric_limits<int>::max() || v < std::numeric_limits<int>::min())) {
      errno = ERANGE;
    }
    value = v;
  }
  if (end == token.c_str()) fail(std::string("invalid number '") + token + "' for " + what);
  if (errno == ERANGE) fail(std::string("number '") + token + "' out of range for " + what);
  return value;
}

double parse_double_prefix(const std::string& token, const char* what) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(token.c_str(), &end);
  if (end == token.c_str()) fail(std::string("invalid number '") + token + "' for " + what);
  if (errno == ERANGE) fail(std::string("number '") + token + "' out of range for " + what);
  return v;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : tokens_(lex(text)) {}

  AllocConf run(std::string_view text) {
    AllocConf conf;
    conf.source = std::string(text);
    for (i_ = 0; i_ < tokens_.size(); ++i_) {
      const std::string& key = tokens_[i_];
      if (key == "max_split_size_mb") {
        conf.max_split_size = parse_mb(key);
      } else if (key == "max_non_split_rounding_mb") {
        conf.max_non_split_rounding = parse_mb(key);
      } else if (key == "garbage_collection_threshold") {
        expect(':');
        const double v = parse_double_prefix(value(key), key.c_str());
        if (!(v > 0 && v < 1.0)) fail("garbage_collect_threshold is invalid, set it in (0.0, 1.0)");
        conf.garbage_collection_threshold = v;
      } else if (key == "roundup_power2_divisions") {
        parse_roundup(conf.roundup_power2_divisions);
      } else if (key == "backend") {
        expect(':');
        const std::string& v = value(key);
        if (v != "native" && v != "cudaMallocAsync") {
          fail("Unknown allocator backend, options are native and cudaMallocAsync");
        }
        conf.use_malloc_async = v == "cudaMallocAsync";
      } else if (key == "expandable_segments") {
        conf.expandable_segments = parse_bool("expandable_segments");
      } else if (key == "release_lock_on_cudamalloc" || key == "release_lock_on_hipmalloc") {
        conf.release_lock_on_cudamalloc = parse_bool("release_lock_on_cudamalloc");
      } else if (key == "pinned_use_cuda_host_register" || key == "pinned_use_hip_host_register" ||
                 key == "pinned_use_background_threads" ||
                 key == "graph_capture_record_stream_reuse") {
        parse_bool(key);  // host-side or capture-only settings: accepted, no effect on a replay
      } else if (key == "pinned_num_register_threads") {
        expect(':');
        const auto v = static_cast<uint64_t>(parse_integer_prefix(value(key), key.c_str(), false));
        if (!std::has_single_bit(v)) fail("Number of register threads has to be power of 2 ");
        if (v > 128) fail("Number of register threads should be less than or equal to 128");
      } else if (key == "pinned_reserve_segment_size_mb") {
        expect(':');
        const auto v = parse_integer_prefix(value(key), key.c_str(), false);
        if (v <= 0) fail("Pinned reserve segment size has to be greater than 0");
      } else if (key == "per_process_memory_fraction") {
        expect(':');
        const double v = parse_double_prefix(value(key), key.c_str());
        if (!(v >= 0.0 && v <= 1.0))
          fail("per_process_memory_fraction is invalid, set it in [0.0, 1.0]");
        conf.per_process_memory_fraction = v;
      } else {
        fail("Unrecognized CachingAllocator option: " + key);
      }
      if (i_ + 1 < tokens_.size()) expect(',');
    }
    return conf;
  }

 private:
  void expect(char c) {
    ++i_;
    if (i_ >= tokens_.size() || tokens_[i_] != std::string(1, c)) {
      fail(std::string("Error parsing CachingAllocator settings, expected ") + c);
    }
  }

  const std::string& value(const std::string& key) {
    if (++i_ >= tokens_.size()) fail("Error, expecting " + key + " value");
    return tokens_[i_];
  }

  uint64_t parse_mb(const std::string& key) {
    expect(':');
    // stoi into a size_t: a negative number wraps to a huge value, as in PyTorch.
    const auto mb = static_cast<uint64_t>(parse_integer_prefix(value(key), key.c_str(), false));
    const uint64_t min_mb = kLargeBuffer / kMB;
    if (mb < min_mb) {
      fail("CachingAllocator option " + key + " too small, must be >= " + std::to_string(min_mb));
    }
    return std::min(mb, std::numeric_limits<uint64_t>::max() / kMB) * kMB;
  }

  bool parse_bool(const std::string& key) {
    expect(':');
    ++i_;
    if (i_ >= tokens_.size() || (tokens_[i_] != "True" && tokens_[i_] != "False")) {
      fail("Expected a single True/False argument for " + key);
    }
    return tokens_[i_] == "True";
  }

  void parse_roundup(RoundupDivisions& table) {
    expect(':');
    const std::string& first = value("roundup_power2_divisions");
    table.fill(0);
    if (first != "[") {  // legacy form: one value for every interval
      const auto d =
          static_cast<uint64_t>(parse_integer_prefix(first, "roundup_power2_divisions", false));
      if (!std::has_single_bit(d)) fail("For roundups, the divisons has to be power of 2 ");
      table.fill(d);
      return;
    }
    bool first_value = true;
    size_t last_index = 0;
    bool closed = false;
    while (++i_ < tokens_.size()) {
      if (tokens_[i_] == "]") {
        closed = true;
        break;
      }
      const std::string interval = tokens_[i_];
      expect(':');
      if (++i_ >= tokens_.size()) fail("Error parsing roundup_power2_divisions value");
      const auto d = static_cast<uint64_t>(
          parse_integer_prefix(tokens_[i_], "roundup_power2_divisions", false));
      if (d != 0 && !std::has_single_bit(d)) {
        fail("For roundups, the divisons has to be power of 2 or 0 to disable roundup ");
      }
      if (interval == ">") {
        // Fills every interval above the last explicit one.
        std::fill(table.begin() + static_cast<long>(std::min(last_index + 1, table.size())),
                  table.end(), d);
      } else {
        const auto mb =
            static_cast<uint64_t>(parse_integer_prefix(interval, "roundup_power2_divisions", true));
        if (!std::has_single_bit(mb)) fail("For roundups, the intervals have to be power of 2 ");
        const size_t index =
            std::min<size_t>(static_cast<size_t>(63 - std::countl_zero(mb)), table.size() - 1);
        if (first_value) {
          std::fill(table.begin(), table.begin() + static_cast<long>(index), d);
          first_value = false;
        }
        table[index] = d;
        last_index = index;
      }
      if (i_ + 1 >= tokens_.size()) break;
      if (tokens_[i_ + 1] != "]") expect(',');
    }
    if (!closed) fail("Error parsing CachingAllocator settings, expected ]");
  }

  std::vector<std::string> tokens_;
  size_t i_ = 0;
};

}  // namespace

AllocConf parse_alloc_conf(std::string_view text) {
  return Parser(text).run(text);
}

namespace {

// A megabyte count as the parser reads it back: stoi cannot read more than INT_MAX, but any
// negative number wraps (as in PyTorch) to the parser's clamp, which is the only larger value.
std::string mb_text(uint64_t bytes) {
  const uint64_t mb = bytes / kMB;
  return mb > static_cast<uint64_t>(std::numeric_limits<int>::max()) ? "-1" : std::to_string(mb);
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
  if (max_split_size != kNoMaxSplitSize) add("max_split_size_mb:" + mb_text(max_split_size));
  if (max_non_split_rounding != kLargeBuffer) {
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
  return out;
}

bool AllocConf::same_policy(const AllocConf& o) const {
  return max_split_size == o.max_split_size && max_non_split_rounding == o.max_non_split_rounding &&
         garbage_collection_threshold == o.garbage_collection_threshold &&
         roundup_power2_divisions == o.roundup_power2_divisions &&
         expandable_segments == o.expandable_segments &&
         release_lock_on_cudamalloc == o.release_lock_on_cudamalloc &&
         use_malloc_async == o.use_malloc_async &&
         per_process_memory_fraction == o.per_process_memory_fraction;
}

}  // namespace allocsim
