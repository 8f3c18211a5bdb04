#include "planner/search/search_space.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <numeric>
#include <set>

#include "core/error.h"
#include "hwmodels/model_presets.h"
#include "hwmodels/transformer.h"
#include "planner/search/constraint_flags.h"
#include "planner/search/framework_space.h"

namespace pw {

std::string end_trim_label(std::uint8_t code) {
  const int first = first_trim(code), last = last_trim(code);
  return (first == last ? fmt::format("{}", first) : fmt::format("{}/{}", first, last)) +
         (is_mtp_standalone_code(code) ? " mtp-alone" : "");
}
bool model_preset(const std::string& name, ModelShape* out) {
  const hw::ModelPreset* p = hw::find_model_preset(name);
  if (p) *out = p->shape;
  return p != nullptr;
}

std::vector<std::string> model_preset_names() { return hw::model_preset_names(); }

std::vector<ScheduleOption> probe_schedules(const GeneratorRegistry& registry,
                                            const std::vector<int>& v_values,
                                            std::vector<std::string>* skipped) {
  (void)skipped;  // capabilities are declared: nothing is left out for failing a probe
  std::vector<ScheduleOption> out;
  for (const GeneratorInfo& g : registry.all()) {
    const GeneratorCaps& c = g.caps;
    ScheduleOption o;
    o.name = g.name;
    o.v = c.chunks;
    o.pipelines = c.pipelines;
    o.v_shape = c.v_shape;
    o.split_backward = c.split_backward;
    o.takes_v = c.takes_v;
    o.memory_aware = c.memory_aware;
    o.reads_costs = c.reads_costs;
    o.explicit_recompute = c.explicit_recompute;
    o.overlap = c.overlap;
    o.holds_all_microbatches = c.holds_all_microbatches;
    o.max_devices = c.max_devices;
    o.own_budget = c.own_budget;
    o.placement = c.placement;
    o.per_device_limits = c.per_device_limits;
    if (!o.takes_v) {
      out.push_back(o);
      continue;
    }
    for (int v : v_values) {
      if (v < 2) continue;
      o.v = v;
      out.push_back(o);
    }
  }
  // The p = 1 configurations use the first option (CostModel::stage_costs): a plain linear one.
  std::stable_partition(out.begin(), out.end(), [](const ScheduleOption& o) {
    return o.v == 1 && !o.v_shape && o.pipelines == 1 && !o.memory_aware &&
           !o.holds_all_microbatches;
  });
  return out;
}

std::vector<Tpd> factorisations(int n, const ModelShape& model, int max_t) {
  std::vector<Tpd> out;
  for (int t = 1; t <= std::min(n, max_t); ++t) {
    if (n % t || model.num_attention_heads % t) continue;
    for (int p = 1; p <= n / t; ++p) {
      if ((n / t) % p || p > model.num_layers) continue;
      out.push_back({t, p, n / t / p});
    }
  }
  return out;
}

std::vector<Tpd> space_factorisations(const SearchSpace& s, int n, const ModelShape& model) {
  auto allowed = [](const std::vector<int>& list, int x) {
    return list.empty() || std::find(list.begin(), list.end(), x) != list.end();
  };
  std::vector<Tpd> out;
  for (const Tpd& f : factorisations(n, model, s.max_tensor_parallel)) {
    if (hw::kv_heads(model) % f.t != 0) continue;
    for (int cp : s.context_parallel) {
      if (cp < 1 || f.d % cp != 0) continue;
      if (cp > 1 && model.seq_length % (2 * cp) != 0) continue;
      // Ulysses (a2a) scatters each TP rank's heads and key/value heads over the CP group.
      if (cp > 1 && s.cp_comm_type == "a2a" &&
          ((model.num_attention_heads / f.t) % cp != 0 || (hw::kv_heads(model) / f.t) % cp != 0))
        continue;
      const Tpd g{f.t, f.p, f.d / cp, cp};
      if (allowed(s.tensor_parallel, g.t) && allowed(s.pipeline_parallel, g.p) &&
          allowed(s.data_parallel, g.d))
        out.push_back(g);
    }
  }
  return out;
}

ParallelConfig parallel_from_config(const SearchSpace& space, const SearchConfig& c) {
  const ScheduleOption& so = space.schedules[c.schedule];
  ParallelConfig pc;
  pc.tensor_parallel = c.t;
  pc.pipeline_parallel = c.p;
  pc.data_parallel = c.d;
  pc.virtual_stages = so.v;
  pc.micro_batch_size = c.micro_batch;
  pc.global_batch_size = c.global_batch();
  pc.sequence_parallel = c.sequence_parallel != 0;
  pc.recompute = recompute_name(static_cast<Recompute>(c.recompute));
  pc.zero_stage = c.zero;
  pc.zero3_gather = c.zero3_stage ? "stage" : "layer";
  pc.optimizer_offload = c.offload != 0;
  pc.schedule = so.name;
  pc.context_parallel = c.cp;
  pc.expert_parallel = c.ep;
  pc.expert_tensor_parallel = c.etp1 ? 1 : 0;  // 0: expert TP = t (Megatron's default)
  pc.fp8 = c.fp8 ? "hybrid" : "off";
  if (c.fp8) pc.fp8_recipe = space.fp8_recipe;
  pc.grad_reduce_in_fp32 = space.grad_reduce_in_fp32;
  pc.overlap_grad_reduce = space.overlap_grad_reduce;
  pc.overlap_param_gather = c.param_gather && (pc.zero_stage == 1 || pc.zero_stage == 2);
  // Megatron's align flag only means something with the overlap (the plan file refuses it
  // alone); the bucket size with overlap_grad_reduce, which the scenario checked.
  pc.align_param_gather = !pc.overlap_param_gather || space.align_param_gather;
  pc.ddp_bucket_size = space.ddp_bucket_size;
  // Megatron overlaps the interleaved schedule's sends and receives only.
  pc.overlap_p2p_comm = space.overlap_p2p_comm && pc.p2p_overlappable();
  pc.tp_comm_overlap = space.tp_comm_overlap && pc.sequence_parallel && pc.tensor_parallel > 1;
  if (pc.context_parallel > 1) pc.cp_comm_type = space.cp_comm_type;
  pc.mtp_standalone = (c.end_trim == kOwnSplit && space.own_split_mtp_standalone) ||
                      is_mtp_standalone_code(c.end_trim);
  return pc;
}

namespace {
std::size_t modes_of(const SearchSpace& s, int z) {
  return z == 3 ? s.zero3_gather.size() : z >= 1 ? s.param_gather.size() : 1;
}
}  // namespace

std::size_t zero_mode_count(const SearchSpace& s) {
  std::size_t n = 0;
  for (int z : s.zero) n += modes_of(s, z);
  return n;
}

void set_zero_mode(const SearchSpace& s, std::size_t k, SearchConfig* c) {
  for (int z : s.zero) {
    const std::size_t modes = modes_of(s, z);
    if (k < modes) {
      c->zero = static_cast<std::uint8_t>(z);
      c->zero3_stage = static_cast<std::uint8_t>(z == 3 ? s.zero3_gather[k] : 0);
      c->param_gather = static_cast<std::uint8_t>(z == 1 || z == 2 ? s.param_gather[k] : 0);
      return;
    }
    k -= modes;
  }
  PW_ASSERT(false, "sharding mode out of range");
}

bool SearchSpace::expert_tp_allowed(int etp) const {
  return expert_tp.empty() || std::find(expert_tp.begin(), expert_tp.end(), etp) != expert_tp.end();
}

std::vector<ExpertLayout> cell_expert_parallel(const SearchSpace& s, const ModelShape& model, int t,
                                               int cp, int d) {
  if (model.num_experts == 0) return {ExpertLayout{}};
  std::vector<ExpertLayout> out;
  for (int ep : s.expert_parallel)
    for (int one = 0; one < (t > 1 ? 2 : 1); ++one) {  // at t = 1 both are expert-TP 1
      const int etp = one ? 1 : t;
      if (!s.expert_tp_allowed(etp) || ep < 1 || model.num_experts % ep != 0 ||
          (t * cp * d) % (ep * etp) != 0)
        continue;
      out.push_back(ExpertLayout{ep, one});
    }
  return out;
}

std::uint64_t space_size(const SearchSpace& s, const ModelShape& model) {
  std::uint64_t per = s.micro_batches.size() * s.global_batches.size() * s.schedules.size() *
                      s.recompute.size() * s.sequence_parallel.size() * zero_mode_count(s) *
                      s.offload.size() * s.end_trim.size();
  std::uint64_t tpd = 0;
  for (int n : s.gpu_counts)
    for (const Tpd& f : space_factorisations(s, n, model))
      tpd += cell_expert_parallel(s, model, f.t, f.cp, f.d).size();
  return per * tpd * s.fp8.size();
}

namespace {

using detail::flags;
using detail::int_flag;
using detail::join;
using detail::on_off_flag;

// Up to two allowed values closest to `x` (ties: the smaller first), ascending.
std::string nearest_values(std::vector<int> allowed, int x) {
  std::stable_sort(allowed.begin(), allowed.end(),
                   [x](int a, int b) { return std::abs(a - x) < std::abs(b - x); });
  if (allowed.size() > 2) allowed.resize(2);
  std::sort(allowed.begin(), allowed.end());
  return join(allowed);
}

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int k = 1; k <= n; ++k)
    if (n % k == 0) out.push_back(k);
  return out;
}

