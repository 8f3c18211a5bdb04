// Megatron-LM's pipeline layout string: reading as its parse_str_to_list unrolls it, writing the
// form it reads back, and the refusals.
#include "core/pipeline_layout.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pw {
namespace {

std::vector<std::string> parsed(const std::string& text) {
  std::vector<std::string> stages;
  std::string problem;
  EXPECT_TRUE(parse_pipeline_layout(text, &stages, &problem)) << text << ": " << problem;
  return stages;
}

std::string problem_of(const std::string& text) {
  std::vector<std::string> stages;
  std::string problem;
  EXPECT_FALSE(parse_pipeline_layout(text, &stages, &problem)) << text;
  return problem;
}

// The examples of Megatron's docs and help, unrolled by hand: "Et*3|(tt|)*29,m|L" is Ettt, 29
// stages of tt, m, L (32 stages, 3 + 58 = 61 transformer layers: DeepSeek-V3 at PP 16, VPP 2);
// "E|(t|)*3,m|m||L" is E, t, t, t, m, m, an empty stage, L.
TEST(PipelineLayout, ReadsMegatronsExamples) {
  std::vector<std::string> want{"Ettt"};
  for (int i = 0; i < 29; ++i) want.push_back("tt");
  want.push_back("m");
  want.push_back("L");
  EXPECT_EQ(parsed("Et*3|(tt|)*29,m|L"), want);
  EXPECT_EQ(parsed("E|(t|)*3,m|m||L"),
            (std::vector<std::string>{"E", "t", "t", "t", "m", "m", "", "L"}));
  // Groups and letter repeats compose: (t*2|)*2 is tt|tt|.
  EXPECT_EQ(parsed("E(t*2|)*2,tL"), (std::vector<std::string>{"Ett", "tt", "tL"}));
}

TEST(PipelineLayout, WritesWhatItReadsBack) {
  // 4 stages of 3/7/7/7 (a first stage of its own size) and an interleaved 3/4 x 6/5 with one
  // multi-token prediction layer: E on the first, m and L on the last, equal middles folded.
  EXPECT_EQ(pipeline_layout_string({3, 7, 7, 7}, 0), "Et*3|(t*7|)*2,t*7L");
  EXPECT_EQ(pipeline_layout_string({3, 4, 4, 4, 4, 4, 4, 5}, 1), "Et*3|(t*4|)*6,t*5mL");
  EXPECT_EQ(pipeline_layout_string({1, 2, 1}, 2), "Et|t*2|tm*2L");
  EXPECT_EQ(pipeline_layout_string({5}, 0), "Et*5L");
  // The depths on a stage of their own before the loss's (Megatron's mtp_standalone): after
  // that stage's layers, the loss alone on the last; that stage is not folded into a run.
  EXPECT_EQ(pipeline_layout_string({4, 4, 4, 0, 0}, 1, true), "Et*4|(t*4|)*2,m|L");
  EXPECT_EQ(pipeline_layout_string({2, 3, 3, 0}, 2, true), "Et*2|t*3|t*3m*2|L");
  for (const auto& [layers, mtp] :
       std::vector<std::pair<std::vector<int>, int>>{{{4, 4, 4, 0, 0}, 1}, {{2, 3, 3, 0}, 2}}) {
    const std::vector<std::string> stages = parsed(pipeline_layout_string(layers, mtp, true));
    ASSERT_EQ(stages.size(), layers.size());
    EXPECT_EQ(stages.back(), "L");
    EXPECT_EQ(stages[stages.size() - 2],
              std::string(static_cast<std::size_t>(layers[layers.size() - 2]), 't') +
                  std::string(static_cast<std::size_t>(mtp), 'm'));
  }
  for (const auto& [layers, mtp] : std::vector<std::pair<std::vector<int>, int>>{
           {{3, 7, 7, 7}, 0}, {{3, 4, 4, 4, 4, 4, 4, 5}, 1}, {{1, 2, 1}, 2}, {{4, 4, 2, 2}, 0}}) {
    const std::vector<std::string> stages = parsed(pipeline_layout_string(layers, mtp));
    ASSERT_EQ(stages.size(), layers.size());
    for (std::size_t i = 0; i < layers.size(); ++i) {
      std::string want = i == 0 ? "E" : "";
      want += std::string(static_cast<std::size_t>(layers[i]), 't');
      if (i + 1 == layers.size()) want += std::string(static_cast<std::size_t>(mtp), 'm') + "L";
      EXPECT_EQ(stages[i], want);
    }
  }
}

TEST(PipelineLayout, RefusesWhatMegatronCannotRead) {
  EXPECT_NE(problem_of("Et*3|x|L").find("'x' is not a layer letter"), std::string::npos);
  EXPECT_NE(problem_of("E(tt|L").find("unbalanced or empty group at character 2"),
            std::string::npos);
  EXPECT_NE(problem_of("E(tt|)L").find("no repeat count"), std::string::npos);
  EXPECT_NE(problem_of("Et*0|L").find("expected an integer >= 1"), std::string::npos);
  EXPECT_NE(problem_of("E()*2|L").find("unbalanced or empty group"), std::string::npos);
  EXPECT_NE(problem_of("E(t*1000|)*100000,L").find("more than 1000000 characters"),
            std::string::npos);
}

}  // namespace
}  // namespace pw
