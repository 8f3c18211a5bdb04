// Scenario and profile loading: validation messages name file, key path and expectation.
#include "hwmodels/scenario.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/file_io.h"
#include "core/plan.h"
#include "core/rank_layout.h"
#include "hwmodels/estimate.h"
#include "hwmodels/profile.h"
#include "tests/hwmodels/test_util.h"

namespace pw::hw {
namespace {

const char* kBase = R"(model: {preset: gpt3-175b}
cluster: {profile: dgx-a100-80gb, nodes: 128}
parallel:
  tensor_model_parallel_size: 8
  pipeline_model_parallel_size: 8
  num_layers_per_virtual_pipeline_stage: 4
  micro_batch_size: 1
  global_batch_size: 1536
  sequence_parallel: true
  recompute_granularity: selective
  zero_stage: 1
  schedule: interleaved
)";

std::string error_of(const std::string& text) {
  try {
    parse_scenario(text, "s.yaml", "");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
  auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return text.replace(pos, from.size(), to);
}

TEST(Scenario, LoadsAndDerivesDataParallelAndInterleaving) {
  Scenario s = load_scenario(std::string(PW_SOURCE_DIR) + "/tests/hwmodels/data/gpt3-175b.yaml");
  EXPECT_EQ(s.model.num_layers, 96);
  EXPECT_EQ(s.model.hidden_size, 12288);
  EXPECT_EQ(s.num_gpus(), 1024);
  EXPECT_EQ(s.parallel.data_parallel, 16);
  EXPECT_EQ(s.parallel.virtual_stages, 3);  // 12 layers per stage / 4
  EXPECT_EQ(s.num_microbatches(), 96);
  EXPECT_EQ(s.parallel.recompute, "selective");
  ASSERT_TRUE(s.published.has_value());
  EXPECT_DOUBLE_EQ(s.published->tflops_per_gpu, 138);
  EXPECT_EQ(s.profile.name, "dgx-a100-80gb");
}

TEST(Scenario, UnknownKeySuggestsNearest) {
  std::string msg =
      error_of(replace(kBase, "tensor_model_parallel_size", "tensor_model_paralel_size"));
  EXPECT_EQ(msg.rfind("s.yaml: parallel.tensor_model_paralel_size: unknown key; did you mean "
                      "'tensor_model_parallel_size'?",
                      0),
            0u)
      << msg;
}

TEST(Scenario, KeyGivenTwiceIsAnErrorNotTheFirstValue) {
  std::string msg = error_of(replace(kBase, "  zero_stage: 1", "  zero_stage: 1\n  zero_stage: 2"));
  EXPECT_EQ(msg.rfind("s.yaml: parallel.zero_stage: given twice", 0), 0u) << msg;
}

TEST(Scenario, MissingFieldNamesKeyAndExpectation) {
  std::string text = replace(kBase, "model: {preset: gpt3-175b}",
                             "model: {num_layers: 4, num_attention_heads: 8, seq_length: 128, "
                             "vocab_size: 1000}");
  EXPECT_EQ(error_of(text),
            "s.yaml: model.hidden_size: missing; expected an integer in [1, 16777216]");
  EXPECT_EQ(error_of(replace(kBase, "  micro_batch_size: 1\n", "")),
            "s.yaml: parallel.micro_batch_size: missing; expected an integer >= 1");
}

TEST(Scenario, NegativeFieldNamesKeyAndExpectation) {
  EXPECT_EQ(error_of(replace(kBase, "micro_batch_size: 1", "micro_batch_size: -2")),
            "s.yaml: parallel.micro_batch_size: -2 is out of range; expected an integer >= 1");
  EXPECT_EQ(error_of(replace(kBase, "nodes: 128", "nodes: 0")),
            "s.yaml: cluster.nodes: 0 is out of range; expected an integer >= 1");
}

// Sizes the simulator cannot take in reasonable time or memory are refused by key, never run
// (found by tests/fuzz/des_fuzz_test.cc: kv_channels 2^31 - 1 built 112 M tasks in 3 minutes,
// leaf_ports 2^31 - 1 exhausted memory, failed_spine_links: [] read past an empty array).
TEST(Scenario, SizesBeyondReasonAreRefusedByKey) {
  const std::string model = "model: {preset: gpt3-175b}";
  EXPECT_EQ(error_of(replace(kBase, model, "model: {preset: gpt3-175b, kv_channels: 2147483647}")),
            "s.yaml: model.kv_channels: 2147483647 is out of range; expected at most 16777216");
  EXPECT_EQ(error_of(replace(kBase, model, "model: {preset: gpt3-175b, num_layers: 100000}")),
            "s.yaml: model.num_layers: 100000 is out of range; expected at most 65536");
  const std::string cluster = "cluster: {profile: dgx-a100-80gb, nodes: 128}";
  EXPECT_EQ(error_of(replace(kBase, cluster,
                             "cluster: {profile: dgx-a100-80gb, nodes: 128, leaf_ports: 1000000}")),
            "s.yaml: cluster.leaf_ports: 1000000 is out of range; expected at most 2048");
  // t*p in 64 bits (it overflowed int: undefined behaviour UBSan caught in the fuzzer).
  EXPECT_EQ(error_of(replace(kBase, "tensor_model_parallel_size: 8",
                             "tensor_model_parallel_size: 2147483647")),
            "s.yaml: parallel.tensor_model_parallel_size: t*p = 2147483647*8 = 17179869176 does "
            "not divide the 1024 GPUs (128 nodes x 8); expected t*p to divide 1024");
  const Scenario s = parse_scenario(
      replace(kBase, cluster,
              "cluster: {profile: dgx-a100-80gb, nodes: 128, failed_spine_links: []}"),
      "s.yaml", "");
  EXPECT_TRUE(s.topology.symmetric());  // none listed: none failed
}

TEST(Scenario, GpuCountMismatchIsAnError) {
  EXPECT_EQ(error_of(replace(kBase, "nodes: 128", "nodes: 3")),
            "s.yaml: parallel.pipeline_model_parallel_size: t*p = 8*8 = 64 does not divide the 24 "
            "GPUs (3 nodes x 8); expected t*p to divide 24");
  // The key named is the factor that does not divide the GPUs: p = 3 here, t = 8 divides 1024.
  EXPECT_EQ(error_of(replace(kBase, "pipeline_model_parallel_size: 8",
                             "pipeline_model_parallel_size: 3")),
            "s.yaml: parallel.pipeline_model_parallel_size: t*p = 8*3 = 24 does not divide the "
            "1024 GPUs (128 nodes x 8); expected t*p to divide 1024");
  std::string text =
      replace(kBase, "  micro_batch_size: 1\n", "  micro_batch_size: 1\n  data_parallel_size: 4\n");
  EXPECT_EQ(error_of(text),
            "s.yaml: parallel.data_parallel_size: 4 does not match GPUs / (t*p) = 1024 / 64; "
            "expected 16");
}

TEST(Scenario, BadEnumsAndPresetsSuggestNearest) {
  EXPECT_EQ(error_of(replace(kBase, "recompute_granularity: selective",
                             "recompute_granularity: selectiv")),
            "s.yaml: parallel.recompute_granularity: unknown value 'selectiv'; expected one of "
            "none, selective, full (did you mean 'selective'?)");
  EXPECT_EQ(error_of(replace(kBase, "gpt3-175b", "gpt3-175")),
            "s.yaml: model.preset: unknown preset 'gpt3-175'; did you mean 'gpt3-175b'?");
  std::string msg = error_of(replace(kBase, "dgx-a100-80gb", "dgx-a100-80g"));
  EXPECT_NE(msg.find("s.yaml: cluster.profile: unknown profile 'dgx-a100-80g'"), std::string::npos);
  EXPECT_NE(msg.find("did you mean 'dgx-a100-80gb'?"), std::string::npos);
}

TEST(Scenario, OverridesRevalidateAndNameTheFlag) {
  Scenario s = parse_scenario(kBase, "s.yaml", "");
  ParallelOverrides o;
  o.tp = 4;
  apply_overrides(&s, o);
  EXPECT_EQ(s.parallel.data_parallel, 32);
  o.tp = 5;
  try {
    apply_overrides(&s, o);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "--tp");
  }
  ParallelOverrides bad;
  bad.recompute = "ful";
  try {
    apply_overrides(&s, bad);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "s.yaml: --recompute: 'ful'; expected none, selective or full");
  }
}

