// Executor tests. The model's gradients are checked against finite differences in-process; the
// pipelined runs are checked against the unpipelined reference by spawning `mpirun` on
// executor_rank_helper (one MPI job per plan).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "executor/model.h"
#include "executor/program.h"
#include "executor/reference.h"
#include "planner/schedules/generator.h"

namespace pw::exec {
namespace {

struct Job {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

Job run_mpi(int ranks, const std::string& args) {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  const std::string cmd = std::string(PW_MPIRUN) + " --oversubscribe -np " + std::to_string(ranks) +
                          " " + PW_RANK_HELPER + " " + args + " 2>&1";
  Job job;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return job;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) job.output += buf;
  const int st = pclose(pipe);
  job.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  return job;
}

ModelDims tiny_dims(int tp) {
  ModelDims d;
  d.num_layers = 2;
  d.hidden = 8;
  d.heads = 2;
  d.ffn = 16;
  d.seq = 4;
  d.vocab = 11;
  d.micro_batch = 2;
  d.tp = tp;
  d.seed = 7;
  return d;
}

// Today's dense layer: 4 query heads sharing 2 key/value heads (GQA) of dimension 6 (not
// hidden / heads = 4), SwiGLU, RMSNorm, rotary positions, no linear biases.
ModelDims modern_dims(int tp) {
  ModelDims d = tiny_dims(tp);
  d.heads = 4;
  d.groups = 2;
  d.kv_channels = 6;
  d.ffn = 12;
  d.swiglu = d.rmsnorm = d.rope = true;
  d.bias = false;
  return d;
}

// The modern layer with per-head query/key norms (Qwen3's qk_layernorm: RMSNorm over each head's
// 6 channels, one weight per norm shared by the heads) and biases on q, k and v only (Qwen2's
// add_qkv_bias); with `layernorm` the norms are LayerNorms (scale and shift).
ModelDims qk_dims(int tp, bool layernorm = false) {
  ModelDims d = modern_dims(tp);
  d.qk_norm = d.qkv_bias = true;
  d.rmsnorm = !layernorm;
  return d;
}

// Today's MoE layer as the executor takes it from a plan (make_model_dims): the modern layer with
// a top-2 of 4 experts MLP (each SwiGLU, 8 wide) on every layer from `first_dense` on.
ModelDims moe_dims(int tp, int ep, int first_dense = 0, int shared = 0, double capacity = 0) {
  ModelShape shape{"t", 2, 8, 4, 12, 4, 11};
  shape.num_query_groups = 2;
  shape.kv_channels = 6;
  shape.swiglu = shape.rmsnorm = shape.rope = true;
  shape.bias = false;
  shape.num_experts = 4;
  shape.moe_router_topk = 2;
  shape.moe_ffn_hidden_size = 8;
  shape.moe_first_dense_layers = first_dense;
  shape.moe_shared_expert_size = shared;
  shape.moe_capacity_factor = capacity;
  ParallelConfig cfg;
  cfg.tensor_parallel = tp;
  cfg.expert_parallel = ep;
  cfg.data_parallel = ep;
  cfg.micro_batch_size = 2;
  return make_model_dims(shape, cfg, 7, "test");
}

double total_loss(StageModel& m, int mbs) {
  double loss = 0;
  for (int g = 0; g < mbs; ++g) {
    m.forward(g, nullptr, g, true);
    loss += m.loss(g);
  }
  return loss;
}

// The analytic gradient (F, B, W) against a central difference of the loss, for every element
// of every tensor of a 2-layer model: an independent check that the reference itself is right.
void check_finite_differences(const ModelDims& d) {
  const int mbs = 2;
  const double scale = 1.0 / (mbs * d.tokens());
  StageModel m(d, 0, d.num_layers, true, true, 0, mbs, scale, nullptr);
  for (int g = 0; g < mbs; ++g) {
    m.forward(g, nullptr, g, true);
    m.backward_input(g, nullptr);
    m.backward_weight(g);
  }
  const double h = 1e-5;
  double worst = 0;
  for (Tensor& t : m.tensors()) {
    for (Eigen::Index k = 0; k < t.value.size(); k += 3) {
      const double w = t.value.data()[k];
      t.value.data()[k] = w + h;
      const double up = total_loss(m, mbs);
      t.value.data()[k] = w - h;
      const double down = total_loss(m, mbs);
      t.value.data()[k] = w;
      const double fd = (up - down) / (2 * h);
      const double an = t.grad.data()[k];
      worst = std::max(worst, std::abs(fd - an) / std::max(1e-3, std::abs(fd)));
    }
  }
  // Central differences are accurate to O(h^2) ~ 1e-10 plus rounding ~ 1e-16 / h ~ 1e-11.
  EXPECT_LT(worst, 1e-6);
}

TEST(StageModel, GradientsMatchFiniteDifferences) { check_finite_differences(tiny_dims(1)); }

// GQA, head dimension of its own, SwiGLU, RMSNorm, RoPE, no biases: the same independent check.
TEST(StageModel, ModernLayerGradientsMatchFiniteDifferences) {
  check_finite_differences(modern_dims(1));
}

// Query/key norms (RMSNorm, and LayerNorm with its shift) and q/k/v-only biases: the same
// independent check.
TEST(StageModel, QueryKeyNormsAndQkvBiasGradientsMatchFiniteDifferences) {
  check_finite_differences(qk_dims(1));
  check_finite_differences(qk_dims(1, true));
}

// A sliding window of 1 (each query sees itself and the token before it) on the modern layer:
// the same independent check. A window of seq - 1 = 3 masks nothing (the last query's keys
// 0..3 are all of them): the loss equals the unwindowed model's to the bit; a window of 1
// changes it. From a plan, a window that masks nothing is none (hw::attention_window).
TEST(StageModel, SlidingWindowGradientsMatchFiniteDifferences) {
  ModelDims d = modern_dims(1);
  d.window = 1;
  check_finite_differences(d);
  auto loss_of = [](const ModelDims& dims) {
    StageModel m(dims, 0, dims.num_layers, true, true, 0, 1, 1.0, nullptr);
    m.forward(0, nullptr, 0, true);
    return m.loss(0);
  };
  ModelDims all = modern_dims(1), inert = all;
  inert.window = 3;
  EXPECT_EQ(loss_of(inert), loss_of(all));
  EXPECT_GT(std::abs(loss_of(d) - loss_of(all)), 1e-9);
  EXPECT_FALSE(d.gpt3_layer());  // the CUDA backends refuse it
  ModelShape shape{"t", 2, 8, 4, 12, 4, 11};
  ParallelConfig cfg;
  shape.window_size = 2;
  EXPECT_EQ(make_model_dims(shape, cfg, 7, "test").window, 2);
  shape.window_size = 3;
  EXPECT_EQ(make_model_dims(shape, cfg, 7, "test").window, 0);
}

// The norms' tensors are head_dim (6) wide, the q/k/v bias 48; the norms change the output (a
// norm of scale about 1 on a query that is not unit-rms). Parameters by hand: the modern
// layer's 880 + 48 (bqkv) + 6 + 6 (the norms' scales) = 940 per layer, two layers 1,880, plus
// 88 + 88 (embedding and head) = 2,056; with LayerNorm, + 8 + 8 (the layer norms' shifts) + 6
// + 6 (the q/k norms' shifts) per layer: 2,056 + 2 x 28 = 2,112.
TEST(StageModel, QueryKeyNormsAndQkvBiasShapesAndParameterCount) {
  const ModelDims d = qk_dims(1);
  EXPECT_FALSE(d.gpt3_layer());  // the CUDA backends run the GPT-3 layer only
  StageModel m(d, 0, 2, true, true, 0, 1, 1.0, nullptr);
  EXPECT_EQ(m.num_parameters(), 2056);
  StageModel ln(qk_dims(1, true), 0, 2, true, true, 0, 1, 1.0, nullptr);
  EXPECT_EQ(ln.num_parameters(), 2112);
  int rows = 0, cols = 0;
  full_shape(d, 0, kBqkv, &rows, &cols);
  EXPECT_EQ(cols, 48);
  for (int id : {kQNormG, kKNormG}) {
    full_shape(d, 0, id, &rows, &cols);
    EXPECT_EQ(rows * cols, 6) << tensor_name(0, id);
  }
  full_shape(d, 0, kQNormB, &rows, &cols);
  EXPECT_EQ(cols, 0);  // RMSNorm: no shift
  EXPECT_EQ(tensor_name(1, kKNormG), "layer1.k_norm.gamma");
  ModelDims plain = modern_dims(1);
  plain.qkv_bias = true;  // the same weights (same seed) without the norms
  StageModel a(d, 0, 2, true, true, 0, 1, 1.0, nullptr),
      b(plain, 0, 2, true, true, 0, 1, 1.0, nullptr);
  a.forward(0, nullptr, 0, true);
  b.forward(0, nullptr, 0, true);
  EXPECT_GT(std::abs(a.loss(0) - b.loss(0)), 1e-9);
}

// Two MoE layers (router, top-2 softmax gates, SwiGLU experts): the same independent check. The
// routing is piecewise constant; a step of 1e-5 does not change which experts a token takes
// here (the FD would be far off if it did).
TEST(StageModel, MoeLayerGradientsMatchFiniteDifferences) {
  check_finite_differences(moe_dims(1, 1));
}

// With a shared expert (SwiGLU, 6 wide) and a capacity factor of 1: each expert takes at most
// ceil(1 x 16 pairs / 4 experts) = 4 of a microbatch's 8 tokens x top-2 pairs, so some pairs are
// dropped (the loss differs from the dropless model's) and the gradients still match finite
// differences (a dropped pair's gate still moves the others' through the softmax).
TEST(StageModel, MoeSharedExpertAndCapacityGradientsMatchFiniteDifferences) {
  const ModelDims d = moe_dims(1, 1, 0, 6, 1.0);
  check_finite_differences(d);
  auto loss_of = [](const ModelDims& dims) {
    StageModel m(dims, 0, dims.num_layers, true, true, 0, 1, 1.0, nullptr);
    m.forward(0, nullptr, 0, true);
    return m.loss(0);
  };
  EXPECT_NE(loss_of(moe_dims(1, 1, 0, 6, 1.0)), loss_of(moe_dims(1, 1, 0, 6, 0.0)));
  // A factor large enough for every pair (4 x 16 / 4 = 16 per expert) drops nothing.
  EXPECT_EQ(loss_of(moe_dims(1, 1, 0, 6, 4.0)), loss_of(moe_dims(1, 1, 0, 6, 0.0)));
}

// The MoE layer's tensors: the router h x E, the experts stacked (E h rows of [gate | up], E f
// rows of W2), no MLP biases. By hand for layer 1 (h = 8, 4 query heads of 6 and 2 key/value
// heads of 6, E = 4, f = 8): norms 8 + 8, wqkv 8 x (24 + 12 + 12) = 384, wo 24 x 8 = 192,
// w1 4 x 8 x 16 = 512, w2 4 x 8 x 8 = 256, router 8 x 4 = 32: 1,392. Layer 0 is the dense
// modern layer (w1 8 x 24, w2 12 x 8): 16 + 384 + 192 + 192 + 96 = 880.
TEST(StageModel, MoeLayerShapesAndParameterCount) {
  const ModelDims d = moe_dims(1, 1, 1);
  EXPECT_FALSE(d.is_moe(0));
  EXPECT_TRUE(d.is_moe(1));
  EXPECT_FALSE(d.gpt3_layer());
  StageModel dense(d, 0, 1, false, false, 0, 1, 1.0, nullptr);
  StageModel moe(d, 1, 2, false, false, 0, 1, 1.0, nullptr);
  EXPECT_EQ(dense.num_parameters(), 880);
  EXPECT_EQ(moe.num_parameters(), 1392);
  EXPECT_EQ(moe.tensors()[kRouter].value.rows(), 8);
  EXPECT_EQ(moe.tensors()[kRouter].value.cols(), 4);
  EXPECT_EQ(dense.tensors()[kRouter].value.size(), 0);
  EXPECT_EQ(moe.tensors()[kB1].value.size(), 0);
  // Split 2 ways by experts and 2 by tensor parallelism: a quarter of each expert tensor.
  const ModelDims q = moe_dims(2, 2, 1);
  StageModel part(q, 1, 2, false, false, 1, 1, 1.0, nullptr, 1, nullptr);
  EXPECT_EQ(part.tensors()[kW1].value.size(), 512 / 4);
  EXPECT_EQ(part.tensors()[kW2].value.size(), 256 / 4);
  EXPECT_TRUE(is_expert_tensor(q, 1, kW1));
  EXPECT_FALSE(is_expert_tensor(q, 1, kRouter));
  EXPECT_FALSE(is_expert_tensor(q, 0, kW1));
}

// The modern layer's tensors: bias and shift tensors empty, the position table empty (RoPE),
// QKV of 4*6 + 2*2*6 = 48 columns, W1 of 2*12 (gate and up), Wo of 24 rows. Parameter count by
// hand: per layer 2 norms * 8 + 8*48 + 24*8 + 8*24 + 12*8 = 880; embedding 11*8 = 88; head 8*11
// = 88; two layers: 1936.
TEST(StageModel, ModernLayerShapesAndParameterCount) {
  const ModelDims d = modern_dims(1);
  StageModel m(d, 0, 2, true, true, 0, 1, 1.0, nullptr);
  EXPECT_EQ(m.num_parameters(), 1936);
  int rows = 0, cols = 0;
  full_shape(d, 0, kWqkv, &rows, &cols);
  EXPECT_EQ(cols, 48);
  full_shape(d, 0, kBqkv, &rows, &cols);
  EXPECT_EQ(cols, 0);
  full_shape(d, 0, kLn1B, &rows, &cols);
  EXPECT_EQ(cols, 0);
  full_shape(d, kEmbeddingLayer, 1, &rows, &cols);
  EXPECT_EQ(rows, 0);
}

// Without positions, causal attention at the last token sees its predecessors as a set:
// swapping tokens 0 and 1 leaves the last output unchanged. Rotary positions make scores depend
// on the distance i - j, so the swap must change it (and with RoPE off it must not).
TEST(StageModel, RotaryPositionsMakeTheOrderOfEarlierTokensMatter) {
  for (bool rope : {false, true}) {
    ModelDims d = modern_dims(1);
    d.rope = rope;
    d.micro_batch = 1;
    Mat x(d.seq, d.hidden);
    for (int i = 0; i < d.seq; ++i)
      for (int c = 0; c < d.hidden; ++c) x(i, c) = std::sin(1.0 + 0.7 * i + 0.3 * c);
    Mat y = x;
    y.row(0) = x.row(1);
    y.row(1) = x.row(0);
    StageModel m(d, 0, 1, false, false, 0, 2, 1.0, nullptr);
    m.forward(0, &x, 0, true);
    m.forward(1, &y, 1, true);
    const double diff =
        (m.output(0).bottomRows(1) - m.output(1).bottomRows(1)).cwiseAbs().maxCoeff();
    if (rope)
      EXPECT_GT(diff, 1e-6);
    else
      EXPECT_LT(diff, 1e-12);
  }
}

// Megatron slicing: the tp x ep slices of every split tensor of layer `layer` tile the full
// tensor exactly once.
void check_tiling(const ModelDims& d, std::initializer_list<int> ids, int layer = 0) {
  for (int id : ids) {
    int rows = 0, cols = 0;
    full_shape(d, layer, id, &rows, &cols);
    std::vector<int> hits(static_cast<std::size_t>(rows) * cols, 0);
    for (int r = 0; r < d.tp; ++r)
      for (int e = 0; e < d.ep; ++e) {
        StageModel m(d, layer, layer + 1, false, false, r, 1, 1.0, nullptr, e, nullptr);
        const Tensor& t = m.tensors()[id];
        for (Eigen::Index i = 0; i < t.value.rows(); ++i)
          for (Eigen::Index j = 0; j < t.value.cols(); ++j) {
            int gr = 0, gc = 0;
            global_coords(d, layer, id, r, e, static_cast<int>(i), static_cast<int>(j), &gr, &gc);
            ASSERT_TRUE(gr >= 0 && gr < rows && gc >= 0 && gc < cols) << tensor_name(layer, id);
            ++hits[static_cast<std::size_t>(gr) * cols + gc];
          }
      }
    // Replicated: the router over every rank, the shared expert over the expert ranks.
    const bool qk_norm = id == kQNormG || id == kQNormB || id == kKNormG || id == kKNormB;
    const int copies = qk_norm                              ? d.tp * d.ep
                       : !d.is_moe(layer)                   ? 1
                       : id == kRouter                      ? d.tp * d.ep
                       : id == kSharedW1 || id == kSharedW2 ? d.ep
                                                            : 1;
    for (int h : hits) ASSERT_EQ(h, copies) << tensor_name(layer, id);
  }
}

TEST(StageModel, TensorParallelSlicesTileTheFullTensors) {
  check_tiling(tiny_dims(2), {kWqkv, kBqkv, kWo, kW1, kB1, kW2});
}

// The same with grouped keys/values and SwiGLU's [gate | up] columns.
TEST(StageModel, ModernTensorParallelSlicesTileTheFullTensors) {
  check_tiling(modern_dims(2), {kWqkv, kWo, kW1, kW2});
}

// The q/k/v bias split like the projection's columns; the query/key norms whole on every rank
// (replicated: each element held twice at tp = 2).
TEST(StageModel, QueryKeyNormsAreReplicatedAndTheQkvBiasSplitOverTensorParallelRanks) {
  check_tiling(qk_dims(2), {kWqkv, kBqkv, kQNormG, kKNormG});
  check_tiling(qk_dims(2, true), {kQNormB, kKNormB});
}

// Experts split 2 ways by expert parallelism and each 2 ways by tensor parallelism: the four
// slices of the stacked W1 ([gate | up] columns) and W2 tile them; the router is whole on every
// rank (replicated, each element held 4 times); the shared expert is split by TP only (each
// element held by the 2 expert ranks).
TEST(StageModel, ExpertAndTensorParallelSlicesTileTheExperts) {
  check_tiling(moe_dims(2, 2), {kW1, kW2, kRouter}, 1);
  check_tiling(moe_dims(2, 2, 0, 6), {kSharedW1, kSharedW2}, 1);
}

TEST(StageModel, RefusesWhatItDoesNotRunNamingTheKey) {
  ModelShape shape{"t", 2, 16, 4, 32, 8, 32};
  ParallelConfig cfg;
  // Experts run when dropless, without biases or a shared expert, split by ep dividing both the
  // experts and the data-parallel size, each expert split like the dense MLP.
  auto key_of = [&](const ModelShape& s, const ParallelConfig& c) -> std::string {
    try {
      make_model_dims(s, c, 1, "plan.yaml");
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.file(), "plan.yaml");
      return e.key();
    }
    return "";
  };
  shape.num_experts = 8;
  EXPECT_EQ(key_of(shape, cfg), "model.moe_router_topk");  // hwmodels' shape check: topk missing
  shape.moe_router_topk = 2;
  EXPECT_EQ(key_of(shape, cfg), "model.add_bias_linear");
  shape.bias = false;
  shape.moe_shared_expert_size = 16;  // a shared expert and a capacity factor run
  shape.moe_capacity_factor = 1.25;
  EXPECT_EQ(key_of(shape, cfg), "");
  cfg.expert_parallel = 2;  // data_parallel 1: no replicas to split the experts over
  EXPECT_EQ(key_of(shape, cfg), "config.expert_parallel");
  cfg.data_parallel = 4;
  cfg.expert_parallel = 3;  // 8 experts do not split 3 ways
  EXPECT_EQ(key_of(shape, cfg), "config.expert_parallel");
  cfg.expert_parallel = 2;
  cfg.expert_tensor_parallel = 2;  // tensor_parallel is 1
  EXPECT_EQ(key_of(shape, cfg), "config.expert_tensor_parallel");
  cfg.expert_tensor_parallel = 0;
  EXPECT_EQ(key_of(shape, cfg), "");
  cfg.context_parallel = 2;
  EXPECT_EQ(key_of(shape, cfg), "config.context_parallel");
  cfg = ParallelConfig{};
  // Multi-head latent attention is planned and simulated, not run.
  ModelShape mla = shape;
  mla.num_experts = mla.moe_router_topk = mla.moe_shared_expert_size = 0;
  mla.moe_capacity_factor = 0;
  mla.kv_lora_rank = 8;
  mla.qk_head_dim = mla.v_head_dim = 4;
  mla.qk_pos_emb_head_dim = 2;
  EXPECT_EQ(key_of(mla, cfg), "model.kv_lora_rank");
  // So are multi-token prediction depths.
  ModelShape mtp = shape;
  mtp.num_experts = mtp.moe_router_topk = mtp.moe_shared_expert_size = 0;
  mtp.moe_capacity_factor = 0;
  mtp.rope = true;
  mtp.mtp_num_layers = 1;
  EXPECT_EQ(key_of(mtp, cfg), "model.mtp_num_layers");
  shape.num_experts = shape.moe_router_topk = shape.moe_shared_expert_size = 0;
  shape.moe_capacity_factor = 0;
  shape.bias = true;
  shape.num_query_groups = 3;  // 4 heads cannot share 3 groups
  EXPECT_THROW(make_model_dims(shape, cfg, 1, "plan.yaml"), ConfigError);
  shape.num_query_groups = 2;
  cfg.tensor_parallel = 4;  // 2 key/value heads cannot split 4 ways
  try {
    make_model_dims(shape, cfg, 1, "plan.yaml");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "parallel.tensor_model_parallel_size");
  }
  cfg.tensor_parallel = 2;
  shape.rope = true;
  shape.kv_channels = 5;  // RoPE turns pairs
  EXPECT_THROW(make_model_dims(shape, cfg, 1, "plan.yaml"), ConfigError);
  shape.kv_channels = 6;
  const ModelDims d = make_model_dims(shape, cfg, 1, "plan.yaml");
  EXPECT_EQ(d.local_kv_heads(), 1);
  EXPECT_FALSE(d.gpt3_layer());
}

