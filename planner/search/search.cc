#include "planner/search/search.h"

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>

#include "core/error.h"
#include "planner/search/search_eval.h"
#include "sim/evaluator.h"

namespace pw {
namespace {

using detail::apply_layer_split;
using detail::finish;
using detail::gen_key;
using detail::GenEntry;
using detail::generator_params;
using detail::GenKey;
using detail::pareto_front;
using detail::PipeResult;
using detail::run_on;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kBuckets = 16;
constexpr int kMaxMicrobatches = 65535;  // SearchConfig::microbatches is 16 bits

double now_seconds() {
  using C = std::chrono::steady_clock;
  return std::chrono::duration<double>(C::now().time_since_epoch()).count();
}

// One (t, p, d, microbatch size, global batch) combination; the screen's unit of parallel work.
struct Cell {
  int t, p, d, b, m;
  int cp = 1, ep = 1, etp1 = 0, fp8 = 0;
};

// The inner option lists, as a mixed-radix counter.
struct Inner {
  std::size_t sched, rc, sp, zero, off, trim;
  std::size_t size() const { return sched * rc * sp * zero * off * trim; }
};

struct Cand {
  double lb;
  double mem_lb;
  std::uint32_t cell;
  std::uint32_t inner;
  friend bool operator<(const Cand& a, const Cand& b) {
    if (a.lb != b.lb) return a.lb < b.lb;
    if (a.cell != b.cell) return a.cell < b.cell;
    return a.inner < b.inner;
  }
};

struct CellOut {
  std::vector<Cand> keep;               // best `k` fitting candidates, sorted
  double cut = kInf;                    // best lower bound dropped for lack of room
  double min_mem = kInf;                // smallest memory lower bound of a valid configuration
  double min_mem_over = kInf;           // ... of one whose bound is over the limit
  std::array<Cand, kBuckets> bucket{};  // best candidate per memory bucket (lb = inf: none)
  std::uint64_t valid = 0, fit = 0;
};

SearchConfig make_config(const SearchSpace& s, const Inner& in, const Cell& c, std::uint32_t i) {
  SearchConfig x;
  x.t = c.t;
  x.p = c.p;
  x.d = c.d;
  x.cp = c.cp;
  x.ep = c.ep;
  x.etp1 = static_cast<std::uint8_t>(c.etp1);
  x.fp8 = c.fp8;
  x.micro_batch = c.b;
  x.microbatches = c.m;
  x.end_trim = s.end_trim[i % in.trim];
  i /= in.trim;
  x.offload = s.offload[i % in.off];
  i /= in.off;
  set_zero_mode(s, i % in.zero, &x);
  i /= in.zero;
  x.sequence_parallel = s.sequence_parallel[i % in.sp];
  i /= in.sp;
  x.recompute = static_cast<std::uint8_t>(s.recompute[i % in.rc]);
  i /= in.rc;
  x.schedule = static_cast<std::uint8_t>(i);
  return x;
}

void screen_cell(const CostModel& model, const Inner& in, const std::vector<int>& order,
                 const Cell& cell, std::uint32_t cell_id, std::size_t k, bool prune,
                 StageCosts* scratch, CellOut* out) {
  const PlanProblem& pr = model.problem();
  const double limit = pr.limit();
  const double cutoff = prune ? limit : kInf;
  for (Cand& b : out->bucket) b = Cand{kInf, kInf, cell_id, 0};
  std::vector<Cand>& heap = out->keep;
  heap.clear();
  auto keep = [&](const SearchConfig& c, std::uint32_t i, const ScreenResult& r) {
    ++out->valid;
    out->min_mem = std::min(out->min_mem, r.mem_lb);
    if (r.mem_lb > limit) out->min_mem_over = std::min(out->min_mem_over, r.mem_lb);
    if (r.mem_lb > cutoff) return;
    ++out->fit;
    const Cand cand{objective_value(pr, c, r.time_lb), r.mem_lb, cell_id, i};
    const int bk = std::min(kBuckets - 1, static_cast<int>(r.mem_lb / limit * kBuckets));
    if (cand < out->bucket[bk]) out->bucket[bk] = cand;
    if (heap.size() < k) {
      heap.push_back(cand);
      std::push_heap(heap.begin(), heap.end());
    } else if (cand < heap.front()) {
      out->cut = std::min(out->cut, heap.front().lb);
      std::pop_heap(heap.begin(), heap.end());
      heap.back() = cand;
      std::push_heap(heap.begin(), heap.end());
    } else {
      out->cut = std::min(out->cut, cand.lb);
    }
  };
  // Configurations are visited option by option, and for each the schedules by cost class, so
  // that schedules of one class reuse the stage costs just computed (CostModel::cost_class).
  // What a cell keeps does not depend on the visiting order (Cand's order is total).
  const std::uint32_t sub = static_cast<std::uint32_t>(in.size() / in.sched);
  for (std::uint32_t o = 0; o < sub; ++o) {
    int held = -1;  // the cost class whose costs the scratch holds for option o
    for (const int sched : order) {
      const std::uint32_t i = static_cast<std::uint32_t>(sched) * sub + o;
      const SearchConfig c = make_config(model.space(), in, cell, i);
      const int cls = model.cost_class(sched);
      const ScreenResult r = model.screen(c, scratch, held == cls);
      held = r.costed ? cls : -1;
      if (r.valid) keep(c, i, r);
    }
  }
  std::sort(heap.begin(), heap.end());
}

}  // namespace

namespace {

class Searcher {
 public:
  Searcher(const PlanProblem& pr, const SearchSpace& sp, const GeneratorRegistry& reg,
           const SearchOptions& opt)
      : model_(pr, sp), registry_(reg), opt_(opt) {
    const Inner in{sp.schedules.size(), sp.recompute.size(), sp.sequence_parallel.size(),
                   zero_mode_count(sp), sp.offload.size(),   sp.end_trim.size()};
    inner_ = in;
    // Schedules grouped by cost class (stable: the space's order within a class).
    for (std::size_t s = 0; s < sp.schedules.size(); ++s) by_class_.push_back(static_cast<int>(s));
    std::stable_sort(by_class_.begin(), by_class_.end(),
                     [&](int a, int b) { return model_.cost_class(a) < model_.cost_class(b); });
    for (int n : sp.gpu_counts)
      for (const Tpd& f : space_factorisations(sp, n, pr.model))
        for (const ExpertLayout& ex : cell_expert_parallel(sp, pr.model, f.t, f.cp, f.d))
          for (int fp8 : sp.fp8)
            for (int b : sp.micro_batches)
              for (int B : sp.global_batches)
                if (B % (b * f.d) == 0 && B / (b * f.d) <= kMaxMicrobatches) {
                  Cell cell{f.t, f.p, f.d, b, B / (b * f.d)};
                  cell.cp = f.cp;
                  cell.ep = ex.ep;
                  cell.etp1 = ex.etp1;
                  cell.fp8 = fp8;
                  cells_.push_back(cell);
                }
    result_.stats.space = space_size(sp, pr.model);
  }