// `estimate --cp --ep --etp --fp8` set what the scenario's keys set: Qwen3-30B-A3B on two DGX
// H100 nodes (16 GPUs), written with cp 2, ep 8, fp8 hybrid, against the same scenario without
// them and the flags. d = 16 / (t cp p) = 8; the expert-data-parallel size t (cp d) / (etp ep)
// = 16 / 8 = 2. Bad values name the flag they came from; a bad value from the file its key.
TEST(Scenario, ParallelFlagsSetContextExpertParallelismAndFp8AsTheKeysDo) {
  const std::string model = "{preset: qwen3-30b-a3b, use_flash_attn: true}";
  const std::string base = "{micro_batch_size: 1, global_batch_size: 64}";
  const Scenario written =
      testing::scenario(model,
                        "{micro_batch_size: 1, global_batch_size: 64, context_parallel_size: 2, "
                        "expert_model_parallel_size: 8, fp8: hybrid}",
                        2);
  const std::string text =
      "model: " + model + "\ncluster: {profile: dgx-h100, nodes: 2}\nparallel: " + base + "\n";
  ParallelOverrides o;
  o.cp = 2;
  o.ep = 8;
  o.fp8 = "hybrid";
  const Scenario flagged = parse_scenario(text, "s.yaml", "", o);
  for (const Scenario* s : {&written, &flagged}) {
    EXPECT_EQ(s->parallel.context_parallel, 2);
    EXPECT_EQ(s->parallel.expert_parallel, 8);
    EXPECT_EQ(s->parallel.expert_tp(), 1);
    EXPECT_EQ(s->parallel.fp8, "hybrid");
    EXPECT_EQ(s->parallel.data_parallel, 8);
    EXPECT_EQ(rank_layout_of(s->parallel, 8).expert_dp(), 2);
  }
  auto flag_error = [&](const ParallelOverrides& bad, const std::string& parallel) {
    const std::string t = "model: " + model +
                          "\ncluster: {profile: dgx-h100, nodes: 2}\nparallel: " + parallel + "\n";
    try {
      parse_scenario(t, "s.yaml", "", bad);
      ADD_FAILURE() << "no error";
      return std::string();
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      return std::string(e.what());
    }
  };
  ParallelOverrides ep3;
  ep3.ep = 3;  // 128 experts
  EXPECT_EQ(flag_error(ep3, base),
            "s.yaml: --ep: 3 does not divide num_experts 128; expected a divisor");
  ParallelOverrides cp3;
  cp3.cp = 3;  // t cp p = 3 does not divide 16; t = p = 1 do
  EXPECT_EQ(flag_error(cp3, base),
            "s.yaml: --cp: t*cp*p = 1*3*1 = 3 does not divide the 16 GPUs (2 nodes x 8); "
            "expected t*cp*p to divide 16");
  ParallelOverrides etp2;
  etp2.etp = 2;  // t = 1
  EXPECT_EQ(flag_error(etp2, base),
            "s.yaml: --etp: 2; expected 1 or tensor_model_parallel_size (1)");
  ParallelOverrides fp8;
  fp8.fp8 = "bf16";
  EXPECT_EQ(flag_error(fp8, base), "s.yaml: --fp8: 'bf16'; expected off, e4m3 or hybrid");
  // The file's bad ep under a --tp flag: the error names the file's key, not a flag.
  ParallelOverrides tp1;
  tp1.tp = 1;
  EXPECT_EQ(flag_error(tp1,
                       "{micro_batch_size: 1, global_batch_size: 64, "
                       "expert_model_parallel_size: 3}"),
            "s.yaml: parallel.expert_model_parallel_size: 3 does not divide num_experts 128; "
            "expected a divisor");
}