TEST(StageModel, RejectsHeadsThatTensorParallelismCannotSplit) {
  ModelShape shape{"t", 2, 16, 3, 32, 8, 32};
  ParallelConfig cfg;
  cfg.tensor_parallel = 2;
  EXPECT_THROW(make_model_dims(shape, cfg, 1, "plan.yaml"), ConfigError);  // 16 % 3 != 0
}

// 1F1B with p = 4 and m = 8, compute-only: devices 0 and 3 each add m sends and m receives
// (16), devices 1 and 2 add 2m of each (32), every device an OPT: 16+32+32+16+4 = 100; with
// dp = 2 one REDUCE_GRAD per stage on top: 104.
TEST(Program, CompleteImpliedCommunicationOf1F1B) {
  GeneratorParams gp;
  gp.p = 4;
  gp.m = 8;
  const Schedule s = generate_schedule(default_registry(), "1f1b", gp);
  EXPECT_EQ(build_program(s, 1).num_implied, 100);
  EXPECT_EQ(build_program(s, 2).num_implied, 104);
  const Program p = build_program(s, 2);
  EXPECT_EQ(p.device[0].front().action.kind, ActionKind::kF);
  EXPECT_EQ(p.device[1].front().action.kind, ActionKind::kRecvF);
  EXPECT_EQ(p.device[1].front().peer, 0);
  EXPECT_EQ(p.device[3].back().action.kind, ActionKind::kOptStep);
}

