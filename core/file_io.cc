#include "core/file_io.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/error.h"
#include "core/input_limits.h"

namespace pw {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path, "", std::string("cannot read file: ") + std::strerror(errno));
  // A directory opens for reading on Linux, and its "size" is whatever the file system says
  // (ext4: 2^63-1, others: a block); name it instead.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError(path, "", "is a directory; expected a file");
  // Refuse an oversized regular file before reading it (pipes are checked after).
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size > 0) check_input_size(static_cast<std::size_t>(size), path);
  in.seekg(0, std::ios::beg);
  in.clear();
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  check_input_size(text.size(), path);
  return text;
}

void write_file_atomic(const std::string& path, const std::string& content) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      throw ConfigError(path, "", std::string("cannot write file: ") + std::strerror(errno));
    out << content;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw ConfigError(path, "", "write failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw ConfigError(path, "", std::string("cannot rename into place: ") + std::strerror(errno));
  }
}

std::string gzip(const std::string& content) {
  z_stream zs{};
  // windowBits 15 + 16: a gzip wrapper (header with mtime 0 and no name, CRC-32 trailer).
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("zlib: deflateInit2 failed");
  std::string out;
  char buf[1 << 16];
  std::size_t at = 0;  // input consumed
  int rc = Z_OK;
  do {
    // Feed at most 1 GiB at a time (avail_in is 32-bit).
    if (zs.avail_in == 0 && at < content.size()) {
      const std::size_t n = std::min<std::size_t>(content.size() - at, std::size_t{1} << 30);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(content.data() + at));
      zs.avail_in = static_cast<uInt>(n);
      at += n;
    }
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    rc = deflate(&zs, at == content.size() ? Z_FINISH : Z_NO_FLUSH);
    out.append(buf, sizeof buf - zs.avail_out);
  } while (rc == Z_OK || rc == Z_BUF_ERROR);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) throw std::runtime_error("zlib: deflate failed");
  return out;
}

bool is_gzip_path(const std::string& path) {
  return path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
}

}  // namespace pw
