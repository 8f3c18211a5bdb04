#pragma once
/// Whole-file reads and atomic writes (write to a temporary beside the target, then rename), so an
/// output file is written whole or not at all.
#include <string>

namespace pw {

/// Reads a whole file; throws ConfigError(path, "", "cannot read ...") if it cannot.
std::string read_file(const std::string& path);
/// Writes `content` to `path` atomically; throws ConfigError if the directory is not writable.
void write_file_atomic(const std::string& path, const std::string& content);

}  // namespace pw
