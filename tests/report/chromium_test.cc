// Opens a rendered report in headless Chromium: it must load without console errors, produce a
// screenshot, and every schedule's timeline must be in the DOM with p x m x passes blocks.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/file_io.h"
#include "report/report.h"
#include "tests/report/test_input.h"

namespace pw {
namespace {

namespace fs = std::filesystem;

std::string find_chromium() {
  if (const char* env = std::getenv("PW_CHROMIUM"); env && *env) return env;
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"})
    if (fs::exists(p)) return p;
  return "";
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int count_between(const std::string& hay, const std::string& open, const std::string& needle) {
  const std::size_t b = hay.find(open);
  if (b == std::string::npos) return -1;
  const std::size_t e = hay.find("</svg>", b);
  int n = 0;
  for (std::size_t at = hay.find(needle, b); at != std::string::npos && at < e;
       at = hay.find(needle, at + 1))
    ++n;
  return n;
}

class Chromium : public ::testing::Test {
 protected:
  void SetUp() override {
    chromium_ = find_chromium();
    if (chromium_.empty()) GTEST_SKIP() << "chromium not installed (apt-get install chromium)";
    dir_ = fs::path(PW_BINARY_DIR) / "tests" / "report" / "chromium_run";
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  // Runs chromium on `html` with `what` (e.g. "--dump-dom"); stdout and stderr to files.
  int run(const fs::path& html, const std::string& what, const std::string& tag) {
    const fs::path profile = dir_ / ("profile-" + tag);
    const std::string cmd =
        "timeout 120 '" + chromium_ +
        "' --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
        " --disable-background-networking --disable-component-update --disable-sync"
        " --hide-scrollbars --enable-logging=stderr --v=0 --user-data-dir='" +
        profile.string() + "' " + what + " 'file://" + html.string() + "' > '" +
        (dir_ / (tag + ".out")).string() + "' 2> '" + (dir_ / (tag + ".err")).string() + "'";
    return std::system(cmd.c_str());
  }

  std::string chromium_;
  fs::path dir_;
};

TEST_F(Chromium, ReportLoadsCleanlyWithEveryTimeline) {
  const ReportInput in = testing::full_report_input();
  const fs::path html = dir_ / "report.html";
  write_file_atomic(html.string(), render_html(in));

  ASSERT_EQ(run(html, "--dump-dom", "dom"), 0) << slurp(dir_ / "dom.err");
  const std::string dom = slurp(dir_ / "dom.out");
  const std::string log = slurp(dir_ / "dom.err");
  for (const char* bad : {"Uncaught", "ERROR:CONSOLE", "Failed to load", "Refused to"})
    EXPECT_EQ(log.find(bad), std::string::npos) << bad << " in chromium log:\n" << log;
  ASSERT_NE(dom.find("</html>"), std::string::npos) << "page did not load:\n" << log;

  // p x m x passes per schedule, counted in the DOM chromium built (not in our text).
  int ok = 0;
  for (std::size_t i = 0; i < in.schedules.size(); ++i) {
    const ScheduleReport& s = in.schedules[i];
    const std::string open =
        "<svg class=\"tl\" id=\"tl-s" + std::to_string(i) + "-" + s.name + "\"";
    if (!s.ok()) {
      EXPECT_EQ(dom.find(open), std::string::npos) << s.name;
      EXPECT_NE(dom.find(s.error), std::string::npos) << s.name;
      continue;
    }
    ++ok;
    const int passes = s.schedule.split_backward() ? 3 : 2;
    const int expected = s.schedule.placement.num_stages() * s.schedule.num_microbatches * passes;
    EXPECT_EQ(count_between(dom, open, "class=\"blk "), expected) << s.name;
    EXPECT_EQ(count_between(dom, "<svg class=\"mem\" id=\"mem-s" + std::to_string(i) + "-",
                            "class=\"area\""),
              s.schedule.placement.num_devices)
        << s.name;
  }
  EXPECT_EQ(ok, 3);
  EXPECT_NE(dom.find("id=\"curve-0\""), std::string::npos);
  EXPECT_NE(dom.find("id=\"pareto\""), std::string::npos);
  EXPECT_NE(dom.find("id=\"tl-pred-s0-1f1b\""), std::string::npos);
  EXPECT_NE(dom.find("id=\"tl-meas-s0-1f1b\""), std::string::npos);

  const fs::path png = dir_ / "report.png";
  ASSERT_EQ(run(html, "--window-size=1200,2400 --screenshot='" + png.string() + "'", "shot"), 0)
      << slurp(dir_ / "shot.err");
  const std::string bytes = slurp(png);
  ASSERT_GT(bytes.size(), 10000u) << "screenshot missing or blank";
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
}

}  // namespace
}  // namespace pw
