#pragma once
/// Import and export of PyTorch's pipelining schedule CSV (torch.distributed.pipelining): one row
/// per rank, one action per cell, an empty cell being an idle slot. Tokens use the global stage
/// index: `0F1` forward, `1I0` backward for inputs, `2W3` backward for weights, `3B0` full
/// backward, `1SEND_F0`, `2RECV_F0`, `1SEND_B3`, `2RECV_B3`, `0UNSHARD`, `0RESHARD`,
/// `0REDUCE_GRAD` and the overlapped pair `(0F1;1B0)OVERLAP_F_B`. "compute_only" holds compute
/// (communication is inserted by the runtime); "compute_comms" holds SEND/RECV too.
#include <cstdint>
#include <string>

#include "core/schedule.h"

namespace pw {

enum class CsvForm : std::uint8_t { kComputeOnly, kComputeComms };

/// Parses "compute_only" or "compute_comms"; returns false otherwise.
bool parse_csv_form(const std::string& name, CsvForm* out);

struct CsvImportOptions {
  /// Stage-to-rank map: "auto" (loop if it fits, else v), "loop" (s -> s mod p) or "v"
  /// (0..p-1, p-1..0; 2p stages).
  std::string stage_map = "auto";
  int num_layers = 0;                ///< layers of the model (0 = one per stage)
  std::string name = "pytorch-csv";  ///< Schedule::name of the result
};

/// Reads a CSV schedule and validates it. Ranks = rows; stages = largest stage index + 1;
/// microbatches = largest microbatch + 1. Throws ConfigError(source, "line L, cell C", ...) for
/// an unknown token or a stage on the wrong rank, and names the line and cell of the action at
/// fault when the order is impossible (a deadlock or a broken dependency).
Schedule schedule_from_pytorch_csv(const std::string& text, const std::string& source,
                                   const CsvImportOptions& options = {});
Schedule load_pytorch_csv(const std::string& path, const CsvImportOptions& options = {});

/// Writes the schedule as CSV. kComputeOnly (what PyTorch's `_load_csv` and torchtitan's
/// `pipeline_parallel_schedule_csv` read by default) holds compute alone (F, I, W, B,
/// OVERLAP_F_B), lined up in time slots (every compute action one slot, dependencies respected,
/// empty cells where a rank waits), as PyTorch's own tables do; PyTorch refuses other tokens there
/// and inserts SEND/RECV, UNSHARD/RESHARD and REDUCE_GRAD itself. kComputeComms lowers the
/// communication (lower_communication), writes each rank's actions back to back, and gives each
/// stage that lacks one a REDUCE_GRAD after its last W or B (PyTorch's rule; the runtime scales
/// gradients by 1/M there). OPT (the training loop's optimizer step, not part of PyTorch's
/// schedule) and R (recomputation, which PyTorch does by activation checkpointing in the module)
/// are left out of both. Throws ConfigError(key "--export-csv") for what the format cannot
/// express: PAIR_REDUCE or more than one pipeline.
std::string schedule_to_pytorch_csv(const Schedule& schedule, CsvForm form);
void save_pytorch_csv(const std::string& path, const Schedule& schedule, CsvForm form);

}  // namespace pw
