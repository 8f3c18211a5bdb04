#include "hwmodels/link.h"

namespace pw::hw {
namespace {
constexpr const char* kLinkNames[] = {"nvlink",     "nvswitch", "pcie",
                                      "infiniband", "roce",     "ethernet"};
}  // namespace

const char* link_type_name(LinkType t) { return kLinkNames[static_cast<int>(t)]; }

std::vector<std::string> link_type_names() {
  return std::vector<std::string>(std::begin(kLinkNames), std::end(kLinkNames));
}

bool parse_link_type(const std::string& name, LinkType* out) {
  for (int i = 0; i < 6; ++i) {
    if (name == kLinkNames[i]) {
      *out = static_cast<LinkType>(i);
      return true;
    }
  }
  return false;
}

const char* fabric_kind_name(FabricKind k) {
  return k == FabricKind::kFatTree ? "fat-tree" : "rail-optimized";
}

}  // namespace pw::hw
