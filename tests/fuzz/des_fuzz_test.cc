// Whole-pipeline fuzzing of `simulate SCENARIO`: scenarios mutated by value (not by byte, which
// the readers' fuzzing covers and which rarely gets past the YAML parser) are loaded, their
// schedule generated and their iteration simulated by the discrete-event simulator, as the CLI
// does. Seeds are small scenarios that between them use every part of the model: dense and
// modern layers (GQA, SwiGLU, RMSNorm, untied embeddings), MoE with expert parallelism and
// multi-token prediction, context
// parallelism, FP8, ZeRO 1-3, offload, recomputation, every schedule family, uneven splits and
// heterogeneous clusters (slow GPUs, degraded and failed NICs, failed spine links, background
// flows). Each mutation sets one or two keys of the model, cluster or parallel section to a
// value drawn from the values that matter (0, 1, powers of two, odd sizes, huge and tiny
// numbers, every schedule and option name, lists and maps) or, for a number, to a neighbour
// (twice, half, one more or less), or removes it. The loader must accept the input or
// refuse it with a one-line ConfigError; an accepted input small enough to simulate quickly must
// then generate (or be refused with a ConfigError) and simulate to completion with finite,
// positive figures. An abort (a PW_ASSERT), a crash or another exception fails. Deterministic.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "hwmodels/scenario.h"
#include "planner/schedules/generator.h"
#include "planner/search/scenario_input.h"
#include "planner/search/search.h"
#include "sim/iteration.h"

namespace pw {
namespace {

const char* const kSeeds[] = {
    // Dense GPT, interleaved, selective recompute, sequence parallel, distributed optimizer.
    R"(model: {num_layers: 8, hidden_size: 1024, num_attention_heads: 16, seq_length: 1024,
        vocab_size: 32000}
cluster: {profile: dgx-a100-80gb, nodes: 2}
parallel: {tensor_model_parallel_size: 2, pipeline_model_parallel_size: 2,
           num_layers_per_virtual_pipeline_stage: 2, micro_batch_size: 1, global_batch_size: 16,
           sequence_parallel: true, recompute_granularity: selective,
           use_distributed_optimizer: true, schedule: interleaved})",
    // Today's dense layers with context parallelism, FP8 and ZeRO-3 on H100.
    R"(model: {num_layers: 8, hidden_size: 1024, num_attention_heads: 16, num_query_groups: 4,
        ffn_hidden_size: 2816, swiglu: true, normalization: RMSNorm,
        untie_embeddings_and_output_weights: true, position_embedding_type: rope,
        seq_length: 4096, vocab_size: 32000, use_flash_attn: true}
cluster: {profile: dgx-h100, nodes: 2}
parallel: {tensor_model_parallel_size: 2, context_parallel_size: 2, pipeline_model_parallel_size: 2,
           micro_batch_size: 1, global_batch_size: 8, zero_stage: 3, zero3_gather: layer,
           fp8: hybrid, schedule: 1f1b})",
    // Megatron's overlaps (gradient reduce, parameter gather, TP) and a context-parallel form.
    R"(model: {num_layers: 8, hidden_size: 1024, num_attention_heads: 16, seq_length: 4096,
        vocab_size: 32000, use_flash_attn: true}
cluster: {profile: dgx-h100, nodes: 2}
parallel: {tensor_model_parallel_size: 2, context_parallel_size: 2, pipeline_model_parallel_size: 2,
           num_layers_per_virtual_pipeline_stage: 2, micro_batch_size: 1, global_batch_size: 16,
           sequence_parallel: true, use_distributed_optimizer: true, overlap_grad_reduce: true,
           overlap_param_gather: true, tp_comm_overlap: true, cp_comm_type: p2p,
           schedule: interleaved})",
    // Mixture of experts with expert parallelism, first layer dense, a multi-token prediction
    // depth, zero-bubble schedule, Megatron's pipeline layout (2 and 4 layers).
    R"(model: {num_layers: 6, hidden_size: 1024, num_attention_heads: 16, seq_length: 2048,
        vocab_size: 32000, num_experts: 8, moe_router_topk: 2, moe_ffn_hidden_size: 512,
        moe_shared_expert_intermediate_size: 512, moe_first_dense_layers: 1, swiglu: true,
        position_embedding_type: rope, mtp_num_layers: 1}
