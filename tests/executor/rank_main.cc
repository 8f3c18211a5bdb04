// Test helper run under mpirun: builds a plan from a registry generator (optionally lowered or
// deliberately corrupted), executes it on the CPU backend and, on rank 0, prints one RESULT line.
// Exit 0 when the gradients match the unpipelined reference, 1 when not, 2 on bad input.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/lowering.h"
#include "core/plan_io.h"
#include "executor/executor.h"
#include "planner/schedules/generator.h"

namespace {

struct Args {
  std::string schedule = "1f1b";
  int p = 4, m = 8, dp = 1, tp = 1, ep = 1, layers = 8, shared = 0;
  double capacity = 0;
  bool lower = false;
  std::string corrupt = "none";  // none | drop | swap | drop-send
  std::string save_plan;         // write the plan (YAML/JSON) instead of running it
  std::string model = "gpt";     // gpt | modern (GQA, SwiGLU, RMSNorm, RoPE, no biases) | moe
                                 // (modern with a top-2 of 4 experts MLP after one dense layer)
  pw::exec::ExecuteOptions opt;
};

Args parse(int argc, char** argv) {
  Args a;
  a.opt.check_gradients = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--schedule")
      a.schedule = v;
    else if (k == "--p")
      a.p = std::atoi(v.c_str());
    else if (k == "--m")
      a.m = std::atoi(v.c_str());
    else if (k == "--dp")
      a.dp = std::atoi(v.c_str());
    else if (k == "--tp")
      a.tp = std::atoi(v.c_str());
    else if (k == "--ep")
      a.ep = std::atoi(v.c_str());
    else if (k == "--shared")
      a.shared = std::atoi(v.c_str());
    else if (k == "--capacity")
      a.capacity = std::atof(v.c_str());
    else if (k == "--layers")
      a.layers = std::atoi(v.c_str());
    else if (k == "--lower")
      a.lower = v == "1";
    else if (k == "--corrupt")
      a.corrupt = v;
    else if (k == "--watchdog")
      a.opt.watchdog_seconds = std::atof(v.c_str());
    else if (k == "--skip-validation")
      a.opt.skip_validation = v == "1";
    else if (k == "--optimizer")
      a.opt.optimizer = v;
    else if (k == "--iterations")
      a.opt.iterations = std::atoi(v.c_str());
    else if (k == "--save-plan")
      a.save_plan = v;
    else if (k == "--model")
      a.model = v;
  }
  return a;
}

pw::Plan make_plan(const Args& a) {
  pw::GeneratorParams gp;
  gp.p = a.p;
  gp.m = a.m;
  gp.num_layers = a.layers;
  pw::Plan plan;
  plan.schedule = pw::generate_schedule(pw::default_registry(), a.schedule, gp);
  if (a.lower || a.corrupt == "drop-send") plan.schedule = pw::lower_communication(plan.schedule);
  auto& acts = plan.schedule.actions;
  if (a.corrupt == "drop") {
    // Remove device 1's first backward: its gradient pass is missing.
    for (auto it = acts[1].begin(); it != acts[1].end(); ++it)
      if (it->kind == pw::ActionKind::kBW || it->kind == pw::ActionKind::kB) {
        acts[1].erase(it);
        break;
      }
  } else if (a.corrupt == "swap") {
    // Device 0 runs the backward of microbatch 0 before its forward: a deadlock.
    std::swap(acts[0].front(), acts[0].back());
  } else if (a.corrupt == "drop-send") {
    // Device 0 never sends microbatch 0's activation: device 1 waits forever.
    for (auto it = acts[0].begin(); it != acts[0].end(); ++it)
      if (it->kind == pw::ActionKind::kSendF) {
        acts[0].erase(it);
        break;
      }
  }
  plan.model = {"test", a.layers, 16, 2, 32, 8, 32};
  if (a.model == "modern" || a.model == "moe" || a.model == "qk") {
    plan.model.num_attention_heads = 4;
    plan.model.num_query_groups = 2;
    plan.model.kv_channels = 6;
    plan.model.ffn_hidden_size = 24;
    plan.model.swiglu = plan.model.rmsnorm = plan.model.rope = true;
    plan.model.untie_embeddings = true;
    plan.model.bias = false;
  }
  if (a.model == "qk") {  // Qwen3's query/key norms with Qwen2's q/k/v biases
    plan.model.qk_layernorm = true;
    plan.model.qkv_bias = true;
  }
  if (a.model == "moe") {
    plan.model.num_experts = 4;
    plan.model.moe_router_topk = 2;
    plan.model.moe_ffn_hidden_size = 8;
    plan.model.moe_first_dense_layers = 1;
    plan.model.moe_shared_expert_size = a.shared;
    plan.model.moe_capacity_factor = a.capacity;
  }
  plan.config.expert_parallel = a.ep;
  plan.config.tensor_parallel = a.tp;
  plan.config.pipeline_parallel = plan.schedule.placement.num_devices;
  plan.config.data_parallel = a.dp;
  plan.config.micro_batch_size = 2;
  plan.config.schedule = a.schedule;
  plan.config.global_batch_size = a.m * a.dp * plan.config.micro_batch_size;
  plan.cluster = "cpu";
  plan.provenance.version = "0.1.0";
  plan.provenance.command = "executor_rank_helper";
  return plan;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int status = 0;
  try {
    const Args a = parse(argc, argv);
    const pw::Plan plan = make_plan(a);
    if (!a.save_plan.empty()) {
      if (rank == 0) pw::save_plan(a.save_plan, plan);
      MPI_Finalize();
      return 0;
    }
    const pw::exec::ExecuteResult r = pw::exec::execute_plan(plan, a.opt, MPI_COMM_WORLD);
    if (rank == 0) {
      std::printf(
          "RESULT match=%d loss=%.17g reference=%.17g loss_rel=%.3g max_grad_rel=%.3g "
          "worst=%s tensors=%lld implied=%d actions=%zu\n",
          r.gradients_match ? 1 : 0, r.losses.front(), r.reference_loss, r.loss_rel_error,
          r.max_grad_rel_error, r.worst_tensor.c_str(), static_cast<long long>(r.tensors_checked),
          r.num_implied, r.run.actions.size());
      status = r.gradients_match ? 0 : 1;
    }
  } catch (const pw::ConfigError& e) {
    if (rank == 0) std::fprintf(stderr, "error: %s\n", e.what());
    status = 2;
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return status;
}
