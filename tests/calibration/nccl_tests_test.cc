// nccl-tests import: the shipped published logs parse, the fitted profile reproduces them, a
// fit recovers the constants a synthetic log was written with, and bad logs are one-line errors.
#include "calibration/nccl_tests.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/error.h"
#include "core/file_io.h"
#include "hwmodels/collectives.h"
#include "hwmodels/profile.h"

namespace pw::calibration {
namespace {

const std::string kRef = std::string(PW_SOURCE_DIR) + "/../shared/reference/nccl-tests/";

std::string ref_or_skip(const std::string& name) {
  try {
    return read_file(kRef + name);
  } catch (const ConfigError&) {
    return "";
  }
}

// nccl-tests' row layout for one size: out-of-place and in-place columns alike.
std::string row(double bytes, double seconds, double busbw) {
  return fmt::format(
      "{:>12.0f} {:>12.0f} float sum -1 {:>8.2f} {:>7.2f} {:>7.2f} 0 {:>8.2f} "
      "{:>7.2f} {:>7.2f} 0\n",
      bytes, bytes / 4, seconds * 1e6, bytes / seconds * 1e-9, busbw * 1e-9, seconds * 1e6,
      bytes / seconds * 1e-9, busbw * 1e-9);
}

TEST(NcclTests, ShippedDgxH100LogParsesAndTheFitReproducesIt) {
  const std::string text = ref_or_skip("dgx-h100-8gpu-all_reduce_perf.txt");
  if (text.empty()) GTEST_SKIP() << "shared/reference not present";
  NcclTestsHints h;
  h.ranks = 8;  // the published excerpt has no '# Using devices' lines
  h.nodes = 1;
  const NcclTestsLog log = parse_nccl_tests(text, "dgx-h100-8gpu-all_reduce_perf.txt", h);
  EXPECT_EQ(log.collective, "all_reduce");  // from the file name
  // 8 B to 16 GiB by factors of 2: 2^3 .. 2^34, 32 rows.
  ASSERT_EQ(log.rows.size(), 32u);
  EXPECT_EQ(log.rows.front().bytes, 8);
  EXPECT_EQ(log.rows.back().bytes, 17179869184.0);
  // The faster of out-of-place 62648 us and in-place 62636 us.
  EXPECT_DOUBLE_EQ(log.rows.back().time_s, 62636.0e-6);
  const hw::HardwareProfile base = hw::resolve_profile("dgx-h100", "", "", "");
  const NcclTestsFit fit = fit_nccl_tests({log}, base);
  ASSERT_EQ(fit.reports.size(), 1u);
  const NcclTestsReport& r = fit.reports[0];
  ASSERT_TRUE(r.corrected);
  // The model alone (its constants are what carries to other group sizes): over 9 orders of
  // magnitude of size the fitted protocols follow the log (R^2 of log time, recomputed here
  // from the model-alone rows); the largest message is exact (the bandwidth is fitted there);
  // at >= 1 MiB the median row is within 5%. The fit keeps the split of the sizes whose worst
  // row at >= 1 MiB errs least; the squared-error pick it replaced left 2 MiB at +20% (2 MiB
  // sits 16% above the chord of 1 and 4 MiB, a kink three lines of which one also serves the
  // sub-MiB rows cannot follow). The bound below is the regression guard between the two picks
  // (5.5% and 20.1% on this log), not an expected value.
  double mean = 0, ss_res = 0, ss_tot = 0;
  for (const NcclTestsPrediction& e : r.rows) mean += std::log(e.measured_busbw);
  mean /= static_cast<double>(r.rows.size());
  for (const NcclTestsPrediction& e : r.rows) {
    ss_res += std::pow(std::log(e.model_busbw) - std::log(e.measured_busbw), 2);
    ss_tot += std::pow(std::log(e.measured_busbw) - mean, 2);
  }
  EXPECT_GT(1.0 - ss_res / ss_tot, 0.99) << nccl_tests_report(fit);
  EXPECT_NEAR(r.rows.back().model_error_pct, 0.0, 1.0);
  std::vector<double> large;
  for (const NcclTestsPrediction& e : r.rows)
    if (e.bytes >= 1024.0 * 1024) large.push_back(std::abs(e.model_error_pct));
  std::sort(large.begin(), large.end());
  EXPECT_LT(large[large.size() / 2], 5.0) << nccl_tests_report(fit);
  EXPECT_LT(r.worst_large_model_pct, 10.0) << nccl_tests_report(fit);
  EXPECT_EQ(fit.profile.collective_protocols.size(), 3u) << nccl_tests_report(fit);
  // With the log's size correction the profile gives the log's own times back at every size
  // (the target: within 5% at >= 1 MiB; here to the picosecond rounding of the steps).
  EXPECT_LT(r.worst_large_pct, 0.01) << nccl_tests_report(fit);
  EXPECT_LT(r.worst_small_pct, 0.01) << nccl_tests_report(fit);
  // The profile it writes loads, and prices every row as the fit did (the correction's six
  // significant digits: within 1e-5).
  const std::string yaml =
      nccl_tests_profile_yaml(fit, read_file(base.file), base.file, "dgx-h100-nccl", {log.file});
  const hw::HardwareProfile back = hw::parse_profile(yaml, "fitted.yaml");
  EXPECT_EQ(back.collective_protocols.size(), 3u);
  ASSERT_EQ(back.collective_size_corrections.size(), 1u);
  EXPECT_FALSE(back.collective_size_corrections[0].multi_node);
  // Provenance: the log, its collective and its group (nccl-tests output carries no date).
  EXPECT_EQ(back.collective_size_corrections[0].ranks, 8);
  EXPECT_EQ(back.collective_size_corrections[0].nodes, 1);
  EXPECT_NE(yaml.find("dgx-h100-8gpu-all_reduce_perf.txt (all_reduce, 8 ranks on 1 node)"),
            std::string::npos)
      << yaml;
  for (const NcclTestsRow& row : log.rows) {
    const double t = ps_to_seconds(nccl_tests_model_time(back, log.kind, 8, 1, row.bytes));
    EXPECT_NEAR(t, row.time_s, 1e-5 * row.time_s) << row.bytes;
  }
  // Fitted figures are written to six decimals at most (not as 0.80000000000000004): no number
  // in the file carries seven or more digits after its point.
  EXPECT_FALSE(std::regex_search(yaml, std::regex("[0-9]\\.[0-9]{7,}"))) << yaml;
  // Off: the model alone, as the report's model-alone column.
  NcclTestsOptions off;
  off.size_corrections = false;
  const NcclTestsFit plain = fit_nccl_tests({log}, base, off);
  EXPECT_FALSE(plain.reports[0].corrected);
  EXPECT_TRUE(plain.profile.collective_size_corrections.empty());
  EXPECT_DOUBLE_EQ(plain.reports[0].worst_large_pct, r.worst_large_model_pct);
}

// Worst |busbw error| at >= 1 MiB of `log`'s odd rows (the last kept in training) when the
// profile is fitted on the even ones, with or without size corrections.
double held_out_worst(const NcclTestsLog& log, const hw::HardwareProfile& base, bool corrections,
                      std::string* report) {
  NcclTestsLog train = log, held = log;
  train.rows.clear();
  held.rows.clear();
  for (std::size_t i = 0; i < log.rows.size(); ++i)
    (i % 2 == 0 || i + 1 == log.rows.size() ? train : held).rows.push_back(log.rows[i]);
  NcclTestsOptions o;
  o.size_corrections = corrections;
  const NcclTestsFit fit = fit_nccl_tests({train}, base, o);
  *report = nccl_tests_report(fit);
  double worst = 0;
  for (const NcclTestsRow& row : held.rows) {
    if (row.bytes < 1024.0 * 1024) continue;
    const double t = ps_to_seconds(
        nccl_tests_model_time(fit.profile, log.kind, log.ranks, log.nodes, row.bytes));
    worst = std::max(worst, std::abs(row.time_s / t - 1.0) * 100);
  }
  return worst;
}

TEST(NcclTests, FitGeneralisesToSizesItDidNotSee) {
  // Fitted on every other size, predicted on the rest (the >= 1 MiB rows).
  const std::string text = ref_or_skip("dgx-h100-8gpu-all_reduce_perf.txt");
  if (text.empty()) GTEST_SKIP() << "shared/reference not present";
  const NcclTestsLog log = parse_nccl_tests(text, "all_reduce_perf.txt", {"", 8, 1});
  const hw::HardwareProfile base = hw::resolve_profile("dgx-h100", "", "", "");
  std::string rep_model, rep_corr;
  const double model = held_out_worst(log, base, false, &rep_model);
  const double corr = held_out_worst(log, base, true, &rep_corr);
  // The model alone: the squared-error split's bound (it left 20.1% on the fitted rows and
  // about 14% here; the worst-row split fits its own rows closer, and these no closer). The
  // corrections interpolated between the training sizes do not help on this log (14.0% alone,
  // 15.3% corrected on 2026-11-27): its misses are single-size kinks (2 MiB sits 16% above the
  // chord of its neighbours), which a correction measured at the neighbours cannot know. The
  // same guard holds for both.
  EXPECT_LT(model, 25.0) << rep_model;
  EXPECT_LT(corr, 25.0) << rep_corr;
  std::printf("HELDOUT dgx model %.2f corrected %.2f\n", model, corr);
}

TEST(NcclTests, MultiNodeTcpxoLogIsReproducedWithItsSizeCorrection) {
  // GCP A3 Mega (GPUDirect-TCPXO), 2 nodes x 8 H100: the model alone gets the ends (NIC
  // bandwidth from the largest message, latency from the smallest) but not the slow mid-size
  // ramp of the network transport (2.8x at 16 MiB: NCCL's ring over TCPXO is not the model's
  // hierarchical all-reduce). The multi-node size correction carries it: every row within the
  // issue's 5% (to rounding), and fitted on every other size, the held-out rows >= 1 MiB
  // closer than the model alone.
  const std::string text = ref_or_skip("h100-2node-16gpu-tcpxo-all_reduce_perf.txt");
  if (text.empty()) GTEST_SKIP() << "shared/reference not present";
  const NcclTestsLog log =
      parse_nccl_tests(text, "h100-2node-16gpu-tcpxo-all_reduce_perf.txt", {"", 16, 2});
  const hw::HardwareProfile base = hw::resolve_profile("dgx-h100", "", "", "");
  const NcclTestsFit fit = fit_nccl_tests({log}, base);
  const NcclTestsReport& r = fit.reports[0];
  ASSERT_TRUE(r.corrected);
  EXPECT_GT(r.worst_large_model_pct, 100.0) << nccl_tests_report(fit);
  EXPECT_LT(r.worst_large_pct, 0.01) << nccl_tests_report(fit);
  EXPECT_LT(r.worst_small_pct, 0.01) << nccl_tests_report(fit);
  ASSERT_EQ(fit.profile.collective_size_corrections.size(), 1u);
  EXPECT_TRUE(fit.profile.collective_size_corrections[0].multi_node);
  // One node's all-reduce keeps the model alone: the correction is the multi-node one.
  EXPECT_EQ(nccl_tests_model_time(fit.profile, log.kind, 8, 1, 16777216.0),
            nccl_tests_model_time(base, log.kind, 8, 1, 16777216.0));
  std::string rep_model, rep_corr;
  const double model = held_out_worst(log, base, false, &rep_model);
  const double corr = held_out_worst(log, base, true, &rep_corr);
  // 276% alone and 31% corrected on 2026-11-27 (the worst held-out row is 16 MiB, where the
  // log jumps from one regime to the other between its neighbours): at least 5x closer.
  EXPECT_LT(corr, model / 5) << rep_corr;
  std::printf("HELDOUT tcpxo model %.2f corrected %.2f\n", model, corr);
}

TEST(NcclTests, RefittingDropsTheCorrectionsTheFitInvalidates) {
  // A profile with single- and multi-node corrections: a multi-node log refits the NIC, so the
  // multi-node correction is replaced and the single-node one kept; a single-node log refits
  // the protocols, which every correction was measured against, so both go (and are said to).
  const std::string one = ref_or_skip("dgx-h100-8gpu-all_reduce_perf.txt");
  const std::string two = ref_or_skip("h100-2node-16gpu-tcpxo-all_reduce_perf.txt");
  if (one.empty() || two.empty()) GTEST_SKIP() << "shared/reference not present";
  const NcclTestsLog l1 = parse_nccl_tests(one, "all_reduce_perf.txt", {"", 8, 1});
  const NcclTestsLog l2 = parse_nccl_tests(two, "all_reduce_perf.txt", {"", 16, 2});
  const hw::HardwareProfile base = hw::resolve_profile("dgx-h100", "", "", "");
  hw::HardwareProfile both = fit_nccl_tests({l1, l2}, base).profile;
  ASSERT_EQ(both.collective_size_corrections.size(), 2u);
  hw::CollectiveSizeCorrection extra;
  extra.kind = hw::CollectiveKind::kAllToAll;
  extra.multi_node = true;
  extra.table = {{8}, {3.0}};
  both.collective_size_corrections.push_back(extra);
  const NcclTestsFit multi = fit_nccl_tests({l2}, both);
  ASSERT_EQ(multi.profile.collective_size_corrections.size(), 2u);
  EXPECT_FALSE(multi.profile.collective_size_corrections[0].multi_node);
  EXPECT_EQ(multi.profile.collective_size_corrections[1].kind, hw::CollectiveKind::kAllReduce);
  const std::string notes = nccl_tests_report(multi);
  EXPECT_NE(notes.find("2 size correction(s) are dropped"), std::string::npos) << notes;
  const NcclTestsFit single = fit_nccl_tests({l1}, both);
  ASSERT_EQ(single.profile.collective_size_corrections.size(), 1u);
  EXPECT_FALSE(single.profile.collective_size_corrections[0].multi_node);
  EXPECT_NE(nccl_tests_report(single).find("3 size correction(s) are dropped"), std::string::npos);
}

TEST(NcclTests, FitRecoversTheConstantsASyntheticLogWasWrittenWith) {
  // A log written by the model itself from known constants (NVLS efficiency 0.70, step latency
  // 3 us, protocols LL +0 at 0.45 of the bandwidth, LL128 +0.6 us per step at 0.90, Simple +2 us
  // at 1.0: lower latency for less bandwidth, as NCCL's) is fitted from a base with different
  // ones: the fit gives the constants back.
  hw::HardwareProfile truth = hw::resolve_profile("dgx-h100", "", "", "");
  truth.node.nvls_efficiency = 0.70;
  truth.collective_step_latency = seconds_to_ps(3e-6);
  truth.collective_protocols = {{"LL", 0, 0.45},
                                {"LL128", seconds_to_ps(0.6e-6), 0.90},
                                {"Simple", seconds_to_ps(2e-6), 1.0}};
  std::string text = "# Collective test starting: all_reduce_perf\n";
  const double f = hw::bus_factor(hw::CollectiveKind::kAllReduce, 8);
  for (double b = 8; b <= 8.0 * (1ull << 31); b *= 2) {
    const double t =
        ps_to_seconds(nccl_tests_model_time(truth, hw::CollectiveKind::kAllReduce, 8, 1, b));
    text += row(b, t, b / t * f);
  }
  const NcclTestsLog log = parse_nccl_tests(text, "synthetic.txt", {"", 8, 1});
  hw::HardwareProfile base = hw::resolve_profile("dgx-h100", "", "", "");
  base.collective_step_latency = seconds_to_ps(1e-6);
  const NcclTestsFit fit = fit_nccl_tests({log}, base);
  const hw::HardwareProfile& p = fit.profile;
  EXPECT_NEAR(p.node.nvls_efficiency, 0.70, 0.01 * 0.70);
  ASSERT_EQ(p.collective_protocols.size(), 3u) << nccl_tests_report(fit);
  const double want_eff[] = {0.45, 0.90, 1.0};
  const double want_lat_us[] = {0.0, 0.6, 2.0};
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(p.collective_protocols[i].bandwidth_efficiency, want_eff[i], 0.02 * want_eff[i])
        << i << "\n"
        << nccl_tests_report(fit);
    // The printed times carry 0.01 us: latencies come back to about that.
    EXPECT_NEAR(ps_to_seconds(p.collective_protocols[i].step_latency) * 1e6, want_lat_us[i], 0.05)
        << i;
  }
  EXPECT_NEAR(ps_to_seconds(p.collective_step_latency) * 1e6, 3.0, 0.05);
  EXPECT_LT(fit.reports[0].worst_large_pct, 0.5);
}

TEST(NcclTests, MultiNodeLogFitsTheNic) {
  const std::string text = ref_or_skip("h100-2node-16gpu-tcpxo-all_reduce_perf.txt");
  if (text.empty()) GTEST_SKIP() << "shared/reference not present";
  const NcclTestsLog log =
      parse_nccl_tests(text, "h100-2node-16gpu-tcpxo-all_reduce_perf.txt", {"", 16, 2});
  const NcclTestsFit fit = fit_nccl_tests({log}, hw::resolve_profile("dgx-h100", "", "", ""));
  const double t =
      ps_to_seconds(nccl_tests_model_time(fit.profile, log.kind, 16, 2, log.rows.back().bytes));
  EXPECT_NEAR(t, log.rows.back().time_s, 0.01 * log.rows.back().time_s) << nccl_tests_report(fit);
  EXPECT_LT(fit.profile.node.nic.efficiency, 1.0);
}

TEST(NcclTests, RanksAndHostsComeFromTheUsingDevicesLines) {
  std::string text = "# Collective test starting: all_gather_perf\n#\n# Using devices\n";
  for (int r = 0; r < 16; ++r)
    text += fmt::format(
        "#  Rank {:2d} Group  0 Pid {:6d} on {} device {:2d} [0x1b] NVIDIA H100 "
        "80GB HBM3\n",
        r, 1000 + r, r < 8 ? "node-a" : "node-b", r % 8);
  text += row(1 << 20, 100e-6, 9e9) + row(1 << 21, 150e-6, 13e9);
  const NcclTestsLog log = parse_nccl_tests(text, "x.txt");
  EXPECT_EQ(log.collective, "all_gather");
  EXPECT_EQ(log.kind, hw::CollectiveKind::kAllGather);
  EXPECT_EQ(log.ranks, 16);
  EXPECT_EQ(log.nodes, 2);
}

// The same log as nccl-tests' `-J` writes it (src/util.cu, version 2.19: args, config, devices
// of two hosts, results with out-of-place and in-place records): the JSON reader gives the text
// reader's rows, collective, ranks and nodes, and the fit is the same.
TEST(NcclTests, JsonOutputReadsAsTheTextForm) {
  const std::string text = ref_or_skip("dgx-h100-8gpu-all_reduce_perf.txt");
  if (text.empty()) GTEST_SKIP() << "shared/reference not present";
  const NcclTestsLog t = parse_nccl_tests(text, "dgx-h100-8gpu-all_reduce_perf.txt", {"", 8, 1});
  nlohmann::ordered_json doc;
  doc["version"] = 1;
  doc["start_time"] = "2026-11-24 10:00:00";
  doc["args"] = {"./build/all_reduce_perf", "-b", "8", "-e", "16G", "-f", "2", "-J", "x.json"};
  doc["env"] = nlohmann::json::array();
  doc["nccl_version"] = 22703;
  doc["config"] = {{"nthreads", 1}, {"ngpus", 1}, {"minimum_bytes", 8}};
  doc["devices"] = nlohmann::json::array();
  for (int r = 0; r < 8; ++r)
    doc["devices"].push_back({{"rank", r},
                              {"group", 0},
                              {"pid", 100 + r},
                              {"hostname", "dgx-a"},
                              {"device", r},
                              {"device_hex", "0x1b"},
                              {"device_info", "NVIDIA H100 80GB HBM3"}});
  doc["results"] = nlohmann::json::array();
  for (const NcclTestsRow& r : t.rows) {
    const double us = r.time_s * 1e6;
    nlohmann::ordered_json rec;
    rec["size"] = static_cast<long long>(r.bytes);
    rec["count"] = static_cast<long long>(r.bytes / 4);
    rec["type"] = "float";
    rec["redop"] = "sum";
    rec["root"] = "    -1";
    // Out of place 1% slower than in place: the reader keeps the faster.
    rec["out_of_place"] = {{"time", us * 1.01}, {"alg_bw", 0.0}, {"bus_bw", 0.0}, {"nwrong", 0.0}};
    rec["in_place"] = {{"time", us}, {"alg_bw", 0.0}, {"bus_bw", 0.0}, {"nwrong", 0.0}};
    rec["actual_iterations"] = 20;
    rec["experiment_name"] = "";
    doc["results"].push_back(rec);
  }
  doc["out_of_bounds"] = {{"count", 0}, {"okay", "true"}};
  const NcclTestsLog j = parse_nccl_tests(doc.dump(), "x.json");
  EXPECT_EQ(j.collective, "all_reduce");  // from args[0]
  EXPECT_EQ(j.ranks, 8);                  // from devices
  EXPECT_EQ(j.nodes, 1);                  // one hostname
  ASSERT_EQ(j.rows.size(), t.rows.size());
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    EXPECT_EQ(j.rows[i].bytes, t.rows[i].bytes);
    EXPECT_NEAR(j.rows[i].time_s, t.rows[i].time_s, 1e-12 * t.rows[i].time_s + 1e-15);
  }
  const hw::HardwareProfile base = hw::resolve_profile("dgx-h100", "", "", "");
  const NcclTestsFit a = fit_nccl_tests({t}, base), b = fit_nccl_tests({j}, base);
  EXPECT_NEAR(a.reports[0].worst_large_pct, b.reports[0].worst_large_pct, 1e-6);
  // Two hosts: two nodes; a record without a time or results that are not a list are errors
  // naming the key.
  for (int r = 4; r < 8; ++r) doc["devices"][r]["hostname"] = "dgx-b";
  EXPECT_EQ(parse_nccl_tests(doc.dump(), "x.json").nodes, 2);
  nlohmann::ordered_json bad = doc;
  bad["results"][3]["in_place"]["time"] = "nan";
  bad["results"][3]["out_of_place"] = nullptr;
  std::string e;
  try {
    parse_nccl_tests(bad.dump(), "x.json");
  } catch (const ConfigError& err) {
    e = err.what();
  }
  EXPECT_NE(e.find("x.json: results[3].in_place.time"), std::string::npos) << e;
  bad = doc;
  bad["results"] = "none";
  e.clear();
  try {
    parse_nccl_tests(bad.dump(), "x.json");
  } catch (const ConfigError& err) {
    e = err.what();
  }
  EXPECT_NE(e.find("x.json: results"), std::string::npos) << e;
}

