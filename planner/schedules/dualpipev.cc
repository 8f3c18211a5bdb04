// DualPipeV (DeepSeek-V3's DualPipe folded into a V): rank r holds chunk 0 = stage r and chunk 1 =
// stage 2p-1-r. Eight phases per rank (counts from the published schedule): forwards of chunk 0,
// paired forwards, zero-bubble warm backwards of chunk 1, the steady state in which the forward
// of one chunk is overlapped with the backward of the other (OVERLAP_F_B, cost
// UniformCosts::overlap), then the drain in which the second half of the backwards is split into
// B and W so the weight passes fill the tail. Needs m >= 2p.
#include <fmt/format.h>

#include <deque>

#include "core/error.h"
#include "planner/schedules/memory_family.h"

namespace pw {
namespace {

class RankBuilder {
 public:
  RankBuilder(int p, int r, std::vector<Action>& out) : c0_(r), c1_(2 * p - 1 - r), out_(out) {}

  void f(int chunk) { out_.push_back(Action{ActionKind::kF, st(chunk), next_f_[chunk]++}); }
  // Backward of `chunk`; split into B now and W later when `zb`.
  void b(int chunk, bool zb) {
    const int mb = next_b_[chunk]++;
    if (!zb) {
      out_.push_back(Action{ActionKind::kBW, st(chunk), mb});
      return;
    }
    out_.push_back(Action{ActionKind::kB, st(chunk), mb});
    pending_w_.push_back(Action{ActionKind::kW, st(chunk), mb});
  }
  void w() {
    out_.push_back(pending_w_.front());
    pending_w_.pop_front();
  }
  // Forward of chunk `fc` overlapped with the full backward of chunk `bc`.
  void overlap(int fc, int bc) {
    Action a{ActionKind::kOverlapFB, st(fc), next_f_[fc]++};
    a.stage2 = st(bc);
    a.microbatch2 = next_b_[bc]++;
    out_.push_back(a);
  }

 private:
  std::int16_t st(int chunk) const { return static_cast<std::int16_t>(chunk == 0 ? c0_ : c1_); }
  int c0_, c1_;
  int next_f_[2] = {0, 0};
  int next_b_[2] = {0, 0};
  std::deque<Action> pending_w_;
  std::vector<Action>& out_;
};

void build_rank(int p, int m, int r, std::vector<Action>& out) {
  RankBuilder k(p, r, out);
  for (int i = 0; i < 2 * (p - r - 1); ++i) k.f(0);
  for (int i = 0; i < r + 1; ++i) k.f(0), k.f(1);
  for (int i = 0; i < p - r - 1; ++i) k.b(1, true), k.w(), k.f(1);
  for (int i = 0; i < m - 2 * p + r + 1; ++i) {
    if (i == 0 && r == p - 1) {
      k.f(0);
      k.b(1, false);
    } else {
      k.overlap(0, 1);
    }
    k.overlap(1, 0);
  }
  for (int i = 0; i < p - r - 1; ++i) k.b(1, false), k.overlap(1, 0);
  bool zb = false;
  const int tail = r + 1;
  for (int i = 0; i < tail; ++i) {
    if (i == tail / 2 && r % 2 == 1) zb = true;
    k.b(1, zb);
    if (i == tail / 2 && r % 2 == 0) zb = true;
    k.b(0, zb);
  }
  for (int i = 0; i < p - r - 1; ++i) k.w(), k.b(0, true);
  for (int i = 0; i < r + 1; ++i) k.w();
}

}  // namespace

Schedule generate_dualpipev(const GeneratorParams& gp) {
  if (gp.p < 2) throw ConfigError("", "--pp", "dualpipev needs at least 2 pipeline devices");
  if (gp.m < 2 * gp.p)
    throw ConfigError("", "--microbatches",
                      fmt::format("dualpipev needs m >= 2p = {}, got {}", 2 * gp.p, gp.m));
  Schedule s;
  s.name = "dualpipev";
  s.placement = v_placement(gp.p, gp.num_layers);
  s.num_microbatches = gp.m;
  s.actions.resize(gp.p);
  for (int r = 0; r < gp.p; ++r) build_rank(gp.p, gp.m, r, s.actions[r]);
  return s;
}

}  // namespace pw
