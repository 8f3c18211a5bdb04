#include "core/schedule_io.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/lowering.h"
#include "tests/core/test_schedules.h"

namespace pw {
namespace {

std::string error_of(const std::string& text, DocFormat f) {
  try {
    parse_schedule(text, f, "s.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ScheduleIo, YamlAndJsonRoundTripsAreLossless) {
  for (bool split : {false, true}) {
    Schedule s = lower_communication(testing::hand_1f1b(4, 6, split));
    for (DocFormat f : {DocFormat::kYaml, DocFormat::kJson})
      EXPECT_EQ(parse_schedule(schedule_to_text(s, f), f, "t"), s);
  }
}

TEST(ScheduleIo, OverlapAndDeviceWideActionsRoundTrip) {
  // Device 0 holds stages 0 and 1 (V on one device): F0 mb0, F1 mb0, then BW1 mb0 overlapped
  // with F0 mb1, ...
  Schedule s;
  s.name = "v1";
  s.placement = v_placement(1);
  s.num_microbatches = 2;
  s.actions = {{{ActionKind::kF, 0, 0},
                {ActionKind::kF, 1, 0},
                {ActionKind::kOverlapFB, 0, 1, 1, 0},
                {ActionKind::kBW, 0, 0},
                {ActionKind::kF, 1, 1},
                {ActionKind::kBW, 1, 1},
                {ActionKind::kBW, 0, 1},
                {ActionKind::kReduceGrad, 0, -1},
                {ActionKind::kOptStep, -1, -1}}};
  for (DocFormat f : {DocFormat::kYaml, DocFormat::kJson})
    EXPECT_EQ(parse_schedule(schedule_to_text(s, f), f, "t"), s);
}

TEST(ScheduleIo, YamlIsReadable) {
  const std::string y = schedule_to_text(testing::hand_1f1b(2, 1), DocFormat::kYaml);
  EXPECT_NE(y.find("format: pipewright-schedule"), std::string::npos) << y;
  EXPECT_NE(y.find("- [[F, 0, 0], [BW, 0, 0]]"), std::string::npos) << y;
}

TEST(ScheduleIo, ErrorsNameFileKeyPathAndExpectation) {
  const std::string good = schedule_to_text(testing::hand_1f1b(2, 2), DocFormat::kYaml);
  std::string bad = good;
  bad.replace(bad.find("[BW, 1, 0]"), 10, "[XX, 1, 0]");
  const std::string e = error_of(bad, DocFormat::kYaml);
  EXPECT_NE(e.find("s.yaml: actions[1][1][0]: expected an action kind"), std::string::npos) << e;

  bad = good;
  bad.replace(bad.find("num_devices: 2"), 14, "num_devices: x");
  EXPECT_NE(error_of(bad, DocFormat::kYaml).find("placement.num_devices: expected an integer"),
            std::string::npos);

  bad = good;
  bad.replace(bad.find("num_microbatches"), 16, "num_microbatchez");
  EXPECT_NE(error_of(bad, DocFormat::kYaml).find("did you mean 'num_microbatches'"),
            std::string::npos);

  EXPECT_NE(error_of("{", DocFormat::kJson).find("JSON syntax error"), std::string::npos);
  EXPECT_NE(error_of("a: [", DocFormat::kYaml).find("YAML syntax error"), std::string::npos);
}

TEST(ScheduleIo, TooFewForwardsForTheMicrobatchCountAreRefusedBeforeIndexing) {
  // hand_1f1b(2, 2): 2 stages x 2 microbatches, 4 forwards. Claiming 2^24 microbatches needs
  // 2 x 2^24 forwards; the index of every (microbatch, stage, slot) would have been allocated
  // (about a gigabyte) before the coverage check named the first missing pass.
  std::string y = schedule_to_text(testing::hand_1f1b(2, 2), DocFormat::kYaml);
  y.replace(y.find("num_microbatches: 2"), 19, "num_microbatches: 16777216");
  const std::string e = error_of(y, DocFormat::kYaml);
  EXPECT_NE(e.find("4 forward passes for 2 stages x 16777216 microbatches"), std::string::npos)
      << e;
}

TEST(ScheduleIo, LoadingValidates) {
  std::string y = schedule_to_text(testing::hand_1f1b(2, 2), DocFormat::kYaml);
  // Device 1 runs BW mb 0 before its F mb 0.
  y.replace(y.find("- [[F, 1, 0], [BW, 1, 0]"), 24, "- [[BW, 1, 0], [F, 1, 0]");
  EXPECT_NE(error_of(y, DocFormat::kYaml).find("deadlock"), std::string::npos) << y;
}

TEST(Document, YamlScalarsAreTypedAndQuotedStringsStayStrings) {
  Doc d = parse_document("a: 1\nb: 1.5\nc: true\nd: '12'\ne: x\nf: ~\n", DocFormat::kYaml, "t");
  EXPECT_TRUE(d["a"].is_number_integer());
  EXPECT_TRUE(d["b"].is_number_float());
  EXPECT_TRUE(d["c"].is_boolean());
  EXPECT_TRUE(d["d"].is_string());
  EXPECT_TRUE(d["e"].is_string());
  EXPECT_TRUE(d["f"].is_null());
  Doc back = parse_document(dump_document(d, DocFormat::kYaml), DocFormat::kYaml, "t");
  EXPECT_EQ(back, d);
}

TEST(Document, FloatsRoundTripExactly) {
  Doc d = {{"x", 0.1}, {"y", 1.0 / 3.0}, {"z", 2.0}, {"big", 1e300}};
  Doc back = parse_document(dump_document(d, DocFormat::kYaml), DocFormat::kYaml, "t");
  EXPECT_EQ(back["x"].get<double>(), 0.1);
  EXPECT_EQ(back["y"].get<double>(), 1.0 / 3.0);
  EXPECT_TRUE(back["z"].is_number_float());
  EXPECT_EQ(back["big"].get<double>(), 1e300);
}

}  // namespace
}  // namespace pw