cluster: {profile: dgx-h100, nodes: 1}
parallel: {tensor_model_parallel_size: 1, pipeline_model_parallel_size: 2,
           expert_model_parallel_size: 4, micro_batch_size: 1, global_batch_size: 16,
           pipeline_model_parallel_layout: "Et*2|t*4mL", use_distributed_optimizer: true,
           schedule: zb-h1})",
    // Offload, ZeRO-2, full recompute, uneven split, V-shape schedule.
    R"(model: {num_layers: 10, hidden_size: 1024, num_attention_heads: 16, seq_length: 1024,
        vocab_size: 32000}
cluster: {profile: dgx-a100-80gb, nodes: 1}
parallel: {tensor_model_parallel_size: 1, pipeline_model_parallel_size: 4,
           decoder_first_pipeline_num_layers: 1, decoder_last_pipeline_num_layers: 3,
           micro_batch_size: 2, global_batch_size: 32, zero_stage: 2, optimizer_offload: true,
           recompute_granularity: full, schedule: 1f1b})",
    // A heterogeneous cluster: every GPU simulated.
    R"(model: {num_layers: 4, hidden_size: 1024, num_attention_heads: 16, seq_length: 1024,
        vocab_size: 32000}
cluster: {profile: dgx-a100-80gb, nodes: 2, fabric: fat-tree, leaf_ports: 8,
          slow_gpus: {3: 1.5}, degraded_nics: {9: 2}, failed_nics: [12],
          failed_spine_links: [[0, 0]], degraded_spine_links: [[1, 2, 4]],
          background_flows: [[0, 8]]}
parallel: {tensor_model_parallel_size: 4, pipeline_model_parallel_size: 2,
           micro_batch_size: 1, global_batch_size: 8, schedule: 1f1b})",
};

const char* const kSections[] = {"model", "cluster", "parallel"};

// Values that matter: sizes around the seeds', boundaries, every name an option takes.
const std::vector<std::string> kValues = {"0",
                                          "1",
                                          "2",
                                          "3",
                                          "4",
                                          "5",
                                          "6",
                                          "7",
                                          "8",
                                          "12",
                                          "16",
                                          "24",
                                          "32",
                                          "64",
                                          "-1",
                                          "1000000",
                                          "2147483647",
                                          "0.5",
                                          "1.5",
                                          "1e9",
                                          "1e-9",
                                          ".nan",
                                          "true",
                                          "false",
                                          "full",
                                          "selective",
                                          "none",
                                          "1f1b",
                                          "interleaved",
                                          "gpipe",
                                          "zb-h1",
                                          "zb-h2",
                                          "zb-2p",
                                          "zb-1p",
                                          "v-half",
                                          "v-min",
                                          "v-zb",
                                          "v-adaptive",
                                          "dualpipev",
                                          "bitpipe",
                                          "breadth-first",
                                          "zeropp",
                                          "p2p",
                                          "all_gather",
                                          "a2a",
                                          "e4m3",
                                          "hybrid",
                                          "off",
                                          "layer",
                                          "stage",
                                          "RMSNorm",
                                          "LayerNorm",
                                          "rope",
                                          "learned_absolute",
                                          "fat-tree",
                                          "rail-optimized",
                                          "dgx-h100",
                                          "dgx-a100-80gb",
                                          "gpt3-175b",
                                          "[0, 1]",
                                          "[[0, 1]]",
                                          "[[0, 15]]",
                                          "[[1, 0, 2]]",
                                          "{0: 2}",
                                          "{15: 1.2}",
                                          "[]",
                                          "{}",
                                          "[3]"};

