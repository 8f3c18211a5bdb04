// Whole-file output: gzip members (RFC 1952) for compressed traces, deterministic byte for byte.
#include "core/file_io.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <string>

#include "core/trace.h"

namespace pw {
namespace {

// Inflates one gzip member with zlib (windowBits 15 + 16: gzip wrapper only).
std::string gunzip(const std::string& gz) {
  z_stream zs{};
  EXPECT_EQ(inflateInit2(&zs, 15 + 16), Z_OK);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  zs.avail_in = static_cast<uInt>(gz.size());
  std::string out;
  char buf[4096];
  int rc = Z_OK;
  while (rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf, sizeof buf - zs.avail_out);
  }
  EXPECT_EQ(rc, Z_STREAM_END);
  inflateEnd(&zs);
  return out;
}

TEST(Gzip, RoundTripsWithADeterministicHeader) {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "{\"name\":\"F" + std::to_string(i % 97) + "\"},\n";
  const std::string gz = gzip(text);
  // RFC 1952 header: magic 1f 8b, method 8 (deflate), no flags (no name), mtime 0 (bytes 4-7).
  ASSERT_GE(gz.size(), 18u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
  EXPECT_EQ(gz[2], 8);
  EXPECT_EQ(gz[3], 0);
  for (int k = 4; k < 8; ++k) EXPECT_EQ(gz[k], 0) << k;
  EXPECT_EQ(gunzip(gz), text);
  EXPECT_EQ(gzip(text), gz);               // same bytes every time
  EXPECT_LT(gz.size(), text.size() / 10);  // repetitive JSON compresses well
  EXPECT_EQ(gunzip(gzip("")), "");
  EXPECT_TRUE(is_gzip_path("t.json.gz"));
  EXPECT_FALSE(is_gzip_path("t.json"));
  EXPECT_FALSE(is_gzip_path(".gz"));
}

TEST(Gzip, TraceFileIsCompressedOnlyWhenNamedGz) {
  Trace t;
  t.process_names = {"GPU 0"};
  t.thread_names = {{"compute"}};
  for (int i = 0; i < 100; ++i) {
    TraceSlice s;
    s.name = "F";
    s.name += std::to_string(i);
    s.category = "compute";
    s.start = i * 1000;
    s.duration = 900;
    t.slices.push_back(s);
  }
  const auto dir = std::filesystem::temp_directory_path();
  const std::string plain = (dir / "pw_trace_test.json").string();
  const std::string packed = (dir / "pw_trace_test.json.gz").string();
  write_trace_file(plain, t);
  write_trace_file(packed, t);
  EXPECT_EQ(read_file(plain), trace_to_json(t));
  EXPECT_EQ(gunzip(read_file(packed)), trace_to_json(t));
  std::filesystem::remove(plain);
  std::filesystem::remove(packed);
}

}  // namespace
}  // namespace pw