std::string counts_text(const std::vector<int>& counts) {
  if (counts.size() == 1) return fmt::format("the {} GPUs", counts[0]);
  if (counts.size() <= 3) return fmt::format("any GPU count searched ({})", join(counts));
  return fmt::format("any GPU count searched ({}, {}, ..., {})", counts[0], counts[1],
                     counts.back());
}

// The elements of `all` that are in `wanted`, in all's order; all of them when `wanted` is empty.
template <class T>
std::vector<T> keep(const std::vector<T>& all, const std::vector<T>& wanted) {
  if (wanted.empty()) return all;
  std::vector<T> out;
  for (const T& x : all)
    if (std::find(wanted.begin(), wanted.end(), x) != wanted.end()) out.push_back(x);
  return out;
}

std::vector<int> sorted_unique(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// Each listed t, p, d on its own against the model and the largest GPU count.
void check_degrees(const SearchConstraints& c, const ModelShape& m, int most) {
  const int heads = m.num_attention_heads;
  for (int t : c.tp) {
    if (heads % t != 0)
      throw ConfigError("", int_flag("--tp", c.tp),
                        fmt::format("t = {} does not divide the model's {} attention heads "
                                    "(nearest allowed: {})",
                                    t, heads, nearest_values(divisors(heads), t)));
    if (t > most)
      throw ConfigError("", int_flag("--tp", c.tp),
                        fmt::format("t = {} is more than the {} GPUs searched", t, most));
  }
  for (int p : c.pp) {
    if (p > m.num_layers)
      throw ConfigError("", int_flag("--pp", c.pp),
                        fmt::format("p = {} is more than the model's {} layers (a stage holds at "
                                    "least one layer)",
                                    p, m.num_layers));
    if (p > most)
      throw ConfigError("", int_flag("--pp", c.pp),
                        fmt::format("p = {} is more than the {} GPUs searched", p, most));
  }
  for (int d : c.dp)
    if (d > most)
      throw ConfigError("", int_flag("--dp", c.dp),
                        fmt::format("d = {} is more than the {} GPUs searched", d, most));
}

// Why no (t, p, d) of the constraints multiplies to a GPU count, and the values one of the
// given flags could take with the others kept.
std::string tpd_reason(const SearchConstraints& c, const SearchSpace& s, const ModelShape& m) {
  auto lowest = [](const std::vector<int>& v) {
    return v.empty() ? 1 : *std::min_element(v.begin(), v.end());
  };
  // Context parallelism multiplies in too when the space holds cp > 1 (`--cp 2 --tp 8` on 8).
  const int cp = s.context_parallel.empty()
                     ? 1
                     : *std::min_element(s.context_parallel.begin(), s.context_parallel.end());
  const bool with_cp = !s.context_parallel.empty() &&
                       *std::max_element(s.context_parallel.begin(), s.context_parallel.end()) > 1;
  const char* product = with_cp ? "t*cp*p*d" : "t*p*d";
  const long long least = 1LL * lowest(c.tp) * cp * lowest(c.pp) * lowest(c.dp);
  std::string why = fmt::format("no {} equals {}", product, counts_text(s.gpu_counts));
  if (least > s.gpu_counts[0]) why += fmt::format(": {} is at least {}", product, least);
  const char* names[3] = {"--pp", "--dp", "--tp"};
  for (int dim = 0; dim < 3; ++dim) {
    SearchSpace free = s;
    std::vector<int>& list = dim == 0   ? free.pipeline_parallel
                             : dim == 1 ? free.data_parallel
                                        : free.tensor_parallel;
    if (list.empty()) continue;
    list.clear();
    std::set<int> could;
    for (int n : s.gpu_counts)
      for (const Tpd& f : space_factorisations(free, n, m))
        could.insert(dim == 0 ? f.p : dim == 1 ? f.d : f.t);
    if (could.empty()) continue;
    return why + fmt::format(" (with the other flags, {} could be {})", names[dim],
                             join(std::vector<int>(could.begin(), could.end())));
  }
  return why;
}

// Some allowed (t, p, d), microbatch size and global batch must give a whole number of
// microbatches (at most 65535).
void check_batches(const SearchConstraints& c, const ModelShape& m, const std::string& f_tpd,
                   const SearchSpace& s) {
  std::set<int> ds;
  for (int n : s.gpu_counts)
    for (const Tpd& f : space_factorisations(s, n, m)) {
      ds.insert(f.d);
      for (int b : s.micro_batches)
        for (int B : s.global_batches)
          if (B % (b * f.d) == 0 && B / (b * f.d) <= 65535) return;
    }
  std::string key = flags({int_flag("--microbatch-size", c.micro_batch),
                           int_flag("--global-batch", c.global_batch), f_tpd});
  throw ConfigError(
      "", key.empty() ? "global batch" : key,
      fmt::format("no microbatch size ({}) times d ({}) divides the global batch ({}{})",
                  join(s.micro_batches), join(std::vector<int>(ds.begin(), ds.end())),
                  join(s.global_batches), c.global_batch.empty() ? ", the scenario's" : ""));
}

// One --schedules item: "NAME" (every v) or "NAME:vK" (exactly K stages per device).
struct ScheduleItem {
  std::string name;
  int v = 0;  ///< 0: every v
};

ScheduleItem parse_schedule_item(const std::string& flag, const std::string& item) {
  const std::size_t colon = item.find(':');
  if (colon == std::string::npos) return {item, 0};
  ScheduleItem out{item.substr(0, colon), 0};
  const std::string tail = item.substr(colon + 1);
  int v = 0;
  bool ok = tail.size() >= 2 && tail[0] == 'v';
  if (ok) {
    const char* end = tail.data() + tail.size();
    const auto [stop, ec] = std::from_chars(tail.data() + 1, end, v);
    ok = ec == std::errc() && stop == end;
  }
  if (!ok)
    throw ConfigError("", flag,
                      fmt::format("'{}': expected NAME or NAME:vK (K stages per device, e.g. "
                                  "interleaved:v3)",
                                  item));
  if (v < 2)
    throw ConfigError("", flag,
                      fmt::format("'{}': K must be at least 2 (one stage per device is the plain "
                                  "schedule, e.g. 1f1b)",
                                  item));
  out.v = v;
  return out;
}

void keep_schedules(const SearchConstraints& c, const ModelShape& m, const std::set<int>& ps,
                    SearchSpace* s) {
  if (c.schedules.empty()) return;
  const std::string flag = "--schedules " + join(c.schedules);
  std::vector<std::string> names;
  for (const ScheduleOption& o : s->schedules)
    if (std::find(names.begin(), names.end(), o.name) == names.end()) names.push_back(o.name);
  std::vector<ScheduleItem> items;
  for (const std::string& text : c.schedules) {
    const ScheduleItem it = parse_schedule_item(flag, text);
    const std::string& n = it.name;
    if (std::find(names.begin(), names.end(), n) == names.end())
      throw ConfigError("", flag,
                        fmt::format("unknown schedule '{}' (did you mean '{}'? searched: {})", n,
                                    nearest_name(n, names), join(names)));
    if (it.v != 0) {
      std::vector<int> vs;
      bool takes_v = false;
      for (const ScheduleOption& o : s->schedules)
        if (o.name == n && o.takes_v) {
          takes_v = true;
          // p*v stages of at least one layer each, with some allowed p >= 2.
          if (std::any_of(ps.begin(), ps.end(),
                          [&](int p) { return p >= 2 && p * o.v <= m.num_layers; }))
            vs.push_back(o.v);
        }
      if (!takes_v)
        throw ConfigError("", flag,
                          fmt::format("'{}': {} has a fixed number of stages per device and "
                                      "takes no :v",
                                      text, n));
      if (std::find(vs.begin(), vs.end(), it.v) == vs.end())
        throw ConfigError("", flag,
                          fmt::format("'{}': v = {} is not searched for this model and p (valid: "
                                      "{}; p*v must not exceed the model's {} layers)",
                                      text, it.v, vs.empty() ? "none" : join(vs), m.num_layers));
    }
    items.push_back(it);
  }
  std::vector<ScheduleOption> kept;
  for (const ScheduleOption& o : s->schedules)
    if (std::any_of(items.begin(), items.end(), [&](const ScheduleItem& it) {
          return it.name == o.name && (it.v == 0 || it.v == o.v);
        }))
      kept.push_back(o);
  s->schedules = std::move(kept);
}

// Options that cannot combine with what is left of t, p, d (the screen would find no
// well-formed configuration).
void check_combinations(const SearchConstraints& c, const std::string& f_tpd,
                        const std::set<int>& ts, const std::set<int>& ps, const std::set<int>& ds,
                        const SearchSpace& s) {
  const std::string f_sched = c.schedules.empty() ? "" : "--schedules " + join(c.schedules);
  const ScheduleOption& first = s.schedules[0];
  if (*ps.rbegin() == 1 && (first.v != 1 || first.v_shape || first.pipelines != 1))
    throw ConfigError("", flags({f_tpd, f_sched}),
                      fmt::format("only p = 1 is left, and {} needs p >= 2 (with one stage a "
                                  "plain schedule such as 1f1b runs)",
                                  first.name));
  const bool plain = std::any_of(s.schedules.begin(), s.schedules.end(),
                                 [](const ScheduleOption& o) { return !o.explicit_recompute; });
  if (!plain &&
      std::find(s.recompute.begin(), s.recompute.end(), Recompute::kFull) == s.recompute.end()) {
    std::vector<std::string> rc;
    for (Recompute r : c.recompute) rc.emplace_back(recompute_name(r));
    throw ConfigError("", flags({f_sched, "--recompute " + join(rc)}),
                      "these schedules recompute explicitly (R actions) and need --recompute full");
  }
  if (s.sequence_parallel == std::vector<int>{1} && *ts.rbegin() == 1)
    throw ConfigError("", flags({f_tpd, on_off_flag("--sequence-parallel", c.sequence_parallel)}),
                      "sequence parallelism splits activations across the tensor-parallel group "
                      "and needs t > 1, but only t = 1 is left");
  if (s.zero.front() > 0 && *ds.rbegin() == 1)
    throw ConfigError("", flags({f_tpd, int_flag("--zero", c.zero)}),
                      "ZeRO shards across data-parallel replicas and needs d > 1, but only d = 1 "
                      "is left");
}

// Values outside what each flag can mean at all (the command line checks the spelling).
void check_ranges(const SearchConstraints& c) {
  auto in = [](const std::vector<int>& v, int lo, int hi) {
    return std::all_of(v.begin(), v.end(), [=](int x) { return x >= lo && x <= hi; });
  };
  const struct {
    const char* flag;
    const std::vector<int>& list;
    int lo, hi;
    const char* expected;
  } ranges[] = {{"--tp", c.tp, 1, 65535, "degrees 1..65535"},
                {"--pp", c.pp, 1, 65535, "degrees 1..65535"},
                {"--dp", c.dp, 1, 65535, "degrees 1..65535"},
                {"--microbatch-size", c.micro_batch, 1, 65535, "sizes 1..65535"},
                {"--global-batch", c.global_batch, 1, 1 << 24, "1..16777216 sequences"},
                {"--zero", c.zero, 0, 3, "stages 0..3"},
                {"--sequence-parallel", c.sequence_parallel, 0, 1, "0 (off) or 1 (on)"},
                {"--offload", c.offload, 0, 1, "0 (off) or 1 (on)"},
                {"--cp", c.cp, 1, 255, "degrees 1..255"},
                {"--ep", c.ep, 1, 65535, "degrees 1..65535"},
                {"--etp", c.etp, 1, 65535, "degrees 1..65535 (1, or the tensor-parallel size)"},
                {"--fp8", c.fp8, 0, 1, "0 (off) or 1 (on)"},
                {"--overlap-param-gather", c.param_gather, 0, 1, "0 (off) or 1 (on)"}};
  for (const auto& r : ranges)
    if (!in(r.list, r.lo, r.hi))
      throw ConfigError("", int_flag(r.flag, r.list), std::string("expected ") + r.expected);
  if (c.gpus < 0) throw ConfigError("", "--gpus", "expected a GPU count >= 1");
}

}  // namespace

