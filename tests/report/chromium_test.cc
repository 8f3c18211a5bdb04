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
    // One directory per test: ctest runs the tests of this file as parallel processes.
    dir_ = fs::path(PW_BINARY_DIR) / "tests" / "report" / "chromium_run" /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
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

// The plan report's Pareto chart measured by the browser, not by the renderer's own estimate of
// text widths: a crowded front of 14 points (as ReportHtml.ParetoNumbersDoNotOverlap...), laid out
// by Chromium at 1400 px and at 800 px wide; a script run in the page takes every point number's
// and every front point's rendered box (getBoundingClientRect) and counts numbers that overlap
// another number or a point, or leave the chart. Zero at both widths.
TEST_F(Chromium, ParetoNumbersDoNotOverlapAsTheBrowserLaysThemOut) {
  ReportInput in = testing::full_report_input();
  in.pareto = testing::crowded_pareto();
  std::string html = render_html(in);
  const std::string probe = R"(<script>
(function () {
  const svg = document.getElementById('pareto');
  const out = document.createElement('pre');
  out.id = 'probe';
  if (!svg) { out.textContent = 'probe: no chart'; document.body.appendChild(out); return; }
  const box = (e) => e.getBoundingClientRect();
  const nums = Array.from(svg.querySelectorAll('text.ptl.n')).map(box);
  const dots = Array.from(svg.querySelectorAll('circle.pf')).map(box);
  const frame = box(svg);
  const hit = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  let bad = 0;
  nums.forEach((a, i) => {
    if (a.width <= 0 || a.left < frame.left || a.right > frame.right || a.top < frame.top ||
        a.bottom > frame.bottom) bad++;
    nums.forEach((b, j) => { if (j > i && hit(a, b)) bad++; });
    dots.forEach((d) => { if (hit(a, d)) bad++; });
  });
  out.textContent = 'probe: ' + nums.length + ' numbers, ' + dots.length + ' points, ' + bad +
                    ' overlaps, width ' + Math.round(frame.width);
  document.body.appendChild(out);
})();
</script>)";
  const std::size_t body = html.rfind("</body>");
  ASSERT_NE(body, std::string::npos);
  html.insert(body, probe);
  const fs::path page = dir_ / "pareto.html";
  write_file_atomic(page.string(), html);
  for (const int width : {1400, 800}) {
    const std::string tag = "pareto" + std::to_string(width);
    ASSERT_EQ(run(page, "--window-size=" + std::to_string(width) + ",1200 --dump-dom", tag), 0)
        << slurp(dir_ / (tag + ".err"));
    const std::string dom = slurp(dir_ / (tag + ".out"));
    const std::size_t at = dom.find("<pre id=\"probe\">");  // the script's result, not its text
    ASSERT_NE(at, std::string::npos) << width << " px:\n" << slurp(dir_ / (tag + ".err"));
    const std::size_t text = dom.find('>', at) + 1;
    const std::string line = dom.substr(text, dom.find('<', text) - text);
    EXPECT_NE(line.find("14 points"), std::string::npos) << width << " px: " << line;
    EXPECT_EQ(line.find("0 numbers"), std::string::npos) << width << " px: " << line;
    EXPECT_NE(line.find(", 0 overlaps"), std::string::npos) << width << " px: " << line;
  }
}

}  // namespace
}  // namespace pw