std::string error_of(const std::string& text, const std::string& file, NcclTestsHints h = {}) {
  try {
    parse_nccl_tests(text, file, h);
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    return e.what();
  }
  return "";
}

TEST(NcclTests, BadLogsAreOneLineErrors) {
  const std::string good = row(1 << 20, 100e-6, 18e9) + row(1 << 21, 150e-6, 24e9);
  const NcclTestsHints h{"", 8, 1};
  // Truncated mid-row.
  std::string e =
      error_of(good + "     4194304       1048576     float     sum", "all_reduce_perf.txt", h);
  EXPECT_NE(e.find("line 3"), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  // An unknown collective.
  e = error_of("# Collective test starting: broadcast_perf\n" + good, "log.txt", h);
  EXPECT_NE(e.find("'broadcast_perf' is not a collective"), std::string::npos) << e;
  // No collective at all.
  e = error_of(good, "log.txt", h);
  EXPECT_NE(e.find("--log-collective"), std::string::npos) << e;
  // No rows.
  e = error_of("# nThread 1 nGpus 1\n", "all_reduce_perf.txt", h);
  EXPECT_NE(e.find("no measurement rows"), std::string::npos) << e;
  // No rank count.
  e = error_of(good, "all_reduce_perf.txt");
  EXPECT_NE(e.find("--log-ranks"), std::string::npos) << e;
  // Sizes out of order.
  e = error_of(row(1 << 21, 150e-6, 24e9) + row(1 << 20, 100e-6, 18e9), "all_reduce_perf.txt", h);
  EXPECT_NE(e.find("ascending"), std::string::npos) << e;
  // One size cannot give a bandwidth and protocols: refused, not fitted from nothing.
  const NcclTestsLog one = parse_nccl_tests(row(1 << 20, 100e-6, 18e9), "all_reduce_perf.txt", h);
  EXPECT_THROW(fit_nccl_tests({one}, hw::resolve_profile("dgx-h100", "", "", "")), ConfigError);
  // More ranks per node than the base profile's GPUs.
  const NcclTestsLog big = parse_nccl_tests(good, "all_reduce_perf.txt", {"", 16, 1});
  EXPECT_THROW(fit_nccl_tests({big}, hw::resolve_profile("dgx-h100", "", "", "")), ConfigError);
}

}  // namespace
}  // namespace pw::calibration
