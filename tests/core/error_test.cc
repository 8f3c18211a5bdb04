#include "core/error.h"

#include <gtest/gtest.h>

namespace pw {

TEST(ConfigError, WhatJoinsFileKeyAndMessage) {
  ConfigError e("a.yaml", "model.hidden_size", "expected a positive integer");
  EXPECT_STREQ(e.what(), "a.yaml: model.hidden_size: expected a positive integer");
}

TEST(NearestName, SuggestsClosestSpelling) {
  EXPECT_EQ(nearest_name("1fb1", {"gpipe", "1f1b", "zb-h1"}), "1f1b");
}

}  // namespace pw