class EveryGenerator : public ::testing::TestWithParam<std::string> {};

// Runs registry generator `name` at p = 4, m = 8 on 8 ranks with `layout` and expects the
// gradients of the unpipelined reference (skipped when the generator does not take p=4, m=8).
void run_generator_on_8_ranks(const std::string& name, const std::string& layout) {
  GeneratorParams gp;
  gp.p = 4;
  gp.m = 8;
  gp.num_layers = 8;
  try {
    generate_schedule(default_registry(), name, gp);
  } catch (const ConfigError& e) {
    GTEST_SKIP() << name << " does not take p=4, m=8: " << e.what();
  }
  const Job job = run_mpi(8, "--schedule " + name + " " + layout);
  EXPECT_EQ(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("RESULT match=1"), std::string::npos) << job.output;
}

// A generator's name as a test name (gtest takes letters, digits and '_').
std::string generator_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

// p = 4, m = 8, dp = 2: the gradients of every parameter equal the unpipelined reference
// within 1e-9 relative and the loss is bit-identical.
TEST_P(EveryGenerator, MatchesUnpipelinedTrainingWithDataParallelism) {
  run_generator_on_8_ranks(GetParam(), "--dp 2");
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryGenerator, ::testing::ValuesIn(default_registry().names()),
                         generator_test_name);

