#pragma once
/// Schedule generators and their registry. A generator turns (p, m, chunks, costs, memory limit)
/// into a validated Schedule, or throws ConfigError saying which constraint is not met.
/// Registration is explicit (no static self-registration): default_registry() calls each
/// family's register_* function.
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/cost_table.h"
#include "core/schedule.h"

namespace pw {

/// Results that generators share between calls differing only in what those results do not
/// depend on (the adaptive V-shape trade-off curve is the same for every memory limit). The
/// caller owns it and passes it explicitly (GeneratorParams::memo): the search keeps one per
/// run. Thread-safe. A generator gives the same schedule with or without one (every memoised
/// value is a pure function of its key); two threads asking a new key at once may both compute
/// it, and the first stored value is the one kept.
class GeneratorMemo {
 public:
  /// The value stored under `key`, computed by `make()` (returning T) when absent.
  template <class T, class Make>
  std::shared_ptr<const T> get(const std::string& key, Make&& make) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto it = values_.find(key);
      if (it != values_.end()) return std::static_pointer_cast<const T>(it->second);
    }
    auto value = std::make_shared<const T>(make());
    std::lock_guard<std::mutex> lock(mu_);
    const auto [it, fresh] = values_.try_emplace(key, value);
    return fresh ? value : std::static_pointer_cast<const T>(it->second);
  }
  /// Values stored so far.
  std::size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return values_.size();
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const void>> values_;
};

/// Inputs shared by all generators. Times are picoseconds; memory in microbatch activations of
/// one 1F1B stage (a V-shape chunk's activation is 0.5).
struct GeneratorParams {
  int p = 1;                          ///< pipeline devices
  int m = 1;                          ///< microbatches per iteration
  int v = 0;                          ///< chunks (stages) per device; 0 = the generator's default
  int num_layers = 0;                 ///< layers of the model (0 = one per stage)
  UniformCosts costs{1, 1, 1, 0, 0};  ///< per-stage pass costs, for cost-aware generators
  /// Optional real per-stage costs (overrides `costs` in cost-aware generators when non-null).
  const CostTable* stage_costs = nullptr;
  double memory_limit = 0;  ///< activation limit per device; <= 0 means none
  /// Optional per-device limits (size p, same units) for the generators that keep each device
  /// to its own (GeneratorCaps::per_device_limits: zb-1p, zb-2p, zb-v, v-zb); set, they replace
  /// memory_limit there (which then holds their smallest, for the others).
  std::vector<double> memory_caps;
  int group_size = 0;             ///< interleaved 1F1B group size g (0 = p); zeropp: microbatches
                                  ///< per weight-gather block (0 = m)
  GeneratorMemo* memo = nullptr;  ///< optional: shares memory-independent work between calls
};

using GenerateFn = Schedule (*)(const GeneratorParams&);

/// What the search needs to know about a generator's output, declared with it in its registry
/// entry (not probed by running it). tests/planner/capabilities_test.cc checks every declaration
/// against the generator's output.
struct GeneratorCaps {
  int chunks = 1;                 ///< stages per device per pipeline (at the default v)
  int pipelines = 1;              ///< model replicas in the pipeline (BitPipe: 2)
  bool v_shape = false;           ///< stage i and 2p-1-i on device i
  bool split_backward = false;    ///< B and W are separate actions
  bool takes_v = false;           ///< honours GeneratorParams::v (chunks per device)
  bool takes_group_size = false;  ///< honours GeneratorParams::group_size
  bool memory_aware = false;      ///< reads GeneratorParams::memory_limit
  /// Reads the pass costs (GeneratorParams::costs, stage_costs, the W share of memory): its
  /// order depends on them. Generators that do not get one schedule per (p, m, v) in the search.
  bool reads_costs = false;
  bool explicit_recompute = false;      ///< has R actions (full recomputation only)
  bool overlap = false;                 ///< has OVERLAP_F_B actions
  bool holds_all_microbatches = false;  ///< runs every forward before any backward (GPipe)
  /// Largest pipeline size the search asks of it (0 = any): the building-block and offset
  /// searches take seconds per schedule beyond 16 devices.
  int max_devices = 0;
  /// Memory-aware generators: the activation memory its schedule is defined with on p devices
  /// (1F1B-stage units per device; ZB-1p p, ZB-2p 2p), which it keeps to without a limit. The
  /// search passes a limit only below it: with that much free the generator runs as defined.
  double (*own_budget)(int p) = nullptr;
  /// Multi-pipeline generators (pipelines > 1): the placement they generate for p devices and
  /// L layers, from which the search reads the devices that hold each stage.
  Placement (*placement)(int p, int num_layers) = nullptr;
  /// Honours GeneratorParams::memory_caps (a limit per device).
  bool per_device_limits = false;
};

struct GeneratorInfo {
  std::string name;         ///< CLI name, e.g. "1f1b"
  std::string description;  ///< one line for --help and error messages
  GenerateFn generate = nullptr;
  GeneratorCaps caps;
};

class GeneratorRegistry {
 public:
  void add(GeneratorInfo info);
  /// Returns the generator or nullptr.
  const GeneratorInfo* find(const std::string& name) const;
  /// Throws ConfigError(key=`key`) listing valid names and the nearest one.
  const GeneratorInfo& get(const std::string& name, const std::string& key = "--schedule") const;
  std::vector<std::string> names() const;
  const std::vector<GeneratorInfo>& all() const { return infos_; }

 private:
  std::vector<GeneratorInfo> infos_;
};

/// GPipe, 1F1B, interleaved 1F1B, ZB-H1, ZB-H2, looped breadth-first.
void register_classic_generators(GeneratorRegistry& registry);

/// The zero-bubble paper's handcrafted schedules on p devices, named `name`: ZB-H1 (`h2` false,
/// 1F1B's memory) or ZB-H2 (twice it). ZB-1p and ZB-2p weigh them beside their greedy runs.
Schedule zero_bubble_handcrafted(const char* name, const GeneratorParams& gp, bool h2);

/// Memory-controllable and zero-bubble family: V-Min, V-Half, V-ZB, adaptive offsets, ZB-1p/2p,
/// ZB-V, BitPipe, DualPipeV, ZeroPP-style interleaving, 1F1B-R.
void register_memory_generators(GeneratorRegistry& registry);

/// Every generator pipewright ships.
GeneratorRegistry default_registry();

/// The microbatch group size g of Megatron's interleaved order (its
/// `microbatch_group_size_per_vp_stage`: p <= g <= m, m mod g zero or at least p) that `s` is
/// (each g gives another order); 0 when `s` is no interleaved order of its devices, chunks and
/// microbatches for any g.
int interleaved_group_of(const Schedule& s);

/// Runs a generator and validates its output (throws ConfigError on either failure).
Schedule generate_schedule(const GeneratorRegistry& registry, const std::string& name,
                           const GeneratorParams& params);

/// Runs a generator without validating its output, for callers that build an Evaluator of it
/// at once (its construction validates the schedule by the same rules: generation_source(name)
/// names it in the message as generate_schedule does).
Schedule generate_unvalidated(const GeneratorRegistry& registry, const std::string& name,
                              const GeneratorParams& params);
std::string generation_source(const std::string& name);

}  // namespace pw