bool SearchConstraints::empty() const { return describe().empty(); }

std::string SearchConstraints::describe() const {
  std::vector<std::string> rc;
  for (Recompute r : recompute) rc.emplace_back(recompute_name(r));
  return flags(
      {gpus > 0 ? fmt::format("--gpus {}", gpus) : "", int_flag("--tp", tp), int_flag("--pp", pp),
       int_flag("--dp", dp), int_flag("--microbatch-size", micro_batch),
       int_flag("--global-batch", global_batch),
       schedules.empty() ? "" : "--schedules " + join(schedules),
       rc.empty() ? "" : "--recompute " + join(rc), int_flag("--zero", zero),
       on_off_flag("--sequence-parallel", sequence_parallel), on_off_flag("--offload", offload),
       int_flag("--cp", cp), int_flag("--ep", ep), int_flag("--etp", etp),
       on_off_flag("--fp8", fp8), on_off_flag("--overlap-param-gather", param_gather),
       framework == Framework::kAny ? ""
                                    : fmt::format("--framework {}", framework_name(framework))});
}

void constrain_space(const SearchConstraints& c, const ModelShape& m, int cluster_gpus,
                     SearchSpace* s) {
  check_ranges(c);
  // Context and expert parallelism first: they shape the factorisations below.
  if (!c.cp.empty()) {
    for (int cp : c.cp)
      if (cp > 1 && m.seq_length % (2 * cp) != 0)
        throw ConfigError("", int_flag("--cp", c.cp),
                          fmt::format("2 x {} does not divide seq_length {}; expected cp with 2cp "
                                      "dividing the sequence",
                                      cp, m.seq_length));
    if (*std::max_element(c.cp.begin(), c.cp.end()) > 1 && !s->fused_attention)
      throw ConfigError(
          "", int_flag("--cp", c.cp),
          "context parallelism needs fused attention; expected model.attention_backend "
          "auto (the default), flash or fused in the scenario");
    if (*std::max_element(c.cp.begin(), c.cp.end()) > 1 && hw::attention_window(m) > 0)
      throw ConfigError("", int_flag("--cp", c.cp),
                        fmt::format("context parallelism with a sliding attention window "
                                    "(model.window_size {}) is not modelled; expected --cp 1",
                                    m.window_size));
    s->context_parallel = sorted_unique(c.cp);
  }
  if (!c.ep.empty()) {
    for (int ep : c.ep)
      if (ep > 1 && (m.num_experts == 0 || m.num_experts % ep != 0))
        throw ConfigError("", int_flag("--ep", c.ep),
                          m.num_experts == 0
                              ? fmt::format("{} for a dense model; expected 1", ep)
                              : fmt::format("{} does not divide num_experts {}; expected a divisor",
                                            ep, m.num_experts));
    s->expert_parallel = sorted_unique(c.ep);
  }
  if (!c.etp.empty()) {
    // Expert-TP is 1 or t: a degree k > 1 runs where t = k.
    if (m.num_experts == 0 && *std::max_element(c.etp.begin(), c.etp.end()) > 1)
      throw ConfigError("", int_flag("--etp", c.etp),
                        "expert tensor parallelism for a dense model; expected 1");
    for (int k : c.etp)
      if (k > 1 && m.num_attention_heads % k != 0)
        throw ConfigError("", int_flag("--etp", c.etp),
                          fmt::format("{} is not a tensor-parallel size of this model (it does "
                                      "not divide the {} attention heads); expected 1 or one",
                                      k, m.num_attention_heads));
    s->expert_tp = sorted_unique(c.etp);
    const bool any_t = s->expert_tp.front() == 1;
    if (!any_t && !c.tp.empty() &&
        std::none_of(c.tp.begin(), c.tp.end(), [&](int t) { return s->expert_tp_allowed(t); }))
      throw ConfigError("", flags({int_flag("--etp", c.etp), int_flag("--tp", c.tp)}),
                        "expert tensor parallelism is 1 or the tensor-parallel size; expected "
                        "--etp 1 or a degree --tp allows");
  }
  if (!c.fp8.empty()) s->fp8 = sorted_unique(c.fp8);
  if (!c.param_gather.empty()) {
    // Megatron asserts --overlap-param-gather only with --overlap-grad-reduce.
    if (std::find(c.param_gather.begin(), c.param_gather.end(), 1) != c.param_gather.end() &&
        !s->overlap_grad_reduce)
      throw ConfigError("", on_off_flag("--overlap-param-gather", c.param_gather),
                        "without overlap_grad_reduce; expected parallel.overlap_grad_reduce: true "
                        "in the scenario (Megatron requires both)");
    s->param_gather = sorted_unique(c.param_gather);
  }
  const std::string f_gpus = c.gpus > 0 ? fmt::format("--gpus {}", c.gpus) : "";
  const std::string f_tpd = flags({f_gpus, int_flag("--tp", c.tp), int_flag("--cp", c.cp),
                                   int_flag("--pp", c.pp), int_flag("--dp", c.dp)});
  if (c.gpus > cluster_gpus)
    throw ConfigError("", f_gpus, fmt::format("the cluster has {} GPUs", cluster_gpus));
  if (c.gpus > 0) s->gpu_counts = {c.gpus};
  check_degrees(c, m, *std::max_element(s->gpu_counts.begin(), s->gpu_counts.end()));
  s->tensor_parallel = sorted_unique(c.tp);
  s->pipeline_parallel = sorted_unique(c.pp);
  s->data_parallel = sorted_unique(c.dp);
  if (!c.tp.empty())
    s->max_tensor_parallel = std::max(s->max_tensor_parallel, s->tensor_parallel.back());
  std::vector<int> counts;
  std::set<int> ts, ps, ds;
  for (int n : s->gpu_counts) {
    const std::vector<Tpd> fs = space_factorisations(*s, n, m);
    if (!fs.empty()) counts.push_back(n);
    for (const Tpd& f : fs) {
      ts.insert(f.t);
      ps.insert(f.p);
      ds.insert(f.d);
    }
  }
  if (counts.empty()) throw ConfigError("", f_tpd, tpd_reason(c, *s, m));
  s->gpu_counts = counts;
  if (!c.micro_batch.empty()) s->micro_batches = sorted_unique(c.micro_batch);
  if (!c.global_batch.empty()) s->global_batches = sorted_unique(c.global_batch);
  check_batches(c, m, f_tpd, *s);
  keep_schedules(c, m, ps, s);
  s->recompute = keep(s->recompute, c.recompute);
  s->zero = keep(s->zero, c.zero);
  s->sequence_parallel = keep(s->sequence_parallel, c.sequence_parallel);
  s->offload = keep(s->offload, c.offload);
  if (c.framework != Framework::kAny) detail::keep_framework(c, m, ps, s);
  check_combinations(c, f_tpd, ts, ps, ds, *s);
}

}  // namespace pw