TEST(Executor, TensorParallel1F1BMatchesReference) {
  const Job job = run_mpi(8, "--schedule 1f1b --tp 2");
  EXPECT_EQ(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("RESULT match=1"), std::string::npos) << job.output;
}

TEST(Executor, LoweredZbH1WithDataAndTensorParallelismMatchesReference) {
  const Job job = run_mpi(16, "--schedule zb-h1 --dp 2 --tp 2 --lower 1");
  EXPECT_EQ(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("RESULT match=1"), std::string::npos) << job.output;
}

// Today's dense layer (GQA 4 heads / 2 groups, head dim 6, SwiGLU, RMSNorm, RoPE, no biases)
// pipelined with tensor and data parallelism under a zero-bubble schedule (split B and W):
// every gradient equals the unpipelined reference's.
TEST(Executor, ModernLayerWithTensorAndDataParallelismMatchesReference) {
  const Job job = run_mpi(16, "--schedule zb-h1 --dp 2 --tp 2 --model modern");
  EXPECT_EQ(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("RESULT match=1"), std::string::npos) << job.output;
}

// The same with Qwen3's query/key norms and Qwen2's q/k/v biases: each TP rank normalizes its own
// heads, so the norms' weight gradients are partial until summed over the TP group in W (split
// from B under ZB-H1).
TEST(Executor, QueryKeyNormsWithTensorAndDataParallelismMatchReference) {
  const Job job = run_mpi(16, "--schedule zb-h1 --dp 2 --tp 2 --model qk");
  EXPECT_EQ(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("RESULT match=1"), std::string::npos) << job.output;
}

