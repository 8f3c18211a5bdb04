#pragma once
/// Megatron-LM's pipeline layout string (`--pipeline-model-parallel-layout`, its
/// PipelineParallelLayerLayout): the virtual pipeline stages in layer order separated by `|`,
/// each a run of layer letters, E the embedding, t a transformer (decoder) layer, m a multi-token
/// prediction layer, L the loss (output layer); `(X)*n` and `x*n` repeat, commas are cosmetic.
/// "Et*3|(tt|)*29,m|L" is 32 stages: Ettt, 29 of tt, m, L. Stage i runs on pipeline rank i mod p
/// as virtual stage i div p. One reader and one writer of the format.
#include <string>
#include <string_view>
#include <vector>

namespace pw {

/// Unrolls and splits `text` into its stages' letters (layer order). False with `problem` set
/// ("...; expected ...") for a letter other than E, t, m, L, a group without `*n`, a repeat of
/// 0, or more than 1,000,000 letters unrolled.
bool parse_pipeline_layout(std::string_view text, std::vector<std::string>* stages,
                           std::string* problem);

/// The layout string of a model whose stages (layer order) hold `layers` transformer layers,
/// the embedding on the first, the loss on the last and `mtp_layers` multi-token prediction
/// layers with the loss, or after the layers of the stage before it with `mtp_standalone`
/// ("...|t*4m|L"); runs of equal stages between the ends are folded as "(t*4|)*14".
/// parse_pipeline_layout reads it back to the same stages.
std::string pipeline_layout_string(const std::vector<int>& layers, int mtp_layers,
                                   bool mtp_standalone = false);

}  // namespace pw
