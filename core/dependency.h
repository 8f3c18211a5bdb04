#pragma once
/// The dependency graph of a schedule: every action's prerequisites as flat arrays, and one
/// topological order that respects each device's sequence. Built once per schedule (O(actions));
/// the validator and the evaluators share it, so there is one definition of legality.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/schedule.h"

namespace pw {

/// Actions are numbered device-major: device d's k-th action has id device_begin[d] + k.
struct DependencyGraph {
  std::vector<std::int32_t> device_begin;  ///< size num_devices + 1
  std::vector<Action> action;              ///< flattened actions
  std::vector<std::int32_t> device_of;     ///< device of each action
  /// Prerequisites of action a: dep[dep_begin[a] .. dep_begin[a+1]).
  std::vector<std::int32_t> dep_begin;
  std::vector<std::int32_t> dep;
  /// For each prerequisite: the sender stage whose hop cost applies (the data crosses devices),
  /// or -1 when it does not cross devices (same device, or an explicit RECV already paid it).
  std::vector<std::int16_t> dep_hop;
  /// A topological order of all action ids consistent with every device's list.
  std::vector<std::int32_t> order;

  std::size_t size() const { return action.size(); }
};

/// Builds the graph after checking structure and coverage; throws ConfigError naming the device,
/// the action's position and the broken rule (or, for a deadlock, what each stuck device waits
/// for). `source` (a file name, may be empty) prefixes messages.
DependencyGraph build_dependency_graph(const Schedule& schedule, const std::string& source = "");

/// Names an action for error messages by its device and position in that device's list, e.g.
/// "line 2, cell 5" for a CSV file. Called only while reporting an error.
using ActionLocator = std::function<std::string(int device, int position)>;

/// As above; every action named in an error message is prefixed by `locate(device, position)`.
DependencyGraph build_dependency_graph(const Schedule& schedule, const std::string& source,
                                       const ActionLocator& locate);

/// Human-readable action, e.g. "B stage 2 mb 5".
std::string describe_action(const Action& a);

}  // namespace pw
