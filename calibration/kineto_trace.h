#pragma once
/// Calibration from a PyTorch profiler (Kineto) Chrome trace of a training step
/// (`pipewright calibrate --from-trace TRACE.json --base PROFILE`): the trace's GPU kernels become
/// the raw measurements the CUDA calibration would have taken, and the usual fit writes the
/// profile.
///
/// What is read (the profile must record shapes: `torch.profiler.profile(activities=[CPU, CUDA],
/// record_shapes=True)`, then `prof.export_chrome_trace(path)`):
/// - kernels: events with "ph": "X" and "cat": "kernel" (name, "dur" in microseconds, args
///   "External id");
/// - the CPU op that launched each kernel: "cat": "cpu_op" with the same "External id", its
///   "Input Dims" and "Input type";
/// - GEMMs: kernels of aten::mm, aten::addmm, aten::bmm, aten::baddbmm ([m,k] x [k,n], with
///   batch for bmm): one sample per shape and dtype (median over repeats);
/// - element-wise kernels: aten::add, sub, mul, div, gelu, silu, relu, sigmoid, tanh, neg, copy_
///   and their in-place and backward forms: bytes = every input's elements plus the output's
///   (the largest input's) times the element size;
/// - NCCL kernels ("nccl..." names) launched by record_param_comms, whose args give "Collective
///   name", "In msg nelems", "Out msg nelems", "dtype" and "Group size": one sample per
///   (collective, group size, bytes), nccl-tests' size convention.
/// - fused attention: the kernels of aten::_scaled_dot_product_{flash,efficient,cudnn}_attention,
///   aten::_flash_attention_{forward,backward}, aten::_efficient_attention_{forward,backward} and
///   aten::_cudnn_attention_{forward,backward} (what PyTorch 2.11 runs SDPA with on an H100)
///   (and their backwards): one call = its kernels' summed time; query and key shapes from
///   "Input Dims", the causal flag from "Concrete Inputs"; one sample per (pass, dtype, shape,
///   causal), median over calls. Variable-length calls and calls without "Concrete Inputs"
///   (PyTorch before 2.1) are skipped.
/// Kernels of other ops are counted and skipped. Provenance: device, SM count, peaks, memory and
/// HBM bandwidth come from the base profile (the trace does not carry them).
#include <string>

#include "calibration/raw_results.h"
#include "hwmodels/profile.h"

namespace pw::calibration {

struct KinetoSummary {
  int kernels = 0;  ///< GPU kernel events read
  int gemm = 0, elementwise = 0, nccl = 0;
  int attention = 0;  ///< kernels of fused attention calls
  int skipped = 0;    ///< kernels of ops that are none of these, or without recorded shapes
};

/// Reads a Kineto Chrome trace into raw measurements. Throws ConfigError(file, key, ...) when it
/// is not a Chrome trace (no traceEvents array), holds no kernel events, or records no shapes
/// (key "record_shapes": the profiler option to turn on).
RawResults raw_from_kineto(const std::string& text, const std::string& file,
                           const hw::HardwareProfile& base, KinetoSummary* summary = nullptr);

}  // namespace pw::calibration