  SearchResult run(tbb::task_arena& arena) {
    std::size_t& k = keep_;
    k = static_cast<std::size_t>(std::max(64, 4 * opt_.top));
    if (!opt_.prune) k = inner_.size();
    double t0 = now_seconds();
    arena.execute([&] { screen_all(k); });
    result_.stats.screen_seconds = now_seconds() - t0;
    t0 = now_seconds();
    for (;;) {
      const bool exhausted = evaluate_in_order(arena);
      if (!exhausted || result_.stats.budget_hit) break;
      double cut = kInf;
      for (const CellOut& o : outs_) cut = std::min(cut, o.cut);
      if (cut >= threshold()) break;  // every dropped candidate is bounded out
      k *= 4;
      const double t1 = now_seconds();
      arena.execute([&] { screen_all(k); });
      result_.stats.screen_seconds += now_seconds() - t1;
    }
    evaluate_pareto(arena);
    result_.stats.evaluate_seconds = now_seconds() - t0;
    des_tier(arena);
    assemble();
    return std::move(result_);
  }

 private:
  // Screens every cell keeping its best `k` candidates; with `below` < inf only the cells that
  // dropped a candidate with a bound under it (the others' kept lists are already complete).
  void screen_all(std::size_t k, double below = kInf) {
    if (below == kInf || outs_.size() != cells_.size()) outs_.assign(cells_.size(), CellOut{});
    std::vector<char> redo(cells_.size(), 1);
    if (below < kInf)
      for (std::size_t i = 0; i < cells_.size(); ++i) redo[i] = outs_[i].cut < below;
    std::atomic<std::size_t> done{0};
    std::mutex mu;
    std::size_t reported = 0;
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, cells_.size(), 1), [&](const auto& r) {
      StageCosts scratch;
      for (std::size_t i = r.begin(); i != r.end(); ++i) {
        if (!redo[i]) continue;
        outs_[i] = CellOut{};
        screen_cell(model_, inner_, by_class_, cells_[i], static_cast<std::uint32_t>(i), k,
                    opt_.prune, &scratch, &outs_[i]);
        const std::size_t n = ++done;
        if (!opt_.progress) continue;
        std::lock_guard<std::mutex> lock(mu);
        if (n * 200 / cells_.size() > reported * 200 / cells_.size() || n == cells_.size()) {
          reported = n;
          opt_.progress(0.9 * static_cast<double>(n) / cells_.size());
        }
      }
    });
    cands_.clear();
    result_.stats.screened = result_.stats.valid = result_.stats.fit = 0;
    result_.min_memory_needed = kInf;
    for (const CellOut& o : outs_) {
      cands_.insert(cands_.end(), o.keep.begin(), o.keep.end());
      result_.stats.valid += o.valid;
      result_.stats.fit += o.fit;
      result_.min_memory_needed = std::min(result_.min_memory_needed, o.min_mem);
    }
    result_.stats.screened = cells_.size() * inner_.size();
    std::sort(cands_.begin(), cands_.end());
  }