class EveryGeneratorWithExperts : public ::testing::TestWithParam<std::string> {};

// The MoE model (GQA + SwiGLU + RMSNorm + RoPE, one dense layer then seven layers of top-2 of 4
// experts) with p = 4, m = 8, dp = 2 and the experts split over the two replicas (EP = 2,
// tokens exchanged by all-to-all): every gradient equals the unpipelined reference's within
// 1e-9 relative (the loss within 1e-12: an expert's GEMM takes both replicas' tokens at once).
TEST_P(EveryGeneratorWithExperts, MatchesUnpipelinedTrainingWithExpertParallelism) {
  run_generator_on_8_ranks(GetParam(), "--dp 2 --ep 2 --model moe");
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryGeneratorWithExperts,
                         ::testing::ValuesIn(default_registry().names()), generator_test_name);

// Experts split by tensor parallelism too (expert TP = TP = 2, EP = 2, dp = 2, 16 ranks), under a
// split-backward schedule: the gate gradients and expert outputs are partial sums over the TP
// ranks until reduced.
TEST(Executor, ExpertAndTensorParallelMoeMatchesReference) {
  const Job job = run_mpi(16, "--schedule zb-h1 --dp 2 --tp 2 --ep 2 --model moe");
  EXPECT_EQ(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("RESULT match=1"), std::string::npos) << job.output;
}

