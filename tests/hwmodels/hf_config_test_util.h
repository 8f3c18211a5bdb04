#pragma once
// Shared by the hwmodels tests that read Hugging Face config.json text: a parse that must fail
// with a ConfigError naming the file ("c/config.json") and `key`.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "hwmodels/hf_config.h"

namespace pw::hw::testing {

inline void expect_hf_config_error(const std::string& text, const std::string& key) {
  try {
    parse_hf_config(text, "c/config.json");
    ADD_FAILURE() << "no error for " << key;
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.file(), "c/config.json");
    EXPECT_EQ(e.key(), key) << e.what();
  }
}

}  // namespace pw::hw::testing
