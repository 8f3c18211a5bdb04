#include "core/schedule.h"

#include <algorithm>
#include <array>

#include "core/error.h"

namespace pw {
int even_split_begin(int s, int num_stages, int num_layers) {
  return static_cast<int>(static_cast<long long>(s) * num_layers / num_stages);
}

void assign_stage_layers(const std::vector<int>& layers, Placement* pl) {
  const int per = static_cast<int>(layers.size());
  PW_ASSERT(pl->num_pipelines() == 1 && pl->stages_per_pipeline() == per,
            "a layer split names every stage of one pipeline");
  std::vector<int> begin(per + 1, 0);
  for (int i = 0; i < per; ++i) begin[i + 1] = begin[i] + layers[i];
  for (StageInfo& st : pl->stages) {
    st.layer_begin = begin[st.index];
    st.layer_end = begin[st.index + 1];
  }
}

namespace {

constexpr std::array<std::string_view, kNumActionKinds> kKindNames = {
    "F",      "B",           "W",           "BW",      "R",       "SEND_F",      "RECV_F", "SEND_B",
    "RECV_B", "OVERLAP_F_B", "REDUCE_GRAD", "UNSHARD", "RESHARD", "PAIR_REDUCE", "OPT"};

Placement make_placement(PlacementKind kind, int p, int num_stages, int num_layers) {
  PW_ASSERT(p > 0 && num_stages > 0, "placement needs positive sizes");
  Placement pl;
  pl.kind = kind;
  pl.num_devices = p;
  pl.num_layers = num_layers > 0 ? num_layers : num_stages;
  pl.stages.resize(num_stages);
  for (int s = 0; s < num_stages; ++s) {
    StageInfo& st = pl.stages[s];
    st.layer_begin = even_split_begin(s, num_stages, pl.num_layers);
    st.layer_end = even_split_begin(s + 1, num_stages, pl.num_layers);
    st.index = s;
    st.pipeline = 0;
  }
  return pl;
}

}  // namespace

std::string_view action_kind_name(ActionKind k) { return kKindNames[static_cast<int>(k)]; }

bool parse_action_kind(std::string_view name, ActionKind* out) {
  for (int i = 0; i < kNumActionKinds; ++i) {
    if (kKindNames[i] == name) {
      *out = static_cast<ActionKind>(i);
      return true;
    }
  }
  return false;
}

std::string_view placement_kind_name(PlacementKind k) {
  switch (k) {
    case PlacementKind::kLinear:
      return "linear";
    case PlacementKind::kLoop:
      return "loop";
    case PlacementKind::kV:
      return "v";
    case PlacementKind::kExplicit:
      return "explicit";
  }
  return "explicit";
}

int Placement::num_pipelines() const {
  int n = 0;
  for (const StageInfo& s : stages) n = std::max(n, s.pipeline + 1);
  return n;
}

int Placement::stages_per_pipeline() const {
  int np = num_pipelines();
  return np == 0 ? 0 : num_stages() / np;
}

int Placement::next_stage(int stage) const {
  const StageInfo& st = stages[stage];
  // Stages of a pipeline are usually consecutive ids; fall back to a search otherwise.
  if (stage + 1 < num_stages() && stages[stage + 1].pipeline == st.pipeline &&
      stages[stage + 1].index == st.index + 1)
    return stage + 1;
  for (int s = 0; s < num_stages(); ++s)
    if (stages[s].pipeline == st.pipeline && stages[s].index == st.index + 1) return s;
  return -1;
}

int Placement::prev_stage(int stage) const {
  const StageInfo& st = stages[stage];
  if (st.index == 0) return -1;
  if (stage > 0 && stages[stage - 1].pipeline == st.pipeline &&
      stages[stage - 1].index == st.index - 1)
    return stage - 1;
  for (int s = 0; s < num_stages(); ++s)
    if (stages[s].pipeline == st.pipeline && stages[s].index == st.index - 1) return s;
  return -1;
}

double Placement::activation_weight(int stage) const {
  const StageInfo& st = stages[stage];
  if (num_layers <= 0 || num_devices <= 0) return 1.0;
  return static_cast<double>(st.layer_end - st.layer_begin) * num_devices / num_layers;
}

Placement linear_placement(int p, int num_layers) {
  Placement pl = make_placement(PlacementKind::kLinear, p, p, num_layers);
  for (int s = 0; s < p; ++s) pl.stages[s].device = s;
  return pl;
}

Placement loop_placement(int p, int v, int num_layers) {
  Placement pl = make_placement(PlacementKind::kLoop, p, p * v, num_layers);
  for (int s = 0; s < p * v; ++s) pl.stages[s].device = s % p;
  return pl;
}

Placement v_placement(int p, int num_layers) {
  Placement pl = make_placement(PlacementKind::kV, p, 2 * p, num_layers);
  for (int s = 0; s < 2 * p; ++s) pl.stages[s].device = s < p ? s : 2 * p - 1 - s;
  return pl;
}

bool Schedule::split_backward() const {
  for (const auto& dev : actions)
    for (const Action& a : dev)
      if (a.kind == ActionKind::kW) return true;
  return false;
}

std::size_t Schedule::total_actions() const {
  std::size_t n = 0;
  for (const auto& dev : actions) n += dev.size();
  return n;
}

}  // namespace pw