  SearchConfig config_of(const Cand& c) const {
    return make_config(model_.space(), inner_, cells_[c.cell], c.inner);
  }

  bool des_tier() const { return opt_.des_top > 0; }

  // Rows the evaluator must rank exactly: the table's, or the DES tier's input.
  int ranked() const { return std::max(opt_.top, des_tier() ? opt_.des_top : 0); }

  double threshold() const {
    if (!opt_.prune) return kInf;
    const std::size_t k = static_cast<std::size_t>(std::max(1, ranked()));
    if (best_.size() >= k) return best_[k - 1];
    // With the DES tier this phase only seeds it (the tier itself evaluates whatever can still
    // win): once something fits, stop at twice its objective rather than scoring deep into
    // configurations that fit rarely.
    if (des_tier() && !best_.empty()) return 2 * best_.front();
    return kInf;
  }

  // Evaluates candidates best bound first; returns true when the list ran out before the bound
  // stopped it.
  bool evaluate_in_order(tbb::task_arena& arena) {
    std::size_t pos = 0;
    while (pos < cands_.size()) {
      if (cands_[pos].lb >= threshold()) return false;
      std::vector<Cand> batch;
      const double th = threshold();
      while (pos < cands_.size() && batch.size() < 64 && cands_[pos].lb < th) {
        const Cand& c = cands_[pos++];
        if (seen_.emplace(std::make_pair(c.cell, c.inner), 1).second) batch.push_back(c);
      }
      if (result_.stats.evaluated + batch.size() > static_cast<std::size_t>(opt_.max_evaluations)) {
        result_.stats.budget_hit = true;
        return false;
      }
      evaluate_batch(arena, batch);
      if (opt_.progress)
        opt_.progress(0.9 + 0.1 * std::min(1.0, static_cast<double>(pos) / cands_.size()));
    }
    return true;
  }

