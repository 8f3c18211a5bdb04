// hwmodels' workload model, per pipeline stage (declared in hwmodels/transformer.h): a stage's
// pass times, FLOPs, collectives and held bytes summed from its layers' kernels (and the
// embedding, head and multi-token prediction depths on the end stages), the TP collectives'
// time, and an iteration's FLOPs.
#include <algorithm>

#include "core/error.h"
#include "hwmodels/layer_dims.h"
#include "hwmodels/transformer.h"

namespace pw::hw {

using detail::Dims;
using detail::dims;
using detail::in_attention_core;
using detail::kAct;
using detail::tp_overlap_split;
using detail::tp_paired;

namespace {

// A pass's GEMMs paired with its sequence-parallel collectives: the time they can hide the
// collectives under (StageCosts::hide_f) and what splitting them into t row chunks adds to the
// pass (tp_comm_overlap; t GEMMs of 1/t of the rows each, the first or last chunk exposed).
struct PairedGemms {
  TimePs hide = 0, extra = 0;
};
PairedGemms paired_gemms(const std::vector<LayerOp>& ops, Pass pass, const GpuModel& gpu,
                         const WorkloadOptions& o) {
  PairedGemms p;
  for (const LayerOp& op : ops) {
    if (!tp_paired(op, pass)) continue;
    const TimePs g = ops_time({op}, gpu, o.dtype, pass);
    if (o.tp_comm_overlap && tp_overlap_split(op, pass)) {
      LayerOp piece = op;
      piece.m = (op.m + o.tp - 1) / o.tp;
      const TimePs chunk = ops_time({piece}, gpu, o.dtype, pass);
      p.extra += o.tp * chunk - g;
      p.hide += (o.tp - 1) * chunk;
    } else {
      p.hide += g - g / o.tp;
    }
  }
  return p;
}

}  // namespace

StageRole stage_role(int index, int stages, bool mtp_standalone) {
  StageRole r;
  r.first = index == 0;
  r.last = index == stages - 1;
  r.mtp = mtp_standalone && stages >= 2 ? index == stages - 2 : r.last;
  return r;
}

StageCosts stage_costs(const ModelShape& m, const GpuModel& gpu, const WorkloadOptions& o,
                       int layer_begin, int layer_end, StageRole role) {
  PW_ASSERT(layer_begin >= 0 && layer_end >= layer_begin, "bad layer range");
  const int moe_layers = moe_layers_in(m, layer_begin, layer_end);
  return stage_costs_for(m, gpu, o, layer_end - layer_begin - moe_layers, moe_layers, role);
}

StageCosts stage_costs(const ModelShape& m, const GpuModel& gpu, const WorkloadOptions& o,
                       int layer_begin, int layer_end, bool is_first, bool is_last) {
  return stage_costs(m, gpu, o, layer_begin, layer_end, StageRole{is_first, is_last, is_last});
}

StageCosts stage_costs_for(const ModelShape& m, const GpuModel& gpu, const WorkloadOptions& o,
                           int dense_layers, int moe_layers, bool is_first, bool is_last) {
  return stage_costs_for(m, gpu, o, dense_layers, moe_layers,
                         StageRole{is_first, is_last, is_last});
}

Fp8AmaxBytes fp8_amax_bytes(const ModelShape& m, const WorkloadOptions& o, int dense_layers,
                            int moe_layers) {
  // Transformer Engine keeps, per FP8 GEMM, three forward scaling entries (input, weight,
  // output) and two backward ones (output gradient, input gradient); a grouped GEMM of k experts
  // is k GEMMs (GroupedLinear's num_gemms). The all-reduce carries each entry's current amax, a
  // float32.
  double gemms = 0;
  for (const bool moe : {false, true}) {
    const int layers = moe ? moe_layers : dense_layers;
    if (layers == 0) continue;
    for (const LayerOp& op : layer_ops(m, o, Pass::kForward, moe))
      if (op.gemm && op.fp8) gemms += double(op.batch) * layers;
  }
  return {Bytes{4.0 * 3.0 * gemms}, Bytes{4.0 * 2.0 * gemms}};
}

StageCosts stage_costs_for(const ModelShape& m, const GpuModel& gpu, const WorkloadOptions& o,
                           int dense_layers, int moe_layers, StageRole role) {
  PW_ASSERT(dense_layers >= 0 && moe_layers >= 0, "bad layer counts");
  const bool is_first = role.first, is_last = role.last;
  // The multi-token prediction depths where the role puts them: each one transformer layer of
  // the last layer's kind, plus its own kernels and the embedding of the shifted tokens; their
  // logits and losses run with the loss, here too when the depths sit on the last stage, else
  // on the last stage after them (`head_depths`).
  const int depths = std::max(0, m.mtp_num_layers);
  const int mtp = role.mtp ? depths : 0;
  const int head_depths = is_last && !role.mtp ? depths : 0;
  (mtp_layer_is_moe(m) ? moe_layers : dense_layers) += mtp;
  StageCosts c;
  const Pass passes[] = {Pass::kForward, Pass::kBackwardInput, Pass::kBackwardWeight,
                         Pass::kRecompute};
  TimePs* times[] = {&c.f, &c.b, &c.w, &c.r};
  TimePs* hides[] = {&c.hide_f, &c.hide_b, &c.hide_w, &c.hide_r};
  TimePs* attns[] = {&c.attn_f, &c.attn_b, &c.attn_w, &c.attn_r};
  Flops* flops[] = {&c.f_flops, &c.b_flops, &c.w_flops, &c.r_flops};
  std::vector<TpComm>* comms[] = {&c.comm_f, &c.comm_b, &c.comm_w, &c.comm_r};
  for (int i = 0; i < 4; ++i) {
    for (const bool moe : {false, true}) {
      const int layers = moe ? moe_layers : dense_layers;
      if (layers == 0) continue;
      auto ops = layer_ops(m, o, passes[i], moe);
      *times[i] += static_cast<TimePs>(layers) * ops_time(ops, gpu, o.dtype, passes[i]);
      if (o.sequence_parallel && o.tp > 1) {
        const PairedGemms pg = paired_gemms(ops, passes[i], gpu, o);
        *times[i] += static_cast<TimePs>(layers) * pg.extra;
        *hides[i] += static_cast<TimePs>(layers) * pg.hide;
      }
      TimePs attn = 0;
      for (const LayerOp& op : ops)
        if (in_attention_core(op)) attn += ops_time({op}, gpu, o.dtype, passes[i]);
      *attns[i] += static_cast<TimePs>(layers) * attn;
      *flops[i] += total_flops(ops) * double(layers);
      for (TpComm tc : layer_tp_comms(m, o, passes[i], moe)) {
        tc.count *= layers;
        if (tc.count > 0) comms[i]->push_back(tc);
      }
    }
    if (is_first) {
      auto e = embedding_ops(m, o, passes[i]);
      *times[i] += ops_time(e, gpu, o.dtype, passes[i]);
      *flops[i] += total_flops(e);
      for (const TpComm& tc : embedding_tp_comms(m, o, passes[i])) comms[i]->push_back(tc);
    }
    if (is_last && passes[i] != Pass::kRecompute) {
      auto hd = head_ops(m, o, passes[i]);
      *times[i] += ops_time(hd, gpu, o.dtype, passes[i]);
      *flops[i] += total_flops(hd);
      for (const TpComm& tc : head_tp_comms(m, o, passes[i])) comms[i]->push_back(tc);
    }
    if (mtp > 0) {
      std::vector<LayerOp> ops = mtp_ops(m, o, passes[i]);
      std::vector<TpComm> depth = mtp_tp_comms(m, o, passes[i]);
      if (o.sequence_parallel && o.tp > 1) {
        const PairedGemms pg = paired_gemms(ops, passes[i], gpu, o);
        *times[i] += static_cast<TimePs>(mtp) * pg.extra;
        *hides[i] += static_cast<TimePs>(mtp) * pg.hide;
      }
      if (passes[i] != Pass::kRecompute) {
        std::vector<LayerOp> parts = embedding_ops(m, o, passes[i]);
        std::vector<TpComm> part_comms = embedding_tp_comms(m, o, passes[i]);
        if (is_last) {  // the depth's logits beside it
          for (const LayerOp& op : head_ops(m, o, passes[i])) parts.push_back(op);
          for (const TpComm& tc : head_tp_comms(m, o, passes[i])) part_comms.push_back(tc);
        }
        ops.insert(ops.end(), parts.begin(), parts.end());
        depth.insert(depth.end(), part_comms.begin(), part_comms.end());
      }
      *times[i] += static_cast<TimePs>(mtp) * ops_time(ops, gpu, o.dtype, passes[i]);
      *flops[i] += total_flops(ops) * double(mtp);
      for (TpComm tc : depth) {
        tc.count *= mtp;
        comms[i]->push_back(tc);
      }
    }
    if (head_depths > 0 && passes[i] != Pass::kRecompute) {
      // The depths' logits and losses after a stage of their own (Megatron's process_mtp_loss
      // on the loss stage).
      auto hd = head_ops(m, o, passes[i]);
      *times[i] += static_cast<TimePs>(head_depths) * ops_time(hd, gpu, o.dtype, passes[i]);
      *flops[i] += total_flops(hd) * double(head_depths);
      for (TpComm tc : head_tp_comms(m, o, passes[i])) {
        tc.count *= head_depths;
        comms[i]->push_back(tc);
      }
    }
  }
  for (const TpComm& tc : c.comm_f) c.comm_bytes_f += tc.bytes * tc.count;
  for (const TpComm& tc : c.comm_b) c.comm_bytes_b += tc.bytes * tc.count;
  if (o.fp8 && o.fp8_amax_reduction) {
    const Fp8AmaxBytes amax = fp8_amax_bytes(m, o, dense_layers, moe_layers);
    if (amax.forward.value > 0) {
      c.comm_f.push_back(
          {CollectiveKind::kAllReduce, amax.forward, 1, "fp8 amax reduction", CommGroup::kAmax});
      c.comm_b.push_back(
          {CollectiveKind::kAllReduce, amax.backward, 1, "fp8 amax reduction", CommGroup::kAmax});
    }
  }

  Dims d = dims(m, o);
  const double sbh = double(d.s) * double(d.b) * double(d.h);
  for (const bool moe : {false, true}) {
    const double layers = moe ? moe_layers : dense_layers;
    if (layers == 0) continue;
    c.m_b += layer_activation_bytes(m, o, moe) * layers;
    c.m_w += layer_weight_grad_bytes(m, o, moe) * layers;
    if (o.recompute != Recompute::kNone) {
      WorkloadOptions plain = o;
      plain.recompute = Recompute::kNone;
      c.m_r += (layer_activation_bytes(m, plain, moe) - layer_activation_bytes(m, o, moe)) * layers;
    }
  }
  if (is_first) c.m_b += Bytes{sbh * d.sp_div};  // embedding dropout mask (1 byte/element)
  if (is_last) {
    const double logits = double(d.tokens) * double(d.v) / double(d.t);
    // Per head (the model's and each MTP depth's): final LN input, fp32 logits; from B until W
    // the logits-GEMM input and output gradient.
    const double heads = 1.0 + depths;
    c.m_b += Bytes{heads * (2.0 * sbh * d.sp_div + 4.0 * logits)};
    c.m_w += Bytes{heads * (2.0 * sbh + 2.0 * logits)};
  }
  if (mtp > 0) {
    // Per MTP depth beside its layer: the two norms' inputs and the projection's input (2h:
    // FP8 casts under FP8), all on the rank's own tokens; under full recomputation only the
    // depth's inputs (the hidden state is the layer count's checkpoint; the embedding here).
    // From B until W the projection's input and output gradient (h/t).
    const double own = sbh * d.sp_div;
    const double lin = o.fp8 ? 1.0 : kAct;
    const double held = (2 * kAct + 2 * lin) * own;
    c.m_b += Bytes{mtp * (o.recompute == Recompute::kFull ? kAct * own : held)};
    if (o.recompute == Recompute::kFull) c.m_r += Bytes{mtp * (held - kAct * own)};
    c.m_w += Bytes{mtp * (2 * lin * own + kAct * sbh / d.t)};
  }
  // A stage of the depths alone sends the main model's and every depth's hidden states on.
  c.p2p_bytes = {2.0 * sbh * d.sp_div * (role.mtp && !is_last ? 1.0 + depths : 1.0)};
  return c;
}

TimePs tp_comm_time(const std::vector<TpComm>& comms, const CommNetworks& nets) {
  TimePs t = 0;
  for (const TpComm& c : comms)
    t += c.count * collective_time(c.kind, CollectiveAlgo::kAuto, c.bytes, nets.of(c.group));
  return t;
}

TimePs tp_comm_time(const std::vector<TpComm>& comms, const GroupNetwork& tp_group) {
  TimePs t = 0;
  for (const TpComm& c : comms) {
    PW_ASSERT(c.group == CommGroup::kTp, "a CP/EP collective priced on the TP group");
    t += c.count * collective_time(c.kind, CollectiveAlgo::kAuto, c.bytes, tp_group);
  }
  return t;
}

IterationFlops iteration_flops(const ModelShape& m, const WorkloadOptions& o,
                               long long global_batch) {
  // Per sequence on an unsplit model (FLOPs do not depend on t, cp, ep or the microbatch size).
  // The multi-token prediction depths count as Megatron counts them: a layer of the last
  // layer's kind, the projection and a second logits GEMM per depth (norms are not FLOPs).
  const int mtp = std::max(0, m.mtp_num_layers);
  const int moe_layers = moe_layers_in(m, 0, m.num_layers) + (mtp_layer_is_moe(m) ? mtp : 0);
  const int all_layers = m.num_layers + mtp;
  auto per_sequence = [&](const ModelShape& shape, WorkloadOptions w, bool with_recompute) {
    w.tp = 1;
    w.micro_batch = 1;
    w.sequence_parallel = false;
    w.cp = 1;
    w.ep = 1;
    w.etp = 1;
    double total = 0;
    for (Pass p : {Pass::kForward, Pass::kBackwardInput, Pass::kBackwardWeight}) {
      total += (all_layers - moe_layers) * total_flops(layer_ops(shape, w, p, false)).value;
      if (moe_layers > 0) total += moe_layers * total_flops(layer_ops(shape, w, p, true)).value;
      total += (1 + mtp) * (total_flops(head_ops(shape, w, p)).value +
                            total_flops(embedding_ops(shape, w, p)).value) +
               mtp * total_flops(mtp_ops(shape, w, p)).value;
    }
    if (with_recompute) {
      auto r = [&](bool moe) {
        return total_flops(layer_ops(shape, w, Pass::kRecompute, moe)).value;
      };
      total += (all_layers - moe_layers) * r(false) + (moe_layers > 0 ? moe_layers * r(true) : 0) +
               mtp * total_flops(mtp_ops(shape, w, Pass::kRecompute)).value;
    }
    return total;
  };
  // Model FLOPs count the routed tokens (no capacity padding) and the attention scores once per
  // pass over all s x s pairs (unfused: flash attention's extra backward GEMM is not model
  // work); the causal convention halves the attention core; hardware FLOPs count what runs.
  ModelShape routed = m;
  routed.moe_capacity_factor = 0;
  WorkloadOptions plain = o;
  plain.flash_attention = false;
  const double full = per_sequence(routed, plain, false);
  // Attention-core FLOPs per sequence over all pairs, summed over the three passes: scores and
  // context in F (2 s^2 a (dqk + dv), 4 s^2 a dh when both are the head dim) and twice that in B.
  const double core = 3.0 * 2.0 * double(m.seq_length) * double(m.seq_length) *
                      double(m.num_attention_heads) * double(qk_head_width(m) + v_head_width(m)) *
                      all_layers;
  const double b = static_cast<double>(global_batch);
  return IterationFlops{b * full, b * (full - core / 2), b * per_sequence(m, o, true)};
}

}  // namespace pw::hw