// Expert parallelism and expert tensor parallelism on a dense model (GPT-3 175B has no experts)
// would be ignored, so the key and the flag are refused; 1 (the value without experts) passes.
TEST(Scenario, ExpertParallelDegreesOnADenseModelAreRefused) {
  EXPECT_EQ(
      error_of(replace(kBase, "zero_stage: 1", "zero_stage: 1\n  expert_model_parallel_size: 2")),
      "s.yaml: parallel.expert_model_parallel_size: 2 for a dense model; expected 1 (or "
      "model.num_experts)");
  EXPECT_EQ(
      error_of(replace(kBase, "zero_stage: 1", "zero_stage: 1\n  expert_tensor_parallel_size: 8")),
      "s.yaml: parallel.expert_tensor_parallel_size: 8 for a dense model; expected 1 (expert "
      "tensor parallelism needs model.num_experts)");
  ParallelOverrides etp;
  etp.etp = 2;
  try {
    parse_scenario(kBase, "s.yaml", "", etp);
    ADD_FAILURE() << "--etp 2 on a dense model accepted";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "s.yaml: --etp: 2 for a dense model; expected 1 (expert tensor "
                 "parallelism needs model.num_experts)");
  }
  etp.etp = 1;
  EXPECT_EQ(parse_scenario(kBase, "s.yaml", "", etp).parallel.expert_tp(), 1);
}

// The zero-bubble paper's 1.5B model (22 layers) on p = 8: embedding and head count as one layer
// each, so the first and last stages carry 2 transformer layers and the six between 3.
const char* kUneven = R"(model: {preset: zb-1.5b}
cluster: {profile: dgx-a100-80gb, nodes: 1}
parallel:
  pipeline_model_parallel_size: 8
  decoder_first_pipeline_num_layers: 2
  decoder_last_pipeline_num_layers: 2
  micro_batch_size: 1
  global_batch_size: 24
  schedule: zb-h1
)";

TEST(Scenario, Zero3GatherIsReadWithZeroStage3Only) {
  EXPECT_EQ(parse_scenario(kBase, "s.yaml", "").parallel.zero3_gather, "layer");  // the default
  const std::string z3 = replace(kBase, "zero_stage: 1", "zero_stage: 3\n  zero3_gather: stage");
  EXPECT_EQ(parse_scenario(z3, "s.yaml", "").parallel.zero3_gather, "stage");
  EXPECT_EQ(error_of(replace(kBase, "zero_stage: 1", "zero_stage: 1\n  zero3_gather: layer")),
            "s.yaml: parallel.zero3_gather: given with zero_stage 1; expected it only with "
            "zero_stage 3");
  EXPECT_NE(error_of(replace(z3, "zero3_gather: stage", "zero3_gather: sweep"))
                .find("parallel.zero3_gather"),
            std::string::npos);
}

