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

// Megatron slicing: the tp = 2 slices of every split tensor tile the full tensor exactly once.
void check_tiling(const ModelDims& d, std::initializer_list<int> ids) {
  for (int id : ids) {
    int rows = 0, cols = 0;
    full_shape(d, 0, id, &rows, &cols);
    std::vector<int> hits(static_cast<std::size_t>(rows) * cols, 0);
    for (int r = 0; r < 2; ++r) {
      StageModel m(d, 0, 1, false, false, r, 1, 1.0, nullptr);
      const Tensor& t = m.tensors()[id];
      for (Eigen::Index i = 0; i < t.value.rows(); ++i)
        for (Eigen::Index j = 0; j < t.value.cols(); ++j) {
          int gr = 0, gc = 0;
          global_coords(d, 0, id, r, static_cast<int>(i), static_cast<int>(j), &gr, &gc);
          ++hits[static_cast<std::size_t>(gr) * cols + gc];
        }
    }
    for (int h : hits) ASSERT_EQ(h, 1) << tensor_name(0, id);
  }
}

TEST(StageModel, TensorParallelSlicesTileTheFullTensors) {
  check_tiling(tiny_dims(2), {kWqkv, kBqkv, kWo, kW1, kB1, kW2});
}

// The same with grouped keys/values and SwiGLU's [gate | up] columns.
TEST(StageModel, ModernTensorParallelSlicesTileTheFullTensors) {
  check_tiling(modern_dims(2), {kWqkv, kWo, kW1, kW2});
}

TEST(StageModel, RefusesWhatItDoesNotRunNamingTheKey) {
  ModelShape shape{"t", 2, 16, 4, 32, 8, 32};
  ParallelConfig cfg;
  shape.num_experts = 8;
  try {
    make_model_dims(shape, cfg, 1, "plan.yaml");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "model.num_experts");
  }
  shape.num_experts = 0;
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

// p = 4, m = 8, dp = 2: the gradients of every parameter equal the unpipelined reference
// within 1e-9 relative and the loss is bit-identical.
TEST_P(EveryGenerator, MatchesUnpipelinedTrainingWithDataParallelism) {
  GeneratorParams gp;
  gp.p = 4;
  gp.m = 8;
  gp.num_layers = 8;
  try {
    generate_schedule(default_registry(), GetParam(), gp);
  } catch (const ConfigError& e) {
    GTEST_SKIP() << GetParam() << " does not take p=4, m=8: " << e.what();
  }
  const Job job = run_mpi(8, "--schedule " + GetParam() + " --dp 2");
  EXPECT_EQ(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("RESULT match=1"), std::string::npos) << job.output;
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryGenerator, ::testing::ValuesIn(default_registry().names()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

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
