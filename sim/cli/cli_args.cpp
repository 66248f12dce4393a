#include "sim/cli/cli_args.hpp"

#include <cstdio>
#include <fstream>

#include "core/alloc_conf.hpp"
#include "sim/cli/byte_size.hpp"
#include "sim/replay/replay.hpp"
#include "sim/trace/gzip_writer.hpp"

namespace allocsim::cli {

namespace {

// `prefix` and `message` as one line: control characters (a newline in a recorded setting, say)
// written as escapes.
void print_line(const char* prefix, const std::string& message) {
  std::string line = prefix;
  for (const char c : message) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      line += "\\n";
    } else if (c == '\t') {
      line += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", u);
      line += escaped;
    } else {
      line += c;
    }
  }
  line += '\n';
  std::fputs(line.c_str(), stderr);
}

}  // namespace

void print_error(const std::string& message) {
  print_line("allocsim: error: ", message);
}

void print_warning(const std::string& message) {
  print_line("allocsim: warning: ", message);
}

int bad_input(const std::string& message) {
  print_error(message);
  return kExitBadInput;
}

int write_file(const std::string& path, const std::string& bytes, const std::string& what) {
  std::ofstream out(path, std::ios::binary);
  out << (path.ends_with(".gz") ? gzip_compress(bytes) : bytes);
  return out ? kExitOk : bad_input(path + ": cannot write " + what);
}

int write_text(const std::string& path, const std::string& text, const std::string& what) {
  if (path != "-") return write_file(path, text, what);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return kExitOk;
}

bool html_name(const std::string& path) {
  return path.size() >= 5 && path.compare(path.size() - 5, 5, ".html") == 0;
}

CLI::Validator ByteSize(const std::string& example, bool nonzero) {
  return CLI::Validator(
      [example, nonzero](std::string& text) -> std::string {
        const auto bytes = parse_byte_size(text);
        if (!bytes || (nonzero && *bytes == 0)) {
          return "'" + text + "': expected a size such as " + example + " or bytes";
        }
        text = std::to_string(*bytes);
        return {};
      },
      "SIZE");
}

CLI::Validator AllocConfText() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          check_replayable(parse_alloc_conf(text, kNewestTorchVersion));
          return {};
        } catch (const AllocConfError& e) {
          return "'" + text + "': " + e.what();
        }
      },
      "CONF");
}

CLI::Validator TorchVersionText() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const auto v = TorchVersion::parse(text);
        if (!v) return "'" + text + "': expected a PyTorch release such as 2.13";
        if (*v < kOldestTorchVersion || *v > kNewestTorchVersion) {
          return "'" + text + "': allocsim follows the allocator of PyTorch " +
                 kOldestTorchVersion.to_string() + " to " + kNewestTorchVersion.to_string();
        }
        text = v->to_string();
        return {};
      },
      "X.Y");
}

namespace {

int unknown_setting(const std::string& text, const AllocConfError& e, TorchVersion version,
                    const std::string& why) {
  return bad_input("--alloc-conf '" + text + "': " + e.what() + " (ValueError: PyTorch " +
                   version.to_string() + " does not know the key, and " + why + ")");
}

}  // namespace

int settings_known_to(const AllocConf& conf, const Trace& trace,
                      std::optional<TorchVersion> torch_version) {
  const TorchVersion version = replay_torch_version(trace, torch_version);
  try {
    check_known_to(conf, version);
    return kExitOk;
  } catch (const AllocConfError& e) {
    return unknown_setting(conf.source, e, version,
                           "this replay follows its allocator; --torch-version names a later "
                           "release");
  }
}

int settings_known_to(const std::string& text, TorchVersion version, const std::string& why) {
  try {
    (void)parse_alloc_conf(text, version);
    return kExitOk;
  } catch (const AllocConfError& e) {
    return unknown_setting(text, e, version, why);
  }
}

}  // namespace allocsim::cli