std::string mutate(const std::string& seed, std::mt19937_64& rng) {
  YAML::Node root = YAML::Load(seed);
  const int count = 1 + static_cast<int>(rng() % 2);
  for (int i = 0; i < count; ++i) {
    const std::size_t sec = rng() % 3;
    YAML::Node section = root[kSections[sec]];
    std::string key;
    if (rng() % 2 == 0 && section.size() > 0) {  // change a key the seed has
      std::size_t k = rng() % section.size(), n = 0;
      for (const auto& kv : section)
        if (n++ == k) key = kv.first.as<std::string>();
    } else {  // add (or change) any key of the section
      static const std::vector<std::string> keys[3] = {
          hw::scenario_keys("model"), hw::scenario_keys("cluster"), hw::scenario_keys("parallel")};
      key = keys[sec][rng() % keys[sec].size()];
    }
    const YAML::Node old = section[key];
    double v = 0;
    const bool numeric = old.IsScalar() && YAML::convert<double>::decode(old, v);
    if (rng() % 10 == 0) {
      section.remove(key);
    } else if (numeric && rng() % 2 == 0) {  // a neighbouring size: most of these load
      const double next[] = {v * 2, std::floor(v / 2), v + 1, v - 1, 1};
      section[key] = fmt::format("{}", next[rng() % 5]);
    } else {
      section[key] = YAML::Load(kValues[rng() % kValues.size()]);
    }
  }
  YAML::Emitter out;
  out << root;
  return out.c_str();
}

// Small enough to simulate in milliseconds (the point is robustness, not scale).
bool small_enough(const hw::Scenario& s) {
  const ParallelConfig& p = s.parallel;
  return s.num_gpus() <= 64 && p.pipeline_parallel <= 8 && s.num_microbatches() <= 64 &&
         s.model.num_layers <= 48 && p.virtual_stages <= 8 && s.model.hidden_size <= 8192 &&
         s.model.seq_length <= 32768;
}

struct Counts {
  int refused_load = 0, refused_schedule = 0, simulated = 0, too_big = 0;
};

void fuzz_seed(const std::string& seed, int n, std::uint64_t salt, Counts* c) {
  std::mt19937_64 rng(0x5deece66dULL ^ salt);
  for (int i = 0; i < n; ++i) {
    const std::string input = i == 0 ? seed : mutate(seed, rng);
    const std::string what = fmt::format("seed {} input #{}:\n{}", salt, i, input);
    hw::Scenario s;
    try {
      s = hw::parse_scenario(input, "fuzz.yaml", ".");
    } catch (const ConfigError& e) {
      EXPECT_NE(i, 0) << "the unmutated seed is refused: " << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << what << "\n" << e.what();
      ++c->refused_load;
      continue;
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << "\nloader threw: " << e.what();
      continue;
    }
    if (!small_enough(s)) {
      ++c->too_big;
      continue;
    }
    IterationInput in;
    try {
      in = scenario_iteration_input(s);
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << what << "\n" << e.what();
      ++c->refused_schedule;
      continue;
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << "\nschedule generation threw: " << e.what();
      continue;
    }
    try {
      const auto t0 = std::chrono::steady_clock::now();
      const IterationResult r = simulate_iteration(in, IterationOptions{});
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - t0)
                          .count();
      // PW_FUZZ_SLOW=1 (by hand) names inputs that took over 100 ms: a small scenario that
      // simulates slowly is a bug too (a size the loader should bound).
      if (std::getenv("PW_FUZZ_SLOW") != nullptr && ms > 100)
        std::printf("SLOW %lld ms, %zu tasks:\n%s\n", static_cast<long long>(ms), r.tasks,
                    input.c_str());
      ++c->simulated;
      EXPECT_GT(r.iteration, 0) << what;
      EXPECT_TRUE(std::isfinite(r.mfu) && r.mfu > 0 && r.mfu < 1.5) << what << "\nMFU " << r.mfu;
      EXPECT_FALSE(r.memory.empty()) << what;
      for (const DeviceMemory& m : r.memory)
        EXPECT_TRUE(std::isfinite(m.peak) && m.peak >= 0) << what << "\npeak " << m.peak;
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << "\nsimulation threw: " << e.what();
    }
  }
}

