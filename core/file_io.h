#pragma once
/// Whole-file reads and atomic writes (write to a temporary beside the target, then rename), so an
/// output file is written whole or not at all.
#include <string>

namespace pw {

/// Reads a whole file; throws ConfigError(path, "", "cannot read ...") if it cannot (a missing or
/// unreadable file, a name too long, a directory, a file over the input size limit).
std::string read_file(const std::string& path);
/// Writes `content` to `path` atomically; throws ConfigError if the directory is not writable.
void write_file_atomic(const std::string& path, const std::string& content);

/// `content` as one gzip member (RFC 1952, zlib's deflate at its default level), with no file
/// name and modification time 0, so the same content always gives the same bytes.
std::string gzip(const std::string& content);
/// True when `path` names a gzip file (ends in ".gz").
bool is_gzip_path(const std::string& path);

}  // namespace pw
