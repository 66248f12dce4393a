// What every allocsim subcommand shares: exit statuses, the one-line error, writing reports, and
// CLI11 validators for sizes and allocator settings.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "core/alloc_conf.hpp"
#include "sim/replay/replay.hpp"
#include "sim/trace/trace.hpp"

namespace allocsim::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitOutOfHostMemory = 1;  // also: the GPU failed (--backend cuda)
inline constexpr int kExitDeviceError = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitOom = 3;
inline constexpr int kExitGpuDiffers = 4;
inline constexpr int kExitInternalError = 5;

// "allocsim: error: MESSAGE" on stderr, kept to one line whatever it quotes from the input:
// control characters (a newline in a recorded setting, say) are written as escapes.
void print_error(const std::string& message);

// "allocsim: warning: MESSAGE" on stderr, one line as print_error's: for what a run went on past.
void print_warning(const std::string& message);

// print_error(message), then kExitBadInput.
int bad_input(const std::string& message);

// Writes `bytes` to `path`, gzip-compressed where it ends in .gz; bad_input naming `what` if it
// cannot.
int write_file(const std::string& path, const std::string& bytes, const std::string& what);
// The same, or to stdout for "-".
int write_text(const std::string& path, const std::string& text, const std::string& what);

// Whether a timeline's path names the HTML page (FILE.html) rather than the SVG picture.
bool html_name(const std::string& path);

// A size such as 24GiB, 80GB, 512MiB or bytes, turned into its bytes; `example` names one in the
// error. With `nonzero`, 0 is refused too.
CLI::Validator ByteSize(const std::string& example, bool nonzero = false);

// A PYTORCH_CUDA_ALLOC_CONF that a PyTorch release allocsim knows (2.11 to 2.14) accepts and a
// replay can run under; the error is PyTorch's own words. Whether the release a replay follows
// knows every key of it is checked once that release is known (settings_known_to).
CLI::Validator AllocConfText();

// --torch-version: a release allocsim knows the policy of, "2.11" to "2.14".
CLI::Validator TorchVersionText();

// bad_input where `conf` (a what-if's settings) has a key the release a replay of `trace` follows
// does not know; kExitOk otherwise.
int settings_known_to(const AllocConf& conf, const Trace& trace,
                      std::optional<TorchVersion> torch_version);
// The same for the settings `text` under `version`, which `why` says the command follows.
int settings_known_to(const std::string& text, TorchVersion version, const std::string& why);

}  // namespace allocsim::cli
