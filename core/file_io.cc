#include "core/file_io.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/input_limits.h"

namespace pw {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path, "", std::string("cannot read file: ") + std::strerror(errno));
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

}  // namespace pw