// A shared expert and a capacity factor of 1 (pairs dropped) under expert and tensor
// parallelism: the same gradients as the unpipelined reference.
TEST(Executor, SharedExpertAndCapacityFactorMatchReference) {
  for (const char* layout : {"--dp 2 --ep 2", "--dp 2 --ep 2 --tp 2"}) {
    const int ranks = std::string(layout).find("--tp") == std::string::npos ? 8 : 16;
    const Job job = run_mpi(
        ranks, std::string("--schedule zb-h1 --model moe --shared 8 ") + "--capacity 1 " + layout);
    EXPECT_EQ(job.exit_code, 0) << layout << ": " << job.output;
    EXPECT_NE(job.output.find("RESULT match=1"), std::string::npos) << layout << job.output;
  }
}

// Four replicas, experts split two ways: each expert is held by two replicas, whose expert
// gradients are summed apart from the shared tensors (over all four); with ZeRO-3-style weight
// gathers (zeropp) the experts are gathered over those two replicas only.
TEST(Executor, ExpertDataParallelReplicasReduceTheirExperts) {
  for (const char* sched : {"1f1b", "zeropp"}) {
    const Job job = run_mpi(8, std::string("--schedule ") + sched +
                                   " --p 2 --m 4 --dp 4 --ep 2 --model moe --layers 4");
    EXPECT_EQ(job.exit_code, 0) << sched << ": " << job.output;
    EXPECT_NE(job.output.find("RESULT match=1"), std::string::npos) << sched << ": " << job.output;
  }
}