TEST(Scenario, UnevenSplitFirstAndLastStageLighter) {
  const Scenario s = parse_scenario(kUneven, "s.yaml", "");
  EXPECT_TRUE(s.uneven_split());
  EXPECT_EQ(s.stage_layers(), (std::vector<int>{2, 3, 3, 3, 3, 3, 3, 2}));  // 2 + 6*3 + 2 = 22
  // Only the first stage given: the 22 - 1 = 21 left spread over the 7 others, 3 each.
  const Scenario one = parse_scenario(
      replace(replace(kUneven, "  decoder_last_pipeline_num_layers: 2\n", ""),
              "decoder_first_pipeline_num_layers: 2", "decoder_first_pipeline_num_layers: 1"),
      "s.yaml", "");
  EXPECT_EQ(one.stage_layers(), (std::vector<int>{1, 3, 3, 3, 3, 3, 3, 3}));
  // Without the keys the even split stays, and 22 layers on 8 stages is refused, pointing at them.
  const Scenario even = parse_scenario(kBase, "s.yaml", "");
  EXPECT_EQ(even.stage_layers(), std::vector<int>(8, 12));
  const std::string no_split =
      replace(replace(kUneven, "  decoder_first_pipeline_num_layers: 2\n", ""),
              "  decoder_last_pipeline_num_layers: 2\n", "");
  EXPECT_NE(error_of(no_split).find("parallel.pipeline_model_parallel_size: 8 does not divide "
                                    "num_layers 22; expected a divisor (or an uneven split"),
            std::string::npos)
      << error_of(no_split);
}

TEST(Scenario, UnevenSplitThatDoesNotSpreadEvenlyNamesTheKey) {
  // 22 - 3 - 2 = 17 layers over 6 stages.
  EXPECT_EQ(error_of(replace(kUneven, "decoder_first_pipeline_num_layers: 2",
                             "decoder_first_pipeline_num_layers: 3")),
            "s.yaml: parallel.decoder_first_pipeline_num_layers: num_layers 22 - first 3 - last 2 "
            "= 17 layers do not spread evenly over the 6 other pipeline stage(s) "
            "(parallel.pipeline_model_parallel_size = 8); expected a multiple of 6 (at least one "
            "layer each)");
  EXPECT_NE(error_of(replace(kUneven, "pipeline_model_parallel_size: 8",
                             "pipeline_model_parallel_size: 1\n  data_parallel_size: 8"))
                .find("needs parallel.pipeline_model_parallel_size >= 2"),
            std::string::npos);
  EXPECT_NE(error_of(replace(kUneven, "  micro_batch_size: 1",
                             "  num_layers_per_virtual_pipeline_stage: 1\n  micro_batch_size: 1"))
                .find("with num_layers_per_virtual_pipeline_stage (interleaving) is not supported"),
            std::string::npos);
  EXPECT_NE(error_of(replace(kUneven, "decoder_last_pipeline_num_layers: 2",
                             "decoder_last_pipeline_num_layers: 0"))
                .find("parallel.decoder_last_pipeline_num_layers"),
            std::string::npos);
}

TEST(Scenario, ZeroBubbleScenariosUseThePublishedPipelineSizes) {
  // shared/reference/schedules.md: 1.5B p8, 6.2B p8, 14.6B p16, 28.3B p32, each with
  // L + 2 layers (embedding and head counted) split evenly, so the ends carry one layer less.
  const struct {
    const char* file;
    int p, layers, middle;
  } rows[] = {{"zb-1.5b", 8, 22, 3},
              {"zb-6.2b", 8, 30, 4},
              {"zb-14.6b", 16, 46, 3},
              {"zb-28.3b", 32, 62, 2}};
  for (const auto& r : rows) {
    const Scenario s =
        load_scenario(std::string(PW_SOURCE_DIR) + "/scenarios/zero-bubble/" + r.file + ".yaml");
    EXPECT_EQ(s.parallel.pipeline_parallel, r.p) << r.file;
    EXPECT_EQ((r.layers + 2) / r.p, r.middle) << r.file;
    std::vector<int> expect(r.p, r.middle);
    expect.front() = expect.back() = r.middle - 1;
    EXPECT_EQ(s.stage_layers(), expect) << r.file;
    EXPECT_EQ(s.num_microbatches(), 3 * r.p) << r.file;  // m = 3p as in the paper's rows
  }
}

std::string profile_text() {
  return read_file(std::string(PW_SOURCE_DIR) + "/hwmodels/profiles/dgx-a100-80gb.yaml");
}

