#pragma once
/// hwmodels reads the project's one rank layout (core/rank_layout.h) under its own namespace.
#include "core/rank_layout.h"

namespace pw::hw {
using pw::make_rank_layout;
using pw::rank_layout_of;
using pw::RankLayout;
}  // namespace pw::hw
