// The search's layer splits: an even share with trimmed ends, and the split each
// SearchConfig::end_trim code names (declared in planner/search/search_space.h).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "planner/search/search_space.h"

namespace pw {

bool split_layers(int layers, int stages, int trim, std::vector<int>* out) {
  return split_layers(layers, stages, trim, trim, out);
}

bool split_layers(int layers, int stages, int trim_first, int trim_last, std::vector<int>* out) {
  out->assign(stages, 0);
  if (stages <= 0 || layers < stages) return false;
  // Trims count from an even share rounded up, as published layouts trim (Llama 3 405B's 126
  // layers over 16 stages: 7 on each end, 8 elsewhere).
  const int q = (layers + stages - 1) / stages;
  const int lo = trim_first > 0 ? 1 : 0, hi = trim_last > 0 ? 1 : 0;
  const int first = lo ? q - trim_first : 0, last = hi ? q - trim_last : 0;
  if ((lo && first < 1) || (hi && last < 1)) return false;
  const int mids = stages - lo - hi;
  if (mids < 1) return false;
  const int rest = layers - first - last;
  const int mq = rest / mids, mr = rest % mids;
  if (mq < 1) return false;
  for (int i = 0; i < mids; ++i) (*out)[lo + i] = mq + (i < mr ? 1 : 0);
  if (lo) (*out)[0] = first;
  if (hi) (*out)[stages - 1] = last;
  return true;
}

bool split_for_trim_code(int layers, int stages, std::uint8_t code, std::vector<int>* out) {
  if (!is_mtp_standalone_code(code))
    return split_layers(layers, stages, first_trim(code), last_trim(code), out);
  const int trim = first_trim(code), depth_trim = last_trim(code);
  const int before = stages - 1;  // the stages before the loss's
  out->assign(std::max(stages, 0), 0);
  if (before < 1 || layers < before) return false;
  if (before == 1) {
    if (trim != 0 || depth_trim != 0) return false;
    (*out)[0] = layers;
    return true;
  }
  std::vector<int> head;
  const int q = (layers + before - 1) / before;
  const bool ok = depth_trim >= q ? split_layers(layers, before - 1, trim, 0, &head)
                                  : split_layers(layers, before, trim, depth_trim, &head);
  if (!ok) return false;
  std::copy(head.begin(), head.end(), out->begin());
  return true;
}

}  // namespace pw