TEST(Executor, AdamOverSeveralIterationsKeepsReplicasConsistent) {
  const Job job = run_mpi(8, "--schedule interleaved --dp 2 --optimizer adam --iterations 3");
  EXPECT_EQ(job.exit_code, 0) << job.output;
}

TEST(Executor, PlanWithRemovedActionIsRejectedBeforeRunning) {
  const Job job = run_mpi(4, "--schedule 1f1b --corrupt drop");
  EXPECT_EQ(job.exit_code, 2) << job.output;
  EXPECT_NE(job.output.find("is missing"), std::string::npos) << job.output;
  EXPECT_EQ(job.output.find("RESULT"), std::string::npos) << job.output;
}

TEST(Executor, PlanWithSwappedActionsIsRejectedAsDeadlock) {
  const Job job = run_mpi(4, "--schedule gpipe --corrupt swap");
  EXPECT_EQ(job.exit_code, 2) << job.output;
  EXPECT_NE(job.output.find("deadlock"), std::string::npos) << job.output;
}

TEST(Executor, WrongRankCountNamesBothCounts) {
  const Job job = run_mpi(2, "--schedule 1f1b --dp 2");
  EXPECT_EQ(job.exit_code, 2) << job.output;
  EXPECT_NE(job.output.find("needs 8 ranks"), std::string::npos) << job.output;
  EXPECT_NE(job.output.find("2 were launched"), std::string::npos) << job.output;
}

// A receive that never gets its send (validation bypassed): the watchdog fires within its limit,
// every rank says what it waits for, and the job exits non-zero.
TEST(Executor, WatchdogReportsAHangAndAborts) {
  const Job job =
      run_mpi(4, "--schedule 1f1b --corrupt drop-send --skip-validation 1 --watchdog 2");
  EXPECT_NE(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("watchdog"), std::string::npos) << job.output;
  EXPECT_NE(job.output.find("RECV_F stage 1 mb 0"), std::string::npos) << job.output;
  for (int r = 0; r < 4; ++r)
    EXPECT_NE(job.output.find("rank " + std::to_string(r) + " (dp 0, pp " + std::to_string(r)),
              std::string::npos)
        << job.output;
  EXPECT_EQ(job.output.find("RESULT"), std::string::npos) << job.output;
}

}  // namespace
}  // namespace pw::exec
