#include "hwmodels/estimate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "hwmodels/memory.h"
#include "hwmodels/rank_layout.h"
#include "hwmodels/topology.h"

namespace pw::hw {
namespace {

CollectiveEstimate timed(std::string purpose, CollectiveKind kind, Bytes bytes, long long calls,
                         const GroupNetwork& net) {
  CollectiveEstimate c;
  c.purpose = std::move(purpose);
  c.kind = kind;
  c.group_size = net.n;
  c.group_nodes = net.nodes;
  c.bytes = bytes;
  c.calls_per_iteration = calls;
  c.algo = choose_algorithm(kind, bytes, net);
  c.time = collective_time(kind, c.algo, bytes, net);
  c.busbw = busbw(kind, net.n, bytes, c.time);
  return c;
}

void add_tp(const std::vector<TpComm>& comms, const char* pass, long long per_iter_scale,
            const CommNetworks& nets, std::vector<CollectiveEstimate>* out) {
  for (const TpComm& tc : comms) {
    if (nets.of(tc.group).n <= 1) continue;  // a group of one rank (an amax group of one GPU)
    std::string group = comm_group_name(tc.group);
    for (char& ch : group) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    out->push_back(timed(fmt::format("{} {} ({})", group, collective_kind_name(tc.kind), pass),
                         tc.kind, tc.bytes, tc.count * per_iter_scale, nets.of(tc.group)));
  }
}

// What a pass of `compute` waits for: its TP collectives (with tp_comm_overlap only what
// exceeds the GEMMs they run under), its EP all-to-alls and CP all-gathers or all-to-alls, and
// the context-parallel ring's steps that outlast the attention blocks they run under
// (cp_ring_exposed).
TimePs exposed_comm(const std::vector<TpComm>& comms, const CommNetworks& nets, TimePs compute,
                    TimePs hide, TimePs attention, bool overlap) {
  std::vector<TpComm> tp, ring, waited;
  for (const TpComm& c : comms) {
    if (c.group == CommGroup::kTp)
      tp.push_back(c);
    else if (is_cp_ring_step(c))
      ring.push_back(c);
    else
      waited.push_back(c);
  }
  TimePs t = tp_comm_time(tp, nets);
  if (overlap) t = overlapped_pass_time(compute, hide, t) - compute;
  return t + tp_comm_time(waited, nets) +
         cp_ring_exposed(attention, tp_comm_time(ring, nets), nets.cp.n);
}

// The data-parallel collectives of the GPU holding `params` (the first stage's when `first`):
// the gradient reduction in the frameworks' buckets (grad_bucket_count: one call per bucket);
// with ZeRO-3 by layer or tensor, the `gathers` every F and B pass makes of its chunk's weights
// (`chunk_passes` F and B passes per iteration), which run under the passes' compute rather
// than after them.
// `expert` of the `params` are expert parameters reduced and gathered over `expert_net` (the
// expert-data-parallel group) in rows of their own, "expert-DP" (0 when that group is the DP
// group): each bucket carries its share of both.
void add_dp(const Scenario& s, double params, double expert, bool first, long long chunk_passes,
            const Zero3PassGathers& gathers, const GroupNetwork& net,
            const GroupNetwork& expert_net, std::vector<CollectiveEstimate>* out) {
  const ParallelConfig& par = s.parallel;
  const int nb =
      grad_bucket_count(params, par.zero_stage, par.overlap_grad_reduce,
                        par.data_parallel * par.context_parallel, first, par.ddp_bucket_size);
  const double dense = params - expert;
  using K = CollectiveKind;
  // A row per group with more than one rank: the dense share over the DP group, the expert
  // share over the expert-DP group.
  // `calls` per iteration, each of a `parts`-th of the parameters.
  auto rows = [&](const char* what, K kind, double bytes_per_param, long long calls,
                  long long parts) {
    if (net.n > 1)
      out->push_back(timed(what, kind, Bytes{bytes_per_param * dense / parts}, calls, net));
    if (expert > 0 && expert_net.n > 1)
      out->push_back(timed(fmt::format("expert-DP {}", what), kind,
                           Bytes{bytes_per_param * expert / parts}, calls, expert_net));
  };
  const double grad = grad_bytes_per_param(par);
  switch (par.zero_stage) {
    case 0:
      rows("DP gradient all-reduce (per bucket)", K::kAllReduce, grad, nb, nb);
      break;
    case 1:
    case 2:
      rows("ZeRO gradient reduce-scatter (per bucket)", K::kReduceScatter, grad, nb, nb);
      rows(par.overlap_param_gather ? "ZeRO parameter all-gather (under the next forwards)"
                                    : "ZeRO parameter all-gather",
           K::kAllGather, 2.0, 1, 1);
      break;
    default:
      if (gathers.first_bytes > 0) {
        // Each F and B pass of a chunk makes its gathers (zero3_pass_gathers): per layer (FSDP)
        // or per prefetch bucket of weight tensors (DeepSpeed), one row per size.
        const char* what = par.zero3_gather == "layer" ? "ZeRO-3 all-gather per layer"
                                                       : "ZeRO-3 all-gather per tensor bucket";
        std::vector<GatherRun> rows{{gathers.first_bytes, 1}};
        for (const GatherRun& g : gathers.rest) {
          auto it = std::find_if(rows.begin(), rows.end(),
                                 [&](const GatherRun& r) { return r.bytes == g.bytes; });
          if (it != rows.end())
            it->count += g.count;
          else
            rows.push_back(g);
        }
        // A gather's expert share (the GPU's expert fraction) over the expert-DP group, the
        // rest over the DP group, as the simulator's.
        for (const GatherRun& g : rows) {
          if (net.n > 1)
            out->push_back(timed(what, K::kAllGather, Bytes{g.bytes * dense / params},
                                 2 * chunk_passes * g.count, net));
          if (expert > 0 && expert_net.n > 1)
            out->push_back(timed(fmt::format("expert-DP {}", what), K::kAllGather,
                                 Bytes{g.bytes * expert / params}, 2 * chunk_passes * g.count,
                                 expert_net));
        }
      } else {
        rows("ZeRO-3 parameter all-gather (F, B)", K::kAllGather, 2.0, 2, 1);
      }
      rows("ZeRO-3 gradient reduce-scatter (per bucket)", K::kReduceScatter, grad, nb, nb);
  }
}

}  // namespace

Estimate make_estimate(const Scenario& s, const GpuMemoryFigures& first,
                       const GpuMemoryFigures& last) {
  const ParallelConfig& par = s.parallel;
  const ModelShape& m = s.model;
  Estimate e;
  e.scenario = s.file;
  e.profile = s.profile.name;
  e.model = m.name;
  e.gpus = s.num_gpus();
  e.fabric = s.topology.fabric;
  e.fabric_size = fabric_size(s.topology);
  e.parallel = par;
  e.microbatches = s.num_microbatches();
  e.fused_attention = s.flash_attention;
  WorkloadOptions o = workload_options(par, s.flash_attention);
  e.params = parameter_count(m);
  e.active_params = active_parameter_count(m);
  e.mtp_params = mtp_parameter_count(m);
  e.mtp_layers = m.mtp_num_layers;
  e.flops = iteration_flops(m, o, par.global_batch_size);
  const int p = par.pipeline_parallel, v = std::max(1, par.virtual_stages);
  e.first = first;
  e.last = last;
  // Parameters of the first and last pipeline rank's GPU: its stages of the split (its p-th
  // share of the layers, or a layout's v chunks: stages d, d + p, ...), the embedding with stage
  // 0, the final norm, output layer and multi-token prediction depths with the last
  // (hw::stage_parameter_count).
  const std::vector<int> layers = s.stage_layers();
  const int S = static_cast<int>(layers.size());
  std::vector<int> begin(S + 1, 0);
  for (int st = 0; st < S; ++st) begin[st + 1] = begin[st] + layers[st];
  auto device_params = [&](int d, double* expert) {
    double sum = 0;
    *expert = 0;
    for (int st = d; st < S; st += p) {
      double x = 0;
      sum += stage_parameter_count(m, o, begin[st], begin[st + 1],
                                   stage_role(st, S, par.mtp_standalone), p, &x);
      *expert += x;
    }
    return sum;
  };
  double first_expert = 0, last_expert = 0;
  e.first.params = device_params(0, &first_expert);
  e.last.params = device_params(p - 1, &last_expert);

  GpuModel gpu(s.profile.gpu);
  const int chunk = m.num_layers / (p * v);
  const bool single = p == 1 && v == 1;
  // The end chunks and the largest middle one as the split has them when it names every chunk
  // (S = p v: an uneven split or a layout), an even chunk otherwise.
  const bool per_chunk = S == p * v;
  const int first_end = per_chunk ? layers.front() : chunk;
  const int last_begin = per_chunk ? m.num_layers - layers.back() : m.num_layers - chunk;
  int mid = -1;
  for (int st = 1; per_chunk && st + 1 < S; ++st)
    if (mid < 0 || layers[st] > layers[mid]) mid = st;
  e.first_costs = stage_costs(m, gpu, o, 0, first_end, true, single);
  e.last_costs = stage_costs(m, gpu, o, last_begin, m.num_layers,
                             stage_role(S - 1, S, per_chunk && par.mtp_standalone));
  // A layout's stage of the depths alone (its device runs it and v - 1 middle chunks).
  e.has_mtp_stage = per_chunk && par.mtp_standalone && m.mtp_num_layers > 0 && S >= 2;
  if (e.has_mtp_stage)
    e.mtp_costs = stage_costs(m, gpu, o, begin[S - 2], begin[S - 1], stage_role(S - 2, S, true));
  StageCosts middle = mid >= 0 ? stage_costs(m, gpu, o, begin[mid], begin[mid + 1], false, false)
                               : stage_costs(m, gpu, o, 0, chunk, false, false);
  e.middle_costs = middle;

  Topology topo(s.topology);
  RankLayout layout = rank_layout_of(par, s.topology.node.gpus_per_node);
  const long long mv = e.microbatches * v;
  const bool amax = o.fp8_amax_reduction && layout.tp * layout.dp > 1;
  if (par.tensor_parallel > 1 || layout.cp > 1 || layout.ep > 1 || amax) {
    CommNetworks nets;
    nets.tp = describe_group(topo, s.profile, layout.tp_group(0, 0));
    nets.cp = describe_group(topo, s.profile, layout.cp_group(0, 0, 0));
    nets.ep = describe_group(topo, s.profile, layout.ep_group(0, 0, 0));
    nets.amax = describe_group(topo, s.profile, layout.stage_group(0));
    const bool ov = par.tp_comm_overlap;
    e.tp_comm_f = exposed_comm(middle.comm_f, nets, middle.f, middle.hide_f, middle.attn_f, ov);
    e.tp_comm_b = exposed_comm(middle.comm_b, nets, middle.b, middle.hide_b, middle.attn_b, ov) +
                  exposed_comm(middle.comm_w, nets, middle.w, middle.hide_w, middle.attn_w, ov) +
                  exposed_comm(middle.comm_r, nets, middle.r, middle.hide_r, middle.attn_r, ov);
    add_tp(middle.comm_f, "F", mv, nets, &e.collectives);
    add_tp(middle.comm_b, "B", mv, nets, &e.collectives);
    add_tp(middle.comm_w, "W", mv, nets, &e.collectives);
    add_tp(middle.comm_r, "R", mv, nets, &e.collectives);
  }
  TimePs p2p = 0, embedding_sync = 0;
  if (p > 1) {
    GroupNetwork net = describe_group(topo, s.profile, {layout.gpu(0, 0, 0), layout.gpu(0, 0, 1)});
    e.collectives.push_back(timed("PP send/recv (activation or gradient)",
                                  CollectiveKind::kSendRecv, middle.p2p_bytes, 2 * mv, net));
    p2p = e.collectives.back().time;
    // The last stage's copy of the input embedding (the tied output layer, or the multi-token
    // prediction depths' embedding) has its gradient summed with the first stage's after the
    // data-parallel reduction, before the optimizer step: exposed.
    const double copy = embedding_copy_parameters(m, par.tensor_parallel, p);
    if (copy > 0) {
      GroupNetwork emb =
          describe_group(topo, s.profile, {layout.gpu(0, 0, 0), layout.gpu(0, 0, p - 1)});
      e.collectives.push_back(timed("embedding gradient all-reduce (first/last)",
                                    CollectiveKind::kAllReduce,
                                    Bytes{grad_bytes_per_param(par) * copy}, 1, emb));
      embedding_sync = e.collectives.back().time;
    }
  }
  TimePs dp_time = 0;
  TimePs pass_gather = 0;  // ZeRO-3 by layer: each F and B pass lasts at least its gather
  // Expert parameters reduce and gather over the expert-DP group where it is not the DP group.
  const bool expert_split = layout.expert_dp_differs();
  if (layout.dp > 1 || (expert_split && layout.expert_dp() > 1)) {
    GroupNetwork net = describe_group(topo, s.profile, layout.dp_group(0, 0));
    GroupNetwork expert_net =
        expert_split ? describe_group(topo, s.profile, layout.expert_dp_group(0, 0, 0)) : net;
    std::size_t before = e.collectives.size();
    // The GPU with more parameters (the first stage's unless the head outweighs it).
    const bool first = p == 1 || e.first.params >= e.last.params;
    const double expert = expert_split ? (first ? first_expert : last_expert) : 0;
    // ZeRO-3 by layer or tensor: the gathers of that GPU's first (or last) chunk.
    const bool by_pass = par.zero_stage == 3 && par.zero3_gather != "stage";
    Zero3PassGathers gathers;
    if (by_pass) {
      const int b = first ? 0 : m.num_layers - chunk, en = b + chunk;
      const bool f = first, l = first ? single : true;
      std::vector<double> tensors;
      if (par.zero3_gather == "tensor") tensors = stage_weight_tensors(m, o, b, en, f, l, p);
      gathers = zero3_pass_gathers(par.zero3_gather, stage_parameter_count(m, o, b, en, f, l, p),
                                   chunk, tensors);
    }
    add_dp(s, first ? e.first.params : e.last.params, expert, first, mv, gathers, net, expert_net,
           &e.collectives);
    // overlap_param_gather (ZeRO-1/2): the re-gather moves to the next step's first forwards
    // (hw::exposed_param_gather_seconds); the GPU's chunks hold a v-th of its parameters each.
    // Its expert share goes first on the same stream (over the expert-DP group).
    const bool param_overlap =
        par.overlap_param_gather && (par.zero_stage == 1 || par.zero_stage == 2) && layout.dp > 1;
    bool param_overlap_done = false;
    for (std::size_t i = before; i < e.collectives.size(); ++i) {
      const CollectiveEstimate& c = e.collectives[i];
      if (param_overlap && c.kind == CollectiveKind::kAllGather) {
        if (param_overlap_done) continue;
        param_overlap_done = true;
        const double chunk0 = e.first.params / v;
        const int nb =
            grad_bucket_count(chunk0, par.zero_stage, par.overlap_grad_reduce,
                              par.data_parallel * par.context_parallel, true, par.ddp_bucket_size);
        const double chunk_expert = expert_split ? first_expert / v : 0;
        double bucket_s = 0, chunk_s = 0;
        for (int part = 0; part < 2; ++part) {
          const GroupNetwork& g = part == 0 ? net : expert_net;
          const double bytes = 2.0 * (part == 0 ? chunk0 - chunk_expert : chunk_expert);
          if (g.n <= 1 || bytes <= 0) continue;
          bucket_s += ps_to_seconds(timed("", c.kind, Bytes{bytes / nb}, 1, g).time);
          chunk_s += ps_to_seconds(timed("", c.kind, Bytes{bytes}, 1, g).time);
        }
        const double fill_s = ps_to_seconds(e.first_costs.f + e.tp_comm_f);
        dp_time += seconds_to_ps(exposed_param_gather_seconds(
            bucket_s, chunk_s, fill_s, p, param_gather_aligned(p, v, par.align_param_gather)));
      } else if (by_pass && c.kind == CollectiveKind::kAllGather) {
        // A pass waits for its chunk's gathers: the run's calls per pass.
        pass_gather += c.time * (c.calls_per_iteration / (2 * mv));
      } else if (par.overlap_grad_reduce && c.kind != CollectiveKind::kAllGather) {
        dp_time += c.time;  // buckets reduce under the backward; the last one is exposed
      } else {
        dp_time += c.time * c.calls_per_iteration;
      }
    }
  }
  // Megatron's blocking calls hold a device's next pass for each send (a forward's output, a
  // backward's input gradient); with overlap_p2p_comm (interleaved schedule over p > 1) only the
  // forward's, which it waits for to free the output (deallocate_pipeline_outputs). The
  // pipeline fill waits for each hop either way.
  const int sends_held = par.overlap_p2p_comm ? 1 : 2;  // only where p2p_overlappable()
  auto chunk_time = [&](const StageCosts& c, int sends = 2) {
    return std::max(c.f + e.tp_comm_f, pass_gather) +
           std::max(c.b + c.w + c.r + e.tp_comm_b, pass_gather) + sends * p2p;
  };
  // Each device runs its own v chunks for every microbatch: the first device the embedding
  // chunk and v - 1 middle ones, the last the head chunk and v - 1 middle ones (every chunk
  // counted as the slowest, as before, put a 152k-vocabulary head into all 12 chunks of
  // Qwen3-30B-A3B's interleaved stages: 44.0 s against the simulator's 19.0 s). Devices
  // between run v middle chunks, never more than either end. The pipeline fills and drains
  // over p - 1 passes of the slowest chunk.
  TimePs slowest =
      std::max({chunk_time(e.first_costs), chunk_time(e.last_costs), chunk_time(middle)});
  TimePs end_chunk =
      std::max(chunk_time(e.first_costs, sends_held), chunk_time(e.last_costs, sends_held));
  if (e.has_mtp_stage) {
    slowest = std::max(slowest, chunk_time(e.mtp_costs));
    end_chunk = std::max(end_chunk, chunk_time(e.mtp_costs, sends_held));
  }
  const TimePs rest = (v - 1) * chunk_time(middle, sends_held);
  const TimePs busiest = p == 1 && v == 1 ? chunk_time(e.first_costs) : end_chunk + rest;
  e.iteration_time = e.microbatches * busiest + (p - 1) * slowest + dp_time + embedding_sync;
  e.tflops_per_gpu = e.flops.hardware / (e.gpus * ps_to_seconds(e.iteration_time)) / 1e12;
  return e;
}

namespace {

const char* algo_label(const CollectiveEstimate& c) {
  return c.kind == CollectiveKind::kSendRecv ? "direct" : collective_algo_name(c.algo);
}

std::string gb(Bytes b) { return fmt::format("{:.2f}", b.value / 1e9); }

void memory_rows(std::string* out, const char* label, const GpuMemoryFigures& mem) {
  *out += fmt::format("  {:<34} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}  {}\n", label,
                      gb(Bytes{mem.weights}), gb(Bytes{mem.gradients}), gb(Bytes{mem.optimizer}),
                      gb(Bytes{mem.activations}), gb(Bytes{mem.buffers}), gb(Bytes{mem.total}),
                      gb(Bytes{mem.capacity}), mem.fits ? "fits" : "DOES NOT FIT");
}

}  // namespace

std::string estimate_table(const Estimate& e) {
  const ParallelConfig& p = e.parallel;
  std::string out;
  out += fmt::format("scenario   {}\nmodel      {}   profile {}   {} GPUs\n", e.scenario, e.model,
                     e.profile, e.gpus);
  out += fmt::format(
      "fabric     {}, {} ports per leaf, oversubscription {:g}: {} leaves x {} "
      "spines\n",
      fabric_kind_name(e.fabric.kind), e.fabric.leaf_ports, e.fabric.oversubscription,
      e.fabric_size.leaves, e.fabric_size.spines);
  out += fmt::format(
      "parallel   t={}{} p={} d={}{}{} v={}  micro-batch {}  global batch {}  microbatches {}\n"
      "           sequence-parallel {}  recompute {}  attention {}  ZeRO {}{}{}\n\n",
      p.tensor_parallel, cp_label(p), p.pipeline_parallel, p.data_parallel,
      p.expert_parallel > 1 ? fmt::format(" ep={}", p.expert_parallel) : "",
      p.expert_tp() != p.tensor_parallel ? fmt::format(" etp={}", p.expert_tp()) : "",
      p.virtual_stages, p.micro_batch_size, p.global_batch_size, e.microbatches,
      p.sequence_parallel ? "on" : "off", p.recompute, e.fused_attention ? "fused" : "unfused",
      p.zero_stage == 3 ? fmt::format("3 (gathers by {})", p.zero3_gather)
                        : fmt::format("{}", p.zero_stage),
      p.optimizer_offload ? " (optimizer offloaded)" : "",
      p.fp8 != "off" ? fmt::format("  FP8 {}", p.fp8) : "");
  out += fmt::format(
      "parameters            {:.3f} B{}{}\n", e.params / 1e9,
      e.active_params < e.params
          ? fmt::format(" ({:.3f} B active per token)", e.active_params / 1e9)
          : "",
      e.mtp_params > 0 ? fmt::format("; of them {:.3f} B multi-token prediction ({} depth{})",
                                     e.mtp_params / 1e9, e.mtp_layers, e.mtp_layers > 1 ? "s" : "")
                       : "");
  out += fmt::format("FLOPs per iteration   model {:.4g}   hardware {:.4g}\n\n", e.flops.model,
                     e.flops.hardware);
  // The header's columns over the rows' (memory_rows: two spaces and a 34-wide label).
  out += fmt::format("{:<36} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
                     "memory per GPU (GB)", "weights", "grads", "optimizer", "activation",
                     "buffers", "peak", "usable");
  memory_rows(&out, fmt::format("first stage ({:.2f} B params)", e.first.params / 1e9).c_str(),
              e.first);
  memory_rows(&out, fmt::format("last stage ({:.2f} B params)", e.last.params / 1e9).c_str(),
              e.last);
  out += fmt::format("\npass times per microbatch (ms)   F       B       W       R\n");
  for (auto [label, c] : {std::pair{"first stage chunk", &e.first_costs},
                          std::pair{"last stage chunk", &e.last_costs},
                          std::pair{"depths' stage chunk", &e.mtp_costs}}) {
    if (c == &e.mtp_costs && !e.has_mtp_stage) continue;
    out += fmt::format("  {:<28} {:7.3f} {:7.3f} {:7.3f} {:7.3f}\n", label, ps_to_millis(c->f),
                       ps_to_millis(c->b), ps_to_millis(c->w), ps_to_millis(c->r));
  }
  out += fmt::format("  TP/CP/EP waited per chunk     F {:.3f}  B+W {:.3f}\n\n",
                     ps_to_millis(e.tp_comm_f), ps_to_millis(e.tp_comm_b));
  // The purpose column as wide as its longest entry (43 at least), the header over it.
  std::size_t width = 43;
  for (const CollectiveEstimate& c : e.collectives) width = std::max(width, c.purpose.size());
  out += fmt::format("{:<{}} {:>6} {:>5} {:>12} {:>8} {:>13} {:>10} {:>12}\n", "collectives",
                     width + 2, "ranks", "nodes", "size (MB)", "calls", "algorithm", "time (ms)",
                     "busbw (GB/s)");
  for (const CollectiveEstimate& c : e.collectives) {
    out += fmt::format("  {:<{}} {:>6} {:>5} {:>12.2f} {:>8} {:>13} {:>10.3f} {:>12.1f}\n",
                       c.purpose, width, c.group_size, c.group_nodes, c.bytes.value / 1e6,
                       c.calls_per_iteration, algo_label(c), ps_to_millis(c.time), c.busbw / 1e9);
  }
  if (e.collectives.empty()) out += "  (none: a single GPU)\n";
  out += fmt::format(
      "\nanalytic 1F1B iteration {:.3f} s, {:.1f} TFLOP/s per GPU (hardware FLOPs; the "
      "simulator refines this)\n",
      ps_to_seconds(e.iteration_time), e.tflops_per_gpu);
  return out;
}

nlohmann::ordered_json estimate_json(const Estimate& e) {
  using json = nlohmann::ordered_json;
  auto mem = [](const GpuMemoryFigures& m) {
    return json{{"params", m.params},
                {"weights_bytes", m.weights},
                {"gradients_bytes", m.gradients},
                {"optimizer_bytes", m.optimizer},
                {"activations_bytes", m.activations},
                {"buffers_bytes", m.buffers},
                {"peak_bytes", m.total},
                {"usable_bytes", m.capacity},
                {"fits", m.fits}};
  };
  auto costs = [](const StageCosts& c) {
    return json{{"f_s", ps_to_seconds(c.f)},     {"b_s", ps_to_seconds(c.b)},
                {"w_s", ps_to_seconds(c.w)},     {"r_s", ps_to_seconds(c.r)},
                {"m_b_bytes", c.m_b.value},      {"m_w_bytes", c.m_w.value},
                {"p2p_bytes", c.p2p_bytes.value}};
  };
  const ParallelConfig& p = e.parallel;
  json j{
      {"scenario", e.scenario},
      {"model", e.model},
      {"profile", e.profile},
      {"gpus", e.gpus},
      {"fabric",
       {{"kind", fabric_kind_name(e.fabric.kind)},
        {"leaf_ports", e.fabric.leaf_ports},
        {"oversubscription", e.fabric.oversubscription},
        {"leaves", e.fabric_size.leaves},
        {"spines", e.fabric_size.spines}}},
      {"parallel",
       {{"tensor_model_parallel_size", p.tensor_parallel},
        {"pipeline_model_parallel_size", p.pipeline_parallel},
        {"data_parallel_size", p.data_parallel},
        {"virtual_stages", p.virtual_stages},
        {"micro_batch_size", p.micro_batch_size},
        {"global_batch_size", p.global_batch_size},
        {"sequence_parallel", p.sequence_parallel},
        {"recompute_granularity", p.recompute},
        {"zero_stage", p.zero_stage},
        {"optimizer_offload", p.optimizer_offload},
        {"context_parallel_size", p.context_parallel},
        {"expert_model_parallel_size", p.expert_parallel},
        {"expert_tensor_parallel_size", p.expert_tp()},
        {"fp8", p.fp8}}},
      {"fused_attention", e.fused_attention},
      {"microbatches", e.microbatches},
      {"parameters", e.params},
      {"active_parameters", e.active_params},
      {"mtp_parameters", e.mtp_params},
      {"flops_per_iteration", {{"model", e.flops.model}, {"hardware", e.flops.hardware}}},
      {"memory", {{"first_stage", mem(e.first)}, {"last_stage", mem(e.last)}}},
      {"pass_times", {{"first_stage", costs(e.first_costs)}, {"last_stage", costs(e.last_costs)}}},
      {"iteration_time_s", ps_to_seconds(e.iteration_time)},
      {"tflops_per_gpu", e.tflops_per_gpu}};
  if (p.zero_stage == 3) j["parallel"]["zero3_gather"] = p.zero3_gather;
  json colls = json::array();
  for (const CollectiveEstimate& c : e.collectives) {
    colls.push_back({{"purpose", c.purpose},
                     {"kind", collective_kind_name(c.kind)},
                     {"algorithm", algo_label(c)},
                     {"ranks", c.group_size},
                     {"nodes", c.group_nodes},
                     {"bytes", c.bytes.value},
                     {"calls_per_iteration", c.calls_per_iteration},
                     {"time_s", ps_to_seconds(c.time)},
                     {"busbw_bytes_per_s", c.busbw}});
  }
  j["collectives"] = colls;
  return j;
}

}  // namespace pw::hw