// 400 inputs per seed in the test command (about a sixth get simulated); PW_FUZZ_INPUTS=N runs
// N (deeper runs by hand).
const int kInputsPerSeed = [] {
  const char* e = std::getenv("PW_FUZZ_INPUTS");
  return e != nullptr && std::atoi(e) > 0 ? std::atoi(e) : 400;
}();

TEST(DesFuzz, MutatedScenariosAreRefusedOrSimulatedToTheEnd) {
  Counts c;
  std::uint64_t salt = 1;
  for (const char* seed : kSeeds) fuzz_seed(seed, kInputsPerSeed, salt++, &c);
  RecordProperty("simulated", c.simulated);
  // The harness must exercise both paths: refusals and full simulations of mutated inputs.
  EXPECT_GT(c.refused_load, 0);
  EXPECT_GT(c.simulated, static_cast<int>(std::size(kSeeds)));
  std::printf("refused by the loader %d, by the generator %d, simulated %d, too big %d\n",
              c.refused_load, c.refused_schedule, c.simulated, c.too_big);
}

// `plan`'s search on mutated scenarios (a few per seed: each runs the three tiers): it must
// end with a ranking whose #1 the DES simulated and found to fit, or with nothing that fits, or
// refuse the input with a ConfigError; never crash or throw anything else.
TEST(DesFuzz, MutatedScenariosArePlannedOrRefused) {
  const GeneratorRegistry registry = default_registry();
  int planned = 0, refused = 0, nothing_fits = 0;
  std::uint64_t salt = 100;
  // 20 per seed (100 mutated scenarios, some twenty searches); PW_FUZZ_PLANS=N runs N per seed
  // (by hand: 600 per seed, 351 searches, 28 s, nothing found).
  const char* env = std::getenv("PW_FUZZ_PLANS");
  const int n = env != nullptr && std::atoi(env) > 0 ? std::atoi(env) : 20;
  for (const char* seed : kSeeds) {
    std::mt19937_64 rng(0x2545f4914f6cdd1dULL ^ salt++);
    for (int i = 0; i < n; ++i) {
      const std::string input = mutate(seed, rng);
      try {
        const hw::Scenario s = hw::parse_scenario(input, "fuzz.yaml", ".");
        if (!s.topology.symmetric() || !small_enough(s)) continue;
        const PlanProblem pr = plan_problem(s);
        const SearchSpace space =
            default_space(pr, registry, {s.parallel.global_batch_size}, nullptr);
        SearchOptions opt;
        opt.top = 3;
        opt.threads = 1;
        opt.max_evaluations = 300;
        opt.des_top = 2;
        opt.des_budget = 8;
        const SearchResult r = run_search(pr, space, registry, opt);
        if (r.top.empty()) {
          ++nothing_fits;
          continue;
        }
        ++planned;
        EXPECT_TRUE(r.top.front().feasible) << input;
        EXPECT_GT(r.top.front().iteration, 0) << input;
        EXPECT_TRUE(std::isfinite(r.top.front().iteration)) << input;
      } catch (const ConfigError& e) {
        ++refused;
        EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << input << "\n" << e.what();
      } catch (const std::exception& e) {
        ADD_FAILURE() << input << "\nplan threw: " << e.what();
      }
    }
  }
  std::printf("planned %d, nothing fits %d, refused %d\n", planned, nothing_fits, refused);
  EXPECT_GT(planned, 0);
}

}  // namespace
}  // namespace pw
