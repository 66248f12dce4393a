#include "sim/trace/pickle_json.hpp"

#include <cmath>
#include <cstdio>

namespace allocsim {
namespace {

constexpr int kMaxDepth = 64;

void append_string(std::string& out, std::string_view text) {
  out += '"';
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
}

class Writer {
 public:
  Writer(const pickle::Document& doc, size_t max_bytes) : doc_(doc), max_(max_bytes) {}

  bool write(const pickle::Value& v, int depth) {
    if (depth > kMaxDepth || out.size() > max_) return false;
    switch (v.kind) {
      case pickle::Kind::kNone:
      case pickle::Kind::kBigInt:
        out += "null";
        return true;
      case pickle::Kind::kBool:
        out += v.i ? "true" : "false";
        return true;
      case pickle::Kind::kInt:
        out += std::to_string(v.i);
        return true;
      case pickle::Kind::kFloat: {
        if (!std::isfinite(v.f)) {
          out += "null";
          return true;
        }
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.17g", v.f);
        out += buf;
        return true;
      }
      case pickle::Kind::kString:
        append_string(out, doc_.str(v));
        return true;
      case pickle::Kind::kDict:
        return write_dict(v, depth);
      case pickle::Kind::kList:
      case pickle::Kind::kTuple:
      case pickle::Kind::kSet:
        return write_array(v, depth);
    }
    return false;
  }

  std::string out;

 private:
  bool write_array(const pickle::Value& v, int depth) {
    out += '[';
    bool first = true;
    for (const pickle::Value& item : doc_.items(v)) {
      if (!first) out += ',';
      first = false;
      if (!write(item, depth + 1)) return false;
    }
    out += ']';
    return true;
  }

  bool write_dict(const pickle::Value& v, int depth) {
    out += '{';
    const auto items = doc_.items(v);
    for (size_t k = 0; k + 1 < items.size(); k += 2) {
      if (k) out += ',';
      if (items[k].kind == pickle::Kind::kString) {
        append_string(out, doc_.str(items[k]));
      } else {
        Writer key(doc_, max_);
        if (!key.write(items[k], depth + 1)) return false;
        append_string(out, key.out);
      }
      out += ':';
      if (!write(items[k + 1], depth + 1)) return false;
    }
    out += '}';
    return true;
  }

  const pickle::Document& doc_;
  size_t max_;
};

}  // namespace

std::optional<std::string> pickle_json(const pickle::Document& doc, const pickle::Value& value,
                                       size_t max_bytes) {
  Writer w(doc, max_bytes);
  if (!w.write(value, 0) || w.out.size() > max_bytes) return std::nullopt;
  return std::move(w.out);
}

}  // namespace allocsim