  void evaluate_batch(tbb::task_arena& arena, const std::vector<Cand>& batch) {
    const std::size_t n = batch.size();
    std::vector<SearchConfig> cfg(n);
    std::vector<StageCosts> sc(n);
    std::vector<GeneratorParams> gp(n);
    std::vector<std::string> why(n);
    std::vector<GenEntry*> entry(n, nullptr);
    std::vector<std::pair<GenKey, std::size_t>> todo;  // new key, first config asking it
    for (std::size_t i = 0; i < n; ++i) {
      cfg[i] = config_of(batch[i]);
      if (!model_.stage_costs(cfg[i], &sc[i])) {
        why[i] = "not a valid configuration";
        continue;
      }
      if (!generator_params(model_, cfg[i], sc[i], &gp[i], &why[i])) continue;
      const GenKey key = gen_key(cfg[i], gp[i]);
      auto [it, fresh] = cache_.try_emplace(key, nullptr);
      if (fresh) {
        it->second = std::make_unique<GenEntry>();
        todo.emplace_back(key, i);
      }
      entry[i] = it->second.get();
    }
    // Longest first (actions ~ p * m * chunks): one long generation left for last would keep
    // the other threads idle. The entries do not depend on the order.
    auto work = [&](const std::pair<GenKey, std::size_t>& t) {
      const SearchConfig& c = cfg[t.second];
      const ScheduleOption& so = model_.space().schedules[c.schedule];
      return std::int64_t{c.p} * c.microbatches * std::max(1, so.v) * so.pipelines;
    };
    std::stable_sort(todo.begin(), todo.end(),
                     [&](const auto& a, const auto& b) { return work(a) > work(b); });
    const double t_gen = now_seconds();
    // Each worker takes the next entry in that order (a static split would not).
    std::atomic<std::size_t> next{0};
    const int workers = static_cast<int>(std::min<std::size_t>(
        todo.size(), static_cast<std::size_t>(std::max(1, arena.max_concurrency()))));
    arena.execute([&] {
      tbb::parallel_for(0, workers, [&](int) {
        for (std::size_t j; (j = next++) < todo.size();) {
          const std::size_t i = todo[j].second;
          GenEntry& e = *entry[i];
          try {
            gp[i].memo = &memo_;
            // The Evaluator validates the schedule (one dependency graph, not two).
            const std::string& name = model_.space().schedules[cfg[i].schedule].name;
            e.ev = std::make_unique<Evaluator>(generate_unvalidated(registry_, name, gp[i]),
                                               generation_source(name));
          } catch (const ConfigError& ex) {  // refused (internal errors propagate)
            e.error = ex.what();
          }
        }
      });
    });
    result_.stats.generated += todo.size();
    const double t_score = now_seconds();
    result_.stats.generate_seconds += t_score - t_gen;
    std::vector<Evaluated> out(n);
    arena.execute([&] {
      tbb::parallel_for(std::size_t{0}, n, [&](std::size_t i) {
        PipeResult pr;
        if (!entry[i]) {
          pr.why = why[i];
        } else if (!entry[i]->ev) {
          pr.why = entry[i]->error;
        } else {
          std::lock_guard<std::mutex> lock(entry[i]->mu);
          pr = run_on(model_, cfg[i], sc[i], *entry[i]->ev, nullptr);
        }
        out[i] = finish(model_, cfg[i], pr);
        StageCosts tmp;
        out[i].time_lb = model_.screen(cfg[i], &tmp).time_lb;
        out[i].mem_lb = batch[i].mem_lb;
        out[i].mem_bound = std::max(out[i].mem_bound, out[i].mem_lb);
        out[i].time_bound = std::max(out[i].time_bound, out[i].time_lb);
      });
    });
    result_.stats.score_seconds += now_seconds() - t_score;
    for (Evaluated& e : out) record(std::move(e));
  }

