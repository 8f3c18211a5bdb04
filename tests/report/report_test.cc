#include "report/report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "planner/schedules/generator.h"
#include "report/build.h"
#include "report/render_util.h"
#include "tests/report/test_input.h"

namespace pw {
namespace {

// Counts `needle` in `hay` between the opening tag starting with `open` and the next "</svg>".
int count_in_svg(const std::string& hay, const std::string& open, const std::string& needle) {
  const std::size_t b = hay.find(open);
  if (b == std::string::npos) return -1;
  const std::size_t e = hay.find("</svg>", b);
  int n = 0;
  for (std::size_t at = hay.find(needle, b); at != std::string::npos && at < e;
       at = hay.find(needle, at + 1))
    ++n;
  return n;
}

TEST(ReportRender, RenderingTwiceGivesIdenticalBytes) {
  const ReportInput a = testing::full_report_input();
  const ReportInput b = testing::full_report_input();
  for (const char* f : {"html", "markdown", "table", "json"})
    EXPECT_EQ(render_report(a, f), render_report(b, f)) << f;
}

// The Pareto chart numbers its front points (memory order, as the legend table under it); no
// two numbers overlap, none covers a front point, all stay inside the plot. A crowded front of
// 14 points, some nearly on top of each other (the default GPT-3 plan's front has 12), as the
// planner hands it to the report. Boxes are the renderer's own estimate (6.5 units a digit + 2,
// 11 high, text centred at x with its baseline 8.5 below the box top), in viewBox units, so the
// check holds at any width the SVG is drawn at (1400 px or 800 px: it scales as one).
TEST(ReportHtml, ParetoNumbersDoNotOverlapAndTheLegendNamesEveryFrontPoint) {
  ReportInput in = testing::full_report_input();
  in.pareto = testing::crowded_pareto();
  const std::string html = render_html(in);
  const std::size_t b = html.find(R"(<svg class="chart" id="pareto")");
  ASSERT_NE(b, std::string::npos);
  const std::string svg = html.substr(b, html.find("</svg>", b) - b);
  struct Box {
    double x, y, w, h;
  };
  std::vector<Box> nums, dots;
  auto attr = [](const std::string& tag, const std::string& name) {
    const std::size_t at = tag.find(" " + name + "=\"");
    return std::stod(tag.substr(at + name.size() + 3));
  };
  for (std::size_t at = svg.find(R"(<text class="ptl n")"); at != std::string::npos;
       at = svg.find(R"(<text class="ptl n")", at + 1)) {
    const std::string tag = svg.substr(at, svg.find("</text>", at) - at);
    const std::string digits = tag.substr(tag.find('>') + 1);
    const double w = 6.5 * static_cast<double>(digits.size()) + 2;
    nums.push_back({attr(tag, "x") - w / 2, attr(tag, "y") - 8.5, w, 11});
  }
  for (std::size_t at = svg.find(R"(<circle class="pf")"); at != std::string::npos;
       at = svg.find(R"(<circle class="pf")", at + 1)) {
    const std::string tag = svg.substr(at, svg.find('>', at) - at);
    dots.push_back({attr(tag, "cx") - 5, attr(tag, "cy") - 5, 10, 10});
  }
  ASSERT_EQ(dots.size(), 14u);
  EXPECT_GE(nums.size(), 10u);  // crowded points may go unnumbered; the legend still names them
  auto overlap = [](const Box& a, const Box& c) {
    return a.x < c.x + c.w && c.x < a.x + a.w && a.y < c.y + c.h && c.y < a.y + a.h;
  };
  for (std::size_t i = 0; i < nums.size(); ++i) {
    EXPECT_GE(nums[i].x, 66 - 1e-6);  // inside the plot: kL .. kW - kR, kT .. kH - kB
    EXPECT_LE(nums[i].x + nums[i].w, 620 - 24 + 1e-6);
    EXPECT_GE(nums[i].y, 18 - 1e-6);
    EXPECT_LE(nums[i].y + nums[i].h, 320 - 48 + 1e-6);
    for (std::size_t j = i + 1; j < nums.size(); ++j)
      EXPECT_FALSE(overlap(nums[i], nums[j])) << i << " " << j;
    for (const Box& d : dots) EXPECT_FALSE(overlap(nums[i], d)) << i;
  }
  // The legend: one row per front point, in memory order, with units.
  const std::size_t t = html.find(R"(<table class="pareto-legend">)");
  ASSERT_NE(t, std::string::npos);
  const std::string legend = html.substr(t, html.find("</table>", t) - t);
  int rows = 0;
  for (std::size_t at = legend.find("<tr><td>"); at != std::string::npos;
       at = legend.find("<tr><td>", at + 1))
    ++rows;
  EXPECT_EQ(rows, 14);
  EXPECT_LT(legend.find("config 0"), legend.find("config 13"));
  EXPECT_NE(legend.find(" s<"), std::string::npos);
  EXPECT_NE(legend.find(" GiB<"), std::string::npos);
}

TEST(ReportHtml, EachTimelineHoldsOneBlockPerPass) {
  const std::string html = render_html(testing::full_report_input());
  // p x m x passes: GPipe and 1F1B run F and BW (2 passes), the split 1F1B F, B and W (3);
  // its OPT steps are drawn but are not passes.
  EXPECT_EQ(count_in_svg(html, R"(<svg class="tl" id="tl-s0-gpipe")", R"(class="blk )"), 4 * 8 * 2);
  EXPECT_EQ(count_in_svg(html, R"(<svg class="tl" id="tl-s1-1f1b")", R"(class="blk )"), 4 * 8 * 2);
  EXPECT_EQ(count_in_svg(html, R"(<svg class="tl" id="tl-s2-1f1b-split")", R"(class="blk )"),
            4 * 8 * 3);
  EXPECT_EQ(count_in_svg(html, R"(<svg class="tl" id="tl-s2-1f1b-split")", R"(class="xblk O)"), 4);
  // The failed schedule has no timeline but its reason.
  EXPECT_EQ(html.find(R"(id="tl-s3-v-min")"), std::string::npos);
  EXPECT_NE(html.find("m must be at least 2p"), std::string::npos);
  // Memory strips: one per device.
  EXPECT_EQ(count_in_svg(html, R"(<svg class="mem" id="mem-s1-1f1b")", R"(class="area")"), 4);
}

TEST(ReportHtml, IsSelfContained) {
  const std::string html = render_html(testing::full_report_input());
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("https:"), std::string::npos);
  // The only URL is the SVG namespace (an identifier, never fetched).
  std::string rest = html;
  for (std::size_t at = rest.find("http://www.w3.org/2000/svg"); at != std::string::npos;
       at = rest.find("http://www.w3.org/2000/svg"))
    rest.erase(at, 26);
  EXPECT_EQ(rest.find("http:"), std::string::npos);
  for (std::size_t at = html.find("url("); at != std::string::npos; at = html.find("url(", at + 1))
    EXPECT_EQ(html[at + 4], '#') << html.substr(at, 30);
}

TEST(ReportSummary, MarksTheBestAndNotTies) {
  const ReportInput in = testing::full_report_input();
  const auto cols = report_detail::summary_columns(in);
  ASSERT_GE(cols.size(), 4u);
  // p=4, m=8, F=B=W=1: GPipe and 1F1B take (m+p-1)(F+B+W) = 33 ms. The split 1F1B's backward
  // chain crosses devices with B (1 ms) instead of BW (2 ms): 3 ms of forward warm-up, 3 ms
  // waiting for B to come back to device 0, then 24 ms of work: 30 ms.
  EXPECT_EQ(in.schedules[0].iteration(), millis_to_ps(33));
  EXPECT_EQ(in.schedules[1].iteration(), millis_to_ps(33));
  EXPECT_EQ(in.schedules[2].iteration(), millis_to_ps(30));
  const report_detail::Column& time = cols[0];
  EXPECT_EQ(time.header, "iteration time");
  EXPECT_EQ(time.best, (std::vector<bool>{false, false, true, false}));
  EXPECT_EQ(time.text[3], "—");
  for (const auto& c : cols) {
    if (c.header.rfind("peak activations", 0) != 0) continue;
    // GPipe holds m = 8, 1F1B p = 4 on device 0: both 1F1B variants tie for best.
    EXPECT_EQ(c.text[0], "8");
    EXPECT_EQ(c.text[1], "4");
    EXPECT_EQ(c.best, (std::vector<bool>{false, true, true, false}));
  }
}

TEST(ReportMarkdown, ShowsTablesTimelinesAndTheFailure) {
  const std::string md = render_markdown(testing::full_report_input());
  EXPECT_NE(md.find("| schedule | iteration time |"), std::string::npos) << md.substr(0, 400);
  EXPECT_NE(md.find("**30 ms** ★"), std::string::npos);
  EXPECT_NE(md.find("Could not be built: m must be at least 2p"), std::string::npos);
  EXPECT_NE(md.find("```text"), std::string::npos);
  EXPECT_NE(md.find("| iteration | 1 | 33 ms | 36.3 ms | -9.1% |"), std::string::npos);
}

TEST(TextTimeline, OneFOneBOnTwoDevicesMatchesTheHandSchedule) {
  // p=2, m=2, F=1, BW=2. dev0: F0 [0,1] F1 [1,2], BW0 waits for dev1's BW0 [2,4] -> [4,6],
  // BW1 [7,9]; dev1: F0 [1,2] BW0 [2,4] F1 [4,5] BW1 [5,7]. Makespan 9.
  GeneratorParams gp;
  gp.p = 2;
  gp.m = 2;
  Schedule s = generate_schedule(default_registry(), "1f1b", gp);
  EvalResult r = evaluate(s, make_uniform_cost_table(s.placement, UniformCosts{1, 1, 1, 0, 0}));
  ASSERT_EQ(r.makespan, 9);
  const std::string t = report_detail::text_timeline(s, r.start, r.end, 9, 80);
  EXPECT_NE(t.find("  dev0 FF..BB.BB\n"), std::string::npos) << t;
  EXPECT_NE(t.find("  dev1 .FBBFBB..\n"), std::string::npos) << t;
}

TEST(ReportJson, CarriesFiguresAndTimes) {
  const auto j = nlohmann::json::parse(render_json(testing::full_report_input()));
  ASSERT_EQ(j["schedules"].size(), 4u);
  const auto& s = j["schedules"][1];
  EXPECT_EQ(s["name"], "1f1b");
  EXPECT_EQ(s["iteration_time_ps"].get<std::int64_t>(), millis_to_ps(33));
  EXPECT_DOUBLE_EQ(s["bubble_rate"].get<double>(), 9.0 / 33.0);
  EXPECT_EQ(s["actions"].size(), 64u);
  EXPECT_EQ(s["devices"][0]["peak_activation"].get<double>(), 4.0);
  EXPECT_FALSE(j["schedules"][3]["ok"].get<bool>());
  EXPECT_EQ(j["schedules"][3]["error"], "m must be at least 2p");
  EXPECT_EQ(j["curves"][0]["points"].size(), 5u);
  EXPECT_EQ(j["pareto"].size(), 3u);
  EXPECT_NEAR(j["measured"]["iteration"]["error"].get<double>(), -1.0 / 11.0, 1e-9);
}

TEST(BuildReports, UnknownNameListsTheValidOnes) {
  GeneratorParams gp;
  try {
    build_schedule_reports(default_registry(), {"1f1b", "zb-h9"}, gp, [](const Placement& pl) {
      return make_uniform_cost_table(pl, UniformCosts{1, 1, 1, 0, 0});
    });
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("--schedules"), std::string::npos) << msg;
    EXPECT_NE(msg.find("zb-h9"), std::string::npos) << msg;
    EXPECT_NE(msg.find("valid: "), std::string::npos) << msg;
    EXPECT_NE(msg.find("1f1b"), std::string::npos) << msg;
  }
}

TEST(BuildReports, GeneratorRejectionBecomesAnEntry) {
  GeneratorParams gp;
  gp.p = 0;  // rejected by generate_schedule
  auto out = build_schedule_reports(default_registry(), {"1f1b"}, gp, [](const Placement& pl) {
    return make_uniform_cost_table(pl, UniformCosts{1, 1, 1, 0, 0});
  });
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].ok());
  EXPECT_NE(out[0].error.find("--pp"), std::string::npos) << out[0].error;
}

TEST(LayerScaledCosts, AVChunkCostsHalfAStage) {
  // V placement: 2p chunks of num_layers / 2p layers each = half a 1F1B stage.
  const Placement pl = v_placement(4, 8);
  const CostTable t = layer_scaled_cost_table(pl, UniformCosts{1000, 2000, 3000, 0, 77});
  for (int s = 0; s < 8; ++s) {
    EXPECT_EQ(t.time(s, ActionKind::kF), 500);
    EXPECT_EQ(t.time(s, ActionKind::kB), 1000);
    EXPECT_EQ(t.time(s, ActionKind::kW), 1500);
    EXPECT_EQ(t.time(s, ActionKind::kBW), 2500);
    EXPECT_EQ(t.comm[s], 77);
  }
}

TEST(RenderReport, UnknownFormatNamesTheFlag) {
  try {
    render_report(ReportInput{}, "pdf");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--format: unknown format 'pdf'; expected html, markdown, table or json");
  }
}

TEST(ReportRender, EmptyInputStillRenders) {
  const ReportInput in;
  EXPECT_NE(render_html(in).find("</html>"), std::string::npos);
  EXPECT_NE(render_markdown(in).find("# pipewright schedule comparison"), std::string::npos);
  EXPECT_NO_THROW(nlohmann::json::parse(render_json(in)));
}

}  // namespace
}  // namespace pw
