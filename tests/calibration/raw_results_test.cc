// Raw results JSON: round trip, and one clear error per kind of bad input.
#include "calibration/raw_results.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace pw::calibration {
namespace {

RawResults sample() {
  RawResults r;
  r.provenance.backend = "cuda";
  r.provenance.device = "NVIDIA H100 80GB HBM3";
  r.provenance.driver = "13.0";
  r.provenance.date = "2026-01-01T00:00:00Z";
  r.provenance.compute_units = 132;
  r.provenance.memory_bytes = 8e10;
  r.provenance.peak_flops = {{"bf16", 9.89e14}};
  r.launch_latency_s = 2.5e-6;
  r.gemms.push_back({"qkv", "bf16", 2048, 4608, 12288, 1, {1e-3, 0.9e-3, 1.2e-3, 10}});
  r.memory.push_back({"copy", "fp32", 1e9, {4e-4, 3.9e-4, 4.1e-4, 20}});
  r.transfers.push_back({"h2d_pinned", 1e8, {2e-3, 2e-3, 2e-3, 5}});
  r.collectives.push_back({"nccl", "all_reduce", 8, 1e9, {5e-3, 5e-3, 6e-3, 5}, 0});
  return r;
}

TEST(RawResults, RoundTripsThroughJson) {
  RawResults r = sample();
  std::string text = raw_to_json(r);
  RawResults back = raw_from_json(text, "raw.json");
  EXPECT_EQ(back.provenance.device, r.provenance.device);
  EXPECT_EQ(back.provenance.peak_flops, r.provenance.peak_flops);
  ASSERT_EQ(back.gemms.size(), 1u);
  EXPECT_EQ(back.gemms[0].k, 12288);
  EXPECT_DOUBLE_EQ(back.gemms[0].time.median_s, 1e-3);
  EXPECT_EQ(back.collectives[0].ranks, 8);
  EXPECT_EQ(raw_to_json(back), text);  // deterministic and lossless
}

TEST(RawResults, NcclColumnsAreWritten) {
  auto j = nlohmann::json::parse(raw_to_json(sample()));
  // 1 GB in 5 ms: algbw 200 GB/s, busbw 200 * 2 * 7 / 8 = 350 GB/s.
  EXPECT_DOUBLE_EQ(j["collectives"][0]["algbw_gbps"].get<double>(), 200.0);
  EXPECT_DOUBLE_EQ(j["collectives"][0]["busbw_gbps"].get<double>(), 350.0);
}

void expect_error(const std::string& text, const std::string& key) {
  try {
    raw_from_json(text, "bad.json");
    FAIL() << "expected ConfigError for " << key;
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.file(), "bad.json");
    EXPECT_EQ(e.key(), key) << e.what();
  }
}

TEST(RawResults, LayerPassesRoundTripAndAreOptional) {
  RawResults r = sample();
  r.layers.push_back({"backward_input", 160, 5, 128, {6e-3, 5.9e-3, 6.5e-3, 9}});
  std::string text = raw_to_json(r);
  RawResults back = raw_from_json(text, "raw.json");
  ASSERT_EQ(back.layers.size(), 1u);
  EXPECT_EQ(back.layers[0].pass, "backward_input");
  EXPECT_EQ(back.layers[0].heads, 5);
  EXPECT_EQ(raw_to_json(back), text);
  // Files written before layer passes were measured have no "layers" key at all.
  EXPECT_EQ(nlohmann::json::parse(raw_to_json(sample())).count("layers"), 0u);
  auto j = nlohmann::json::parse(text);
  j["layers"][0]["pass"] = "backward";
  expect_error(j.dump(), "layers[0].pass");
  j = nlohmann::json::parse(text);
  j["layers"][0]["heads"] = 3;  // does not divide 160
  expect_error(j.dump(), "layers[0].hidden");
}

TEST(RawResults, CoreProbesRoundTripAndNameTheirCore) {
  RawResults r = sample();
  r.provenance.backend = "cpu";
  r.core_probes = {{0, {2.33e-3, 2.3e-3, 2.4e-3, 5}}, {1, {1.87e-3, 1.8e-3, 1.9e-3, 5}}};
  r.pinned_core = 0;
  const std::string text = raw_to_json(r);
  const RawResults back = raw_from_json(text, "raw.json");
  ASSERT_EQ(back.core_probes.size(), 2u);
  EXPECT_EQ(back.core_probes[1].core, 1);
  EXPECT_DOUBLE_EQ(back.core_probes[0].time.median_s, 2.33e-3);
  EXPECT_EQ(back.pinned_core, 0);
  EXPECT_EQ(raw_to_json(back), text);
  // Files written before cores were probed (and GPU files) have neither key: nothing pinned.
  const auto plain = nlohmann::json::parse(raw_to_json(sample()));
  EXPECT_EQ(plain.count("core_probes"), 0u);
  EXPECT_EQ(plain.count("pinned_core"), 0u);
  EXPECT_EQ(raw_from_json(plain.dump(), "raw.json").pinned_core, -1);
  auto j = nlohmann::json::parse(text);
  j["pinned_core"] = 5;  // not a probed core
  expect_error(j.dump(), "pinned_core");
  j["pinned_core"] = 4294967296LL;  // would wrap to core 0 as an int
  expect_error(j.dump(), "pinned_core");
  j = nlohmann::json::parse(text);
  j.erase("pinned_core");
  expect_error(j.dump(), "pinned_core");
  j = nlohmann::json::parse(text);
  j["core_probes"][1]["core"] = 0;  // the same core twice
  expect_error(j.dump(), "core_probes[1].core");
  j = nlohmann::json::parse(text);
  j["core_probes"][0]["core"] = -1;
  expect_error(j.dump(), "core_probes[0].core");
}

TEST(RawResults, MissingFieldNamesIt) {
  auto j = nlohmann::json::parse(raw_to_json(sample()));
  j["provenance"].erase("date");
  expect_error(j.dump(), "provenance.date");
  j = nlohmann::json::parse(raw_to_json(sample()));
  j["gemm"][0].erase("k");
  expect_error(j.dump(), "gemm[0].k");
}

TEST(RawResults, NegativeOrInconsistentValuesAreRejected) {
  auto j = nlohmann::json::parse(raw_to_json(sample()));
  j["memory"][0]["bytes"] = -1;
  expect_error(j.dump(), "memory[0].bytes");
  j = nlohmann::json::parse(raw_to_json(sample()));
  j["transfers"][0]["time"]["min_s"] = 1.0;  // min above the median
  expect_error(j.dump(), "transfers[0].time.median_s");
}

TEST(RawResults, WrongFormatVersionOrBackend) {
  auto j = nlohmann::json::parse(raw_to_json(sample()));
  j["format"] = "something-else";
  expect_error(j.dump(), "format");
  j = nlohmann::json::parse(raw_to_json(sample()));
  j["version"] = 7;
  expect_error(j.dump(), "version");
  j = nlohmann::json::parse(raw_to_json(sample()));
  j["provenance"]["backend"] = "tpu";
  expect_error(j.dump(), "provenance.backend");
  expect_error("{not json", "");
}

TEST(Timing, MedianMinMax) {
  Timing t = summarize({3, 1, 2, 10});
  EXPECT_DOUBLE_EQ(t.median_s, 2.5);
  EXPECT_DOUBLE_EQ(t.min_s, 1);
  EXPECT_DOUBLE_EQ(t.max_s, 10);
  EXPECT_EQ(t.iterations, 4);
  EXPECT_DOUBLE_EQ(t.spread(), 3.6);
}

}  // namespace
}  // namespace pw::calibration