  void record(Evaluated e) {
    ++result_.stats.evaluated;
    if (e.feasible) {
      best_.insert(std::upper_bound(best_.begin(), best_.end(), e.objective), e.objective);
      if (best_.size() > static_cast<std::size_t>(std::max(1, ranked()))) best_.pop_back();
    }
    evaluated_.push_back(std::move(e));
  }

  // Scores the best few candidates of each memory bucket so the Pareto front spans memory.
  void evaluate_pareto(tbb::task_arena& arena) {
    // Points more than twice as slow as the best found are no trade-off worth drawing (and on
    // the smallest GPU counts of the sweep they are the slowest schedules to generate).
    const double cap = best_.empty() ? kInf : 2 * best_.front();
    std::vector<Cand> batch;
    for (int bk = 0; bk < kBuckets; ++bk) {
      std::vector<Cand> in_bucket;
      for (const CellOut& o : outs_)
        if (o.bucket[bk].lb < cap) in_bucket.push_back(o.bucket[bk]);
      std::sort(in_bucket.begin(), in_bucket.end());
      for (std::size_t i = 0; i < in_bucket.size() && i < 2; ++i)
        if (seen_.emplace(std::make_pair(in_bucket[i].cell, in_bucket[i].inner), 1).second)
          batch.push_back(in_bucket[i]);
    }
    evaluate_batch(arena, batch);
  }

  // The schedule the evaluator scored for `c` (from the generation cache), layer split applied.
  bool cached_schedule(const SearchConfig& c, Schedule* out) const {
    StageCosts sc;
    GeneratorParams gp;
    std::string why;
    if (!model_.stage_costs(c, &sc) || !generator_params(model_, c, sc, &gp, &why)) return false;
    const auto it = cache_.find(gen_key(c, gp));
    if (it == cache_.end() || !it->second->ev) return false;
    *out = it->second->ev->schedule();
    apply_layer_split(sc, &out->placement);
    return true;
  }

  double row_lb(const Evaluated& e) const {
    return objective_value(model_.problem(), e.config, e.time_bound);
  }

  // The top-th best objective among rows the DES found to fit: what a candidate must beat.
  double des_threshold() const { return des_best_.empty() ? kInf : des_best_.front(); }

  // Simulates rows `idx` of evaluated_ with the DES (in parallel; results recorded in order).
  void des_simulate(tbb::task_arena& arena, const std::vector<std::size_t>& idx) {
    const std::size_t n = idx.size();
    std::vector<Schedule> sched(n);
    std::vector<Evaluated> rows(n);
    std::vector<char> have(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      rows[i] = evaluated_[idx[i]];
      have[i] = cached_schedule(rows[i].config, &sched[i]);
    }
    arena.execute([&] {
      tbb::parallel_for(std::size_t{0}, n, [&](std::size_t i) {
        if (have[i]) des_rescore(model_.problem(), model_.space(), sched[i], &rows[i]);
      });
    });
    for (std::size_t i = 0; i < n; ++i) {
      des_done_[idx[i]] = 1;
      if (!have[i]) continue;  // no generated schedule: the row cannot run
      ++result_.stats.des_simulated;
      evaluated_[idx[i]] = rows[i];
      if (!rows[i].feasible) continue;
      des_best_.insert(std::upper_bound(des_best_.begin(), des_best_.end(), rows[i].objective),
                       rows[i].objective);
      if (des_best_.size() > static_cast<std::size_t>(std::max(1, opt_.top))) des_best_.pop_back();
    }
  }

