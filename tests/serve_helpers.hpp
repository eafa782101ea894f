#pragma once
// What the serving tests share: the serving references' folder and a temporary file writer.
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace bneck::test {

inline const std::string kServe = std::string(BNECK_SOURCE_DIR) + "/validate/reference/h200/serving/";

// `text` in a temporary file of this process named after `name` (kept as given: extensions matter).
inline std::string write_tmp(const std::string& name, const std::string& text) {
  std::filesystem::path p = std::filesystem::temp_directory_path() / ("bneck_serve_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

}  // namespace bneck::test
