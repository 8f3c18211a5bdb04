#include "executor/reference.h"

#include <algorithm>
#include <cmath>

namespace pw::exec {

int reference_tensor_index(const ModelDims& dims, int layer, int id) {
  if (layer == kEmbeddingLayer) return id;
  if (layer == kHeadLayer) return 2 + dims.num_layers * kNumLayerParams;
  return 2 + layer * kNumLayerParams + id;
}

std::vector<std::int64_t> reference_offsets(const ModelDims& dims) {
  std::vector<std::int64_t> off{0};
  auto add = [&](int layer, int id) {
    int r = 0, c = 0;
    full_shape(dims, layer, id, &r, &c);
    off.push_back(off.back() + static_cast<std::int64_t>(r) * c);
  };
  add(kEmbeddingLayer, 0);
  add(kEmbeddingLayer, 1);
  for (int l = 0; l < dims.num_layers; ++l)
    for (int id = 0; id < kNumLayerParams; ++id) add(l, id);
  add(kHeadLayer, 0);
  return off;
}

ReferenceResult run_reference(ModelDims dims, int total_microbatches) {
  dims.tp = 1;
  dims.ep = 1;
  const double scale =
      1.0 / (static_cast<double>(total_microbatches) * static_cast<double>(dims.tokens()));
  StageModel model(dims, 0, dims.num_layers, true, true, 0, total_microbatches, scale, nullptr);
  ReferenceResult res;
  for (int g = 0; g < total_microbatches; ++g) {
    model.forward(g, nullptr, g, true);
    model.backward_input(g, nullptr);
    model.backward_weight(g);
    res.loss += model.loss(g);
  }
  // The reference's tensor order is exactly reference_offsets() order.
  for (const Tensor& t : model.tensors())
    res.grads.insert(res.grads.end(), t.grad.data(), t.grad.data() + t.grad.size());
  return res;
}

GradCompare compare_grads(const ModelDims& dims, int tp_rank, int ep_rank,
                          const std::vector<Tensor>& tensors,
                          const std::vector<double>& reference) {
  const std::vector<std::int64_t> off = reference_offsets(dims);
  GradCompare out;
  for (const Tensor& t : tensors) {
    if (t.grad.size() == 0) continue;  // a tensor this layer does not have (bias, router)
    int full_rows = 0, full_cols = 0;
    full_shape(dims, t.layer, t.id, &full_rows, &full_cols);
    const std::int64_t base = off[reference_tensor_index(dims, t.layer, t.id)];
    double max_diff = 0, max_ref = 0;
    for (Eigen::Index r = 0; r < t.grad.rows(); ++r)
      for (Eigen::Index c = 0; c < t.grad.cols(); ++c) {
        int gr = 0, gc = 0;
        global_coords(dims, t.layer, t.id, tp_rank, ep_rank, static_cast<int>(r),
                      static_cast<int>(c), &gr, &gc);
        const double ref = reference[base + static_cast<std::int64_t>(gr) * full_cols + gc];
        max_diff = std::max(max_diff, std::abs(t.grad(r, c) - ref));
        max_ref = std::max(max_ref, std::abs(ref));
      }
    const double rel = max_ref > 0 ? max_diff / max_ref : max_diff;
    ++out.tensors;
    if (rel > out.max_rel_error || out.worst_tensor.empty()) {
      out.max_rel_error = std::max(out.max_rel_error, rel);
      if (rel >= out.max_rel_error) out.worst_tensor = tensor_name(t.layer, t.id);
    }
  }
  return out;
}

}  // namespace pw::exec
