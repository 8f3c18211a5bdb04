#pragma once
/// `--costs KEY=VALUE,...`, the fixed pass costs of `simulate --schedule` and `compare`: one
/// reader for both. Keys F, B, W, R (or f, b, w, r) and comm, and where allowed mw (the share of a
/// microbatch's activations held from B until W); blanks are ignored; a key left out keeps its
/// default (F = B = W = 1, R = comm = 0).
#include <optional>
#include <string>

namespace pw::tools {

struct PassCostSyntax {
  /// Values are durations: a number with an optional unit ps, ns, us, ms or s (default ms), at
  /// most 1000 s, returned in ms. Otherwise plain non-negative numbers (at most 1e9), in the
  /// unit the caller reports.
  bool durations = false;
  bool mw = false;  ///< the mw=SHARE key (a share in [0, 1]) is allowed
};

struct PassCostSpec {
  double f = 1, b = 1, w = 1, r = 0, comm = 0;
  std::optional<double> mw;
};

/// Throws ConfigError naming --costs: an item without '=', an unknown key (with the nearest
/// valid one), a value that is not a number (or duration) in range.
PassCostSpec parse_pass_costs(const std::string& text, const PassCostSyntax& syntax);

}  // namespace pw::tools
