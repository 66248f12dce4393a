// Writes gzip: what allocsim writes to a FILE.gz (a snapshot as FILE.pickle.gz, as PyTorch users
// keep them). The bytes are the same for the same input: no time or name in the header.
#pragma once

#include <string>
#include <string_view>

namespace allocsim {

[[nodiscard]] std::string gzip_compress(std::string_view bytes);

}  // namespace allocsim