  // Third tier, certified: the DES simulates the evaluator's best des_top rows, then keeps
  // simulating (and, where needed, evaluating and re-screening) every configuration whose lower
  // bound could still beat the top-th DES-best, cheapest bound first, until none can or the
  // budget (SearchOptions::des_budget) runs out. The bounds are lower bounds of the DES's time
  // and memory, so the ranking is the DES's own over the whole space.
  void des_tier(tbb::task_arena& arena) {
    if (!des_tier()) return;
    const double t0 = now_seconds();
    const double limit = model_.problem().limit();
    auto grow = [&] { des_done_.resize(evaluated_.size(), 0); };
    grow();
    // Seeds: the evaluator's best rows that ran (feasible first).
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < evaluated_.size(); ++i)
      if (evaluated_[i].iteration > 0 && evaluated_[i].feasible) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return evaluated_[a].objective < evaluated_[b].objective;
    });
    if (order.size() > static_cast<std::size_t>(opt_.des_top)) order.resize(opt_.des_top);
    des_simulate(arena, order);
    const std::size_t batch_size =
        8 * static_cast<std::size_t>(std::max(1, arena.max_concurrency()));
    for (;;) {
      const double th = des_threshold();
      // 1. Rows the evaluator scored whose bound is below the bar: simulate the likely winners
      // first (the evaluator's order), since a lower bar prunes the rest sooner.
      std::vector<std::size_t> pending;
      for (std::size_t i = 0; i < evaluated_.size(); ++i) {
        const Evaluated& e = evaluated_[i];
        if (des_done_[i] || e.iteration <= 0 || e.mem_bound > limit || row_lb(e) >= th) continue;
        pending.push_back(i);
      }
      if (!pending.empty()) {
        std::stable_sort(pending.begin(), pending.end(), [&](std::size_t a, std::size_t b) {
          return evaluated_[a].objective < evaluated_[b].objective;
        });
        if (pending.size() > batch_size) pending.resize(batch_size);
        if (result_.stats.des_simulated + pending.size() >
            static_cast<std::size_t>(opt_.des_budget)) {
          result_.stats.des_note = fmt::format(
              "the DES budget (--des-budget {}) stopped certification: configurations with lower "
              "bounds from {:.3f} s were not simulated",
              opt_.des_budget, row_lb(evaluated_[pending.front()]));
          break;
        }
        des_simulate(arena, pending);
        continue;
      }
      // 2. Screen candidates the evaluator has not scored yet whose bound is below the bar.
      std::vector<Cand> todo;
      for (const Cand& c : cands_) {
        if (c.lb >= th || todo.size() >= 256) break;
        if (seen_.emplace(std::make_pair(c.cell, c.inner), 1).second) todo.push_back(c);
      }
      if (!todo.empty()) {
        if (result_.stats.evaluated + todo.size() >
            static_cast<std::size_t>(opt_.max_evaluations)) {
          result_.stats.budget_hit = true;
          result_.stats.des_note =
              "the evaluation budget (--max-evaluations) stopped certification";
          break;
        }
        evaluate_batch(arena, todo);
        grow();
        continue;
      }
      // 3. Cells whose kept candidates were cut below the bar: screen them again with more room.
      double cut = kInf;
      for (const CellOut& o : outs_) cut = std::min(cut, o.cut);
      if (opt_.prune && cut < th && keep_ < inner_.size()) {
        keep_ *= 4;
        arena.execute([&] { screen_all(keep_, th); });
        continue;
      }
      result_.stats.certified = true;
      break;
    }
    // The evaluator's Pareto points, so the DES front spans memory too.
    std::vector<std::size_t> ev;
    for (std::size_t i = 0; i < evaluated_.size(); ++i)
      if (evaluated_[i].feasible && evaluated_[i].tier == Tier::kEvaluator) ev.push_back(i);
    std::stable_sort(ev.begin(), ev.end(), [&](std::size_t a, std::size_t b) {
      const Evaluated &x = evaluated_[a], &y = evaluated_[b];
      return x.peak_memory != y.peak_memory ? x.peak_memory < y.peak_memory
                                            : x.iteration < y.iteration;
    });
    std::vector<std::size_t> front;
    double best = kInf;
    for (std::size_t i : ev)
      if (evaluated_[i].iteration < best) {
        best = evaluated_[i].iteration;
        if (!des_done_[i]) front.push_back(i);
      }
    des_simulate(arena, front);
    result_.stats.des_seconds = now_seconds() - t0;
  }

  void assemble() {
    const bool des = des_tier();
    std::vector<Evaluated> ok;
    for (std::size_t i = 0; i < evaluated_.size(); ++i) {
      const Evaluated& e = evaluated_[i];
      if (e.feasible && (!des || des_done_[i])) ok.push_back(e);
    }
    // Ties (configurations that differ only in where memory goes) favour less memory.
    std::stable_sort(ok.begin(), ok.end(), [](const Evaluated& a, const Evaluated& b) {
      if (a.objective != b.objective) return a.objective < b.objective;
      return a.peak_memory < b.peak_memory;
    });
    result_.pareto = pareto_front(ok);
    if (ok.size() > static_cast<std::size_t>(opt_.top)) ok.resize(opt_.top);
    result_.top = std::move(ok);
    if (!result_.top.empty()) {
      result_.min_memory_needed = 0;
    } else if (!result_.stats.budget_hit) {
      // Nothing fits. Every configuration whose bound fits was scored (no budget stopped it), so
      // the least any configuration needs is the smaller of the scored peaks (by the engine that
      // ranked them; a row no schedule could be generated for needs more than the limit) and the
      // bounds of those never scored (over the limit). The screen's bound alone can sit below
      // the limit and made the message contradict itself.
      // A row whose generator refused the limit needs more than the limit by an amount not
      // known (its screen bound, when over the limit, is still a bound): then the least any
      // configuration needs is only known to exceed the limit.
      const double limit = model_.problem().limit();
      double need = kInf;
      bool over_by_unknown = false;
      for (const CellOut& o : outs_) need = std::min(need, o.min_mem_over);
      for (const Evaluated& e : evaluated_) {
        if (e.iteration > 0)
          need = std::min(need, e.peak_memory);
        else if (e.mem_lb > limit)
          need = std::min(need, e.mem_lb);
        else
          over_by_unknown = true;
      }
      if (over_by_unknown) {
        need = limit;
        result_.min_memory_strict = true;
      }
      if (need < kInf) result_.min_memory_needed = need;
    }
    if (opt_.keep_all) result_.all = evaluated_;
  }

  CostModel model_;
  const GeneratorRegistry& registry_;
  SearchOptions opt_;
  Inner inner_{};
  std::vector<Cell> cells_;
  std::vector<CellOut> outs_;
  std::vector<Cand> cands_;
  std::map<std::pair<std::uint32_t, std::uint32_t>, int> seen_;
  std::map<GenKey, std::unique_ptr<GenEntry>> cache_;
  std::vector<int> by_class_;  // schedule indices grouped by CostModel::cost_class
  GeneratorMemo memo_;         // memory-independent generator work shared across limits
  std::vector<double> best_;
  std::vector<double> des_best_;  // best DES objectives of rows that fit, ascending (top of them)
  std::vector<char> des_done_;    // per evaluated_ row: simulated by the DES
  std::size_t keep_ = 64;
  // (keep_: candidates the screen keeps per cell)
  std::vector<Evaluated> evaluated_;
  SearchResult result_;
};

}  // namespace

SearchResult run_search(const PlanProblem& problem, const SearchSpace& space,
                        const GeneratorRegistry& registry, const SearchOptions& options) {
  if (space.schedules.empty()) throw ConfigError("", "schedules", "no schedule to search over");
  if (space.schedules.size() > 255) throw ConfigError("", "schedules", "more than 255 options");
  // More threads than cores only makes TBB warn; the result does not depend on the count.
  const int cores = tbb::this_task_arena::max_concurrency();
  const int threads = options.threads > 0 ? std::min(options.threads, cores) : cores;
  tbb::task_arena arena(threads);
  Searcher s(problem, space, registry, options);
  SearchResult r = s.run(arena);
  r.stats.threads = threads;
  return r;
}

}  // namespace pw