std::string profile_error(const std::string& text) {
  try {
    parse_profile(text, "p.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Profile, AllShippedProfilesLoad) {
  auto names = shipped_profile_names();
  // commodity-pcie-100gbe, dgx-a100-80gb, dgx-b200, dgx-h100, gb200-nvl72, h200
  ASSERT_EQ(names.size(), 6u);
  for (const auto& n : names) {
    HardwareProfile p = resolve_profile(n, "", "", "");
    EXPECT_EQ(p.name, n);
    EXPECT_GT(p.gpu.peak_flops[static_cast<int>(DType::kBf16)], 0);
  }
}

TEST(Profile, UnknownLinkTypeIsAnError) {
  std::string text = replace(profile_text(), "type: infiniband", "type: infiniban");
  EXPECT_EQ(profile_error(text),
            "p.yaml: node.nic.type: unknown link type 'infiniban'; expected one of nvlink, "
            "nvswitch, pcie, infiniband, roce, ethernet (did you mean 'infiniband'?)");
}

TEST(Profile, NegativeOrMissingValueIsAnError) {
  std::string text = replace(profile_text(), "bandwidth_gb_per_s: 300", "bandwidth_gb_per_s: -300");
  EXPECT_EQ(profile_error(text),
            "p.yaml: node.intra.bandwidth_gb_per_s: -300 is out of range; expected a number > 0");
  text = replace(profile_text(), "  sm_count: 108", "  #");
  EXPECT_EQ(profile_error(text), "p.yaml: gpu.sm_count: missing; expected an integer >= 1");
}

// Megatron's overlap_p2p_comm in the analytic figure: the interleaved schedule's blocking calls
// hold every chunk of a microbatch for two transfers (its forward's output, its backward's input
// gradient); overlapped, a forward's send is still waited for (deallocate_pipeline_outputs) but
// not a backward's, so the busiest device saves one transfer per chunk and microbatch: m v of
// them (GPT-3 175B, p = 8, v = 3, m = 1536 / 16 = 96), the fill unchanged.
TEST(Estimate, OverlappedP2pSavesOneTransferPerChunkAndMicrobatch) {
  const Scenario s = parse_scenario(kBase, "s.yaml", "");
  const Scenario o = parse_scenario(replace(kBase, "  schedule: interleaved\n",
                                            "  schedule: interleaved\n  overlap_p2p_comm: true\n"),
                                    "o.yaml", "");
  ASSERT_TRUE(o.parallel.overlap_p2p_comm);
  GpuMemoryFigures first, last;
  const Estimate a = make_estimate(s, first, last), b = make_estimate(o, first, last);
  TimePs hop = -1;
  for (const auto& c : a.collectives)
    if (c.kind == CollectiveKind::kSendRecv) hop = c.time;
  ASSERT_GT(hop, 0);
  ASSERT_EQ(a.microbatches, 96);
  EXPECT_EQ(a.iteration_time - b.iteration_time, 96 * 3 * hop);
}

// The tied output layer on the last stage is a copy of the input embedding whose gradient is
// all-reduced with the first stage's after the DP reduction, exposed before the optimizer step:
// GPT-3 175B at t = 8, p = 8 holds V h / t = 51,200 x 12,288 / 8 = 78,643,200 parameters of it
// per rank (the preset's vocabulary, padded as Megatron pads it), 4 bytes each
// (grad_reduce_in_fp32, the default): 314,572,800 bytes. Untied, the
// last stage holds its own output layer instead (as many parameters, the same passes), so the
// two estimates differ by that all-reduce alone.
TEST(Estimate, TheTiedCopysGradientAllReduceIsExposed) {
  const Scenario tied = parse_scenario(kBase, "t.yaml", "");
  Scenario u = tied;
  u.model.untie_embeddings = true;
  GpuMemoryFigures first, last;
  const Estimate a = make_estimate(tied, first, last), b = make_estimate(u, first, last);
  const CollectiveEstimate* sync = nullptr;
  for (const auto& c : a.collectives)
    if (c.purpose.find("embedding gradient") != std::string::npos) sync = &c;
  ASSERT_NE(sync, nullptr);
  EXPECT_DOUBLE_EQ(sync->bytes.value, 314572800.0);
  EXPECT_GT(sync->time, 0);
  for (const auto& c : b.collectives)
    EXPECT_EQ(c.purpose.find("embedding gradient"), std::string::npos);
  EXPECT_EQ(a.first.params, b.first.params);
  EXPECT_EQ(a.last.params, b.last.params);
  EXPECT_EQ(a.iteration_time - b.iteration_time, sync->time);
}

// Expert gradients reduce over the expert-data-parallel group, in rows of their own. A small
// SwiGLU MoE model (4 layers, h = 512, 8 experts of width 512) on one DGX H100 node at t = p = 1,
// d = 8, ZeRO-0 without overlap (one all-reduce per group): at ep = 2 a rank holds 4 experts per
// layer of 3 x 512 x 512 weights and 3 x 512 biases, 4 x 4 x 787,968 = 12,607,488 expert
// parameters, reduced over the 8 / 2 = 4 ranks holding the same experts (50,429,952 bytes in
// fp32); the rest over all 8. At ep = 8
// (one expert each, nobody else holds it) there is no expert row; a rank's other parameters are
// the same at every ep, so the dense rows are equal.
TEST(Estimate, ExpertGradientsReduceOverTheExpertDataParallelGroup) {
  auto estimate = [](int ep) {
    const Scenario s = parse_scenario(
        fmt::format(
            "model: {{num_layers: 4, hidden_size: 512, num_attention_heads: 8, swiglu: true,\n"
            "        normalization: RMSNorm, num_experts: 8, moe_router_topk: 2,\n"
            "        moe_ffn_hidden_size: 512, seq_length: 1024, vocab_size: 32000}}\n"
            "cluster: {{profile: dgx-h100, nodes: 1}}\n"
            "parallel: {{expert_model_parallel_size: {}, micro_batch_size: 1,\n"
            "           global_batch_size: 16, overlap_grad_reduce: false}}\n",
            ep),
        "moe.yaml", "");
    GpuMemoryFigures first, last;
    return make_estimate(s, first, last);
  };
  auto rows = [](const Estimate& e, bool expert) {
    std::vector<CollectiveEstimate> out;
    for (const CollectiveEstimate& c : e.collectives)
      if (c.purpose.find("gradient all-reduce") != std::string::npos &&
          (c.purpose.rfind("expert-DP ", 0) == 0) == expert)
        out.push_back(c);
    return out;
  };
  const Estimate two = estimate(2), eight = estimate(8);
  const auto x2 = rows(two, true), d2 = rows(two, false), d8 = rows(eight, false);
  ASSERT_EQ(x2.size(), 1u);
  EXPECT_EQ(x2[0].group_size, 4);
  EXPECT_DOUBLE_EQ(x2[0].bytes.value, 4.0 * 12607488);
  EXPECT_TRUE(rows(eight, true).empty());
  ASSERT_EQ(d2.size(), 1u);
  ASSERT_EQ(d8.size(), 1u);
  EXPECT_EQ(d2[0].group_size, 8);
  EXPECT_DOUBLE_EQ(d2[0].bytes.value, d8[0].bytes.value);
  EXPECT_DOUBLE_EQ(d2[0].bytes.value, 4.0 * (two.first.params - 12607488));
  EXPECT_GT(x2[0].time, 0);
  // ZeRO-3 by layer: each of the 4 layers' gathers, 2 bytes x a quarter of the GPU's parameters
  // (zero3_layer_bytes), carries its expert share over the expert-DP group: 2 x 12,607,488 / 4
  // = 6,303,744 bytes over 4 GPUs, the rest over 8.
  Scenario z3 = parse_scenario(
      "model: {num_layers: 4, hidden_size: 512, num_attention_heads: 8, swiglu: true,\n"
      "        normalization: RMSNorm, num_experts: 8, moe_router_topk: 2,\n"
      "        moe_ffn_hidden_size: 512, seq_length: 1024, vocab_size: 32000}\n"
      "cluster: {profile: dgx-h100, nodes: 1}\n"
      "parallel: {expert_model_parallel_size: 2, micro_batch_size: 1,\n"
      "           global_batch_size: 16, zero_stage: 3, zero3_gather: layer}\n",
      "moe3.yaml", "");
  GpuMemoryFigures first, last;
  const Estimate e3 = make_estimate(z3, first, last);
  const CollectiveEstimate *xg = nullptr, *dg = nullptr;
  for (const CollectiveEstimate& c : e3.collectives) {
    if (c.purpose == "expert-DP ZeRO-3 all-gather per layer") xg = &c;
    if (c.purpose == "ZeRO-3 all-gather per layer") dg = &c;
  }
  ASSERT_NE(xg, nullptr);
  ASSERT_NE(dg, nullptr);
  EXPECT_EQ(xg->group_size, 4);
  EXPECT_EQ(dg->group_size, 8);
  EXPECT_DOUBLE_EQ(xg->bytes.value, 6303744.0);
  EXPECT_DOUBLE_EQ(dg->bytes.value, 2.0 * (e3.first.params - 12607488) / 4);
}

TEST(Estimate, DelayedScalingsAmaxAllReducesAreListedAndWaitedFor) {
  // Two layers on two DGX H100 nodes at t = 1, p = 1, d = 16, two microbatches per rank: each
  // F and B ends with an all-reduce over all 16 GPUs of 2 layers x 4 FP8 GEMMs x 3 (F) or 2 (B)
  // float32 amaxes, 96 and 64 bytes; the analytic step (m x (F + B) at p = 1) waits for both.
  GpuMemoryFigures first, last;
  const Estimate d = make_estimate(testing::fp8_scenario("delayed"), first, last);
  const Estimate c = make_estimate(testing::fp8_scenario("tensorwise"), first, last);
  const CollectiveEstimate *f = nullptr, *b = nullptr;
  for (const auto& x : d.collectives) {
    if (x.purpose == "FP8 AMAX all-reduce (F)") f = &x;
    if (x.purpose == "FP8 AMAX all-reduce (B)") b = &x;
  }
  ASSERT_NE(f, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(f->group_size, 16);
  EXPECT_EQ(f->group_nodes, 2);
  EXPECT_DOUBLE_EQ(f->bytes.value, 96.0);
  EXPECT_DOUBLE_EQ(b->bytes.value, 64.0);
  EXPECT_EQ(f->calls_per_iteration, 2);
  EXPECT_GT(f->time, 0);
  for (const auto& x : c.collectives) EXPECT_EQ(x.purpose.find("AMAX"), std::string::npos);
  EXPECT_EQ(d.iteration_time - c.iteration_time, 2 * (f->time + b->time));
}

// overlap_p2p_comm is Megatron's interleaved schedule's alone: with chunks but another
// schedule it would be priced nowhere, so it is refused naming the key.
TEST(Scenario, OverlapP2pCommOnlyWithTheInterleavedSchedule) {
  EXPECT_EQ(error_of(replace(kBase, "  schedule: interleaved\n",
                             "  schedule: breadth-first\n  overlap_p2p_comm: true\n"))
                .rfind("s.yaml: parallel.overlap_p2p_comm: true without the interleaved", 0),
            0u)
      << error_of(replace(kBase, "  schedule: interleaved\n",
                          "  schedule: breadth-first\n  overlap_p2p_comm: true\n"));
}

// Megatron's microbatch_group_size_per_vp_stage, as its interleaved schedule checks it
// (schedules.py): kBase runs p = 8, v = 3 and m = 1536 / (1 x 16) = 96 microbatches per
// pipeline, so 8 <= g <= 96 and 96 mod g must be 0 or at least 8 (12: 0; 88: 8; 10: 6 refused).
TEST(Scenario, InterleavedMicrobatchGroupSizeIsMegatronsOwn) {
  const std::string at = "  schedule: interleaved\n";
  auto with = [&](const std::string& g) {
    return replace(kBase, at, at + "  microbatch_group_size_per_vp_stage: " + g + "\n");
  };
  EXPECT_EQ(parse_scenario(with("12"), "s.yaml", "").microbatch_group_size, 12);
  EXPECT_EQ(parse_scenario(with("88"), "s.yaml", "").microbatch_group_size, 88);
  EXPECT_EQ(parse_scenario(kBase, "s.yaml", "").microbatch_group_size, 0);
  const std::string key = "s.yaml: parallel.microbatch_group_size_per_vp_stage: ";
  EXPECT_EQ(error_of(with("7")), key + "7; expected p = 8 <= g <= 96 microbatches per pipeline");
  EXPECT_EQ(error_of(with("97")), key + "97; expected p = 8 <= g <= 96 microbatches per pipeline");
  EXPECT_EQ(error_of(with("10")),
            key +
                "10 leaves a last group of 6 < p = 8 of the 96 microbatches; expected m mod g "
                "to be 0 or at least p");
  EXPECT_EQ(error_of(with("0")).rfind(key + "0 is out of range", 0), 0u) << error_of(with("0"));
  // Read only by the interleaved schedule: refused with another one rather than ignored.
  EXPECT_EQ(error_of(replace(with("12"), at, "  schedule: breadth-first\n")),
            key +
                "12 without the interleaved schedule over p > 1; expected it only there "
                "(Megatron's interleaved schedule reads it)");
}

// 1F1B-R is 1F1B with full recomputation: with another granularity its R passes would have
// nothing to recompute, and the simulator ran it at plain 1F1B's time while `plan` called it
// "not a valid configuration"; refused naming the key (or the flag that set it).
TEST(Scenario, OneFOneBRNeedsFullRecomputation) {
  EXPECT_EQ(error_of(replace(kBase, "  schedule: interleaved\n", "  schedule: 1f1b-r\n")),
            "s.yaml: parallel.recompute_granularity: selective with schedule 1f1b-r; expected "
            "full (1F1B-R recomputes every layer before its backward)");
  const std::string full =
      replace(replace(kBase, "  schedule: interleaved\n", "  schedule: 1f1b-r\n"),
              "recompute_granularity: selective", "recompute_granularity: full");
  EXPECT_EQ(parse_scenario(full, "s.yaml", "").parallel.recompute, "full");
  ParallelOverrides o;
  o.recompute = "none";
  try {
    parse_scenario(full, "s.yaml", "", o);
    ADD_FAILURE() << "accepted --recompute none with 1f1b-r";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "--recompute");
  }
}

// A list or a map where a scalar belongs is named as what it is (its empty scalar text read
// "'' is not an integer").
TEST(Scenario, AListOrAMapWhereAScalarBelongsIsNamed) {
  EXPECT_EQ(
      error_of(replace(kBase, "micro_batch_size: 1", "micro_batch_size: [4]")),
      "s.yaml: parallel.micro_batch_size: a list is not an integer; expected an integer >= 1");
  EXPECT_EQ(error_of(replace(kBase, "sequence_parallel: true", "sequence_parallel: {a: 1}")),
            "s.yaml: parallel.sequence_parallel: a map is not a boolean; expected true or false");
  EXPECT_EQ(error_of(replace(kBase, "schedule: interleaved", "schedule: [interleaved]")),
            "s.yaml: parallel.schedule: a list; expected a string");
  EXPECT_EQ(error_of(replace(kBase, "micro_batch_size: 1", "micro_batch_size: one")),
            "s.yaml: parallel.micro_batch_size: 'one' is not an integer; expected an integer >= 1");
}

TEST(Estimate, ReportsMemoryFlopsAndCollectives) {
  Scenario s = parse_scenario(kBase, "s.yaml", "");
  // Memory comes from the simulator (the caller passes its figures through unchanged).
  GpuMemoryFigures first, last;
  first.optimizer = 1.5e9;
  first.total = 40e9;
  first.fits = last.fits = true;
  Estimate e = make_estimate(s, first, last);
  EXPECT_NEAR(e.params / 1e9, 174.6, 0.1);
  EXPECT_TRUE(e.first.fits);
  EXPECT_DOUBLE_EQ(e.first.optimizer, 1.5e9);
  // The first stage's GPU holds 12 of 96 layers, the embedding and positions (t = 8).
  EXPECT_DOUBLE_EQ(e.first.params, stage_parameter_count(s.model, workload_options(s.parallel), 0,
                                                         12, true, false, 8));
  bool saw_tp = false, saw_pp = false, saw_dp = false;
  for (const auto& c : e.collectives) {
    saw_tp = saw_tp || c.purpose.rfind("TP", 0) == 0;
    saw_pp = saw_pp || c.kind == CollectiveKind::kSendRecv;
    saw_dp = saw_dp || c.purpose.rfind("ZeRO gradient reduce-scatter", 0) == 0;
  }
  EXPECT_TRUE(saw_tp && saw_pp && saw_dp);
  nlohmann::ordered_json j = estimate_json(e);
  EXPECT_EQ(j["parallel"]["data_parallel_size"], 16);
  EXPECT_TRUE(j["memory"]["last_stage"]["fits"].get<bool>());
  EXPECT_NE(estimate_table(e).find("first stage"), std::string::npos);
  // The fabric failed_spine_links indexes: 128 DGX A100 nodes, rail-optimized, 20 nodes per rail
  // leaf: ceil(128 / 20) = 7 groups x 8 rails = 56 leaves; 20 ports / oversubscription 1 = 20
  // spines.
  EXPECT_EQ(j["fabric"]["leaves"], 56);
  EXPECT_EQ(j["fabric"]["spines"], 20);
  EXPECT_NE(estimate_table(e).find("fabric     rail-optimized, 20 ports per leaf, oversubscription "
                                   "1: 56 leaves x 20 spines"),
            std::string::npos)
      << estimate_table(e);
}

// The CLI exits 2 with a one-line message on bad input (skipped if the binary is not built).
TEST(EstimateCommand, BadInputExitsTwoWithOneLine) {
  std::string exe = std::string(PW_BINARY_DIR) + "/tools/pipewright";
  if (!std::filesystem::exists(exe)) GTEST_SKIP() << "pipewright not built";
  auto dir = std::filesystem::temp_directory_path() / "pw_hw_estimate_test";
  std::filesystem::create_directories(dir);
  std::string scen = (dir / "bad.yaml").string();
  std::ofstream(scen) << replace(kBase, "nodes: 128", "nodes: 3");
  std::string err = (dir / "err.txt").string();
  int rc = std::system((exe + " estimate " + scen + " > /dev/null 2> " + err).c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  std::string text = read_file(err);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_NE(text.find("parallel.pipeline_model_parallel_size"), std::string::npos) << text;
  rc =
      std::system((exe + " estimate " + scen + " --tp 8 --pp 1 --format json > /dev/null").c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 0);
  // The context, expert and FP8 flags reach the configuration (the JSON reports it): Llama 3
  // 8B on one DGX H100 node at t = 2, p = 1, cp = 2, so d = 8 / (2 x 2) = 2.
  const std::string llama = (dir / "llama.yaml").string();
  std::ofstream(llama) << "model: {preset: llama3-8b}\ncluster: {profile: dgx-h100, nodes: 1}\n"
                          "parallel: {micro_batch_size: 1, global_batch_size: 8}\n";
  const std::string json = (dir / "cp.json").string();
  rc = std::system((exe + " estimate " + llama + " --tp 2 --cp 2 --fp8 hybrid --format json > " +
                    json + " 2> " + err)
                       .c_str());
  ASSERT_EQ(WEXITSTATUS(rc), 0) << read_file(err);
  const nlohmann::json j = nlohmann::json::parse(read_file(json));
  EXPECT_EQ(j["parallel"]["tensor_model_parallel_size"], 2);
  EXPECT_EQ(j["parallel"]["context_parallel_size"], 2);
  EXPECT_EQ(j["parallel"]["data_parallel_size"], 2);
  EXPECT_EQ(j["parallel"]["fp8"], "hybrid");
  EXPECT_EQ(j["parallel"]["expert_model_parallel_size"], 1);
}

}  // namespace
}  // namespace pw::hw
