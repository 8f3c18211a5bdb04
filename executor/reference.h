#pragma once
/// The correctness reference: the same model trained unpipelined on one rank (all layers, no
/// tensor parallelism, every microbatch of the global batch in order), and the comparison of a
/// rank's gradients with it.
#include <cstdint>
#include <string>
#include <vector>

#include "executor/model.h"

namespace pw::exec {

/// Gradients of the whole model after one iteration over `total_microbatches` microbatches, flat
/// in reference_offset() order, and the loss summed over microbatches in order.
struct ReferenceResult {
  std::vector<double> grads;
  double loss = 0;
};
/// `dims.tp` and `dims.ep` are ignored (treated as 1: every expert on the one rank).
ReferenceResult run_reference(ModelDims dims, int total_microbatches);

/// Offsets of every tensor in the flat reference vector: embedding (2), layers 0..L-1 (13 each),
/// head; index with reference_tensor_index(). The last entry is the total size.
std::vector<std::int64_t> reference_offsets(const ModelDims& dims);
int reference_tensor_index(const ModelDims& dims, int layer, int id);

/// Worst relative error of one rank's tensors against the reference.
struct GradCompare {
  double max_rel_error = 0;  ///< max over tensors of max|g - ref| / max|ref| (ref slice)
  std::string worst_tensor;
  std::int64_t tensors = 0;  ///< non-empty tensors compared
};
GradCompare compare_grads(const ModelDims& dims, int tp_rank, int ep_rank,
                          const std::vector<Tensor>& tensors, const std::vector<double>& reference);

}  // namespace pw::exec
