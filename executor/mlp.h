#pragma once
/// The MLP activations the executor's layers share (the dense MLP, every expert and the shared
/// expert): GELU (tanh form, as Megatron) or gated SwiGLU, and their backward.
#include "executor/model.h"

namespace pw::exec {

/// gelu(u), or silu(gate) * up with u = [gate | up] (SwiGLU).
Mat mlp_activation(const Mat& u, bool swiglu);
/// The gradient of mlp_activation's input from its output's gradient `dg`.
Mat mlp_activation_backward(const Mat& u, const Mat& dg, bool swiglu);

}  // namespace pw::exec
