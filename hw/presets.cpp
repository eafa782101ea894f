// The preset table: the GPU specs compiled into the binary (hw/presets, hw/calibrated), the ones a
// user installed (`bneck hw install`), and which of them a trace's device name matches.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hw/spec.hpp"
#include "sim/base/strings.hpp"

namespace bneck {

// Generated from the preset files (hw/CMakeLists.txt).
extern const std::map<std::string, const char*>& embedded_hw_presets();
std::vector<std::string> hw_preset_names() {
  std::vector<std::string> out;
  for (auto& [k, v] : embedded_hw_presets()) out.push_back(k);
  return out;
}

const char* hw_preset_text(const std::string& name) {
  auto& m = embedded_hw_presets();
  auto it = m.find(name);
  return it == m.end() ? nullptr : it->second;
}

std::string user_hw_dir() {
  if (const char* d = std::getenv("BNECK_HW_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) return std::string(x) + "/bneck/hw";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.local/share/bneck/hw";
  return "";
}

std::vector<std::string> installed_hw_names() {
  std::vector<std::string> out;
  const std::string dir = user_hw_dir();
  std::error_code ec;
  if (dir.empty() || !std::filesystem::is_directory(dir, ec)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const auto& p = e.path();
    if (p.extension() == ".json" && e.is_regular_file(ec)) out.push_back(p.stem().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string installed_hw_path(const std::string& name) {
  const std::string dir = user_hw_dir();
  if (dir.empty() || name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") return "";
  std::string p = dir + "/" + name + ".json";
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec) ? p : "";
}

namespace {
// `t` in the lowercased name `n` as its own token (not inside "a100" for "a10", "l40s" for "l4").
bool has_token(const std::string& n, const std::string& t) {
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  for (std::size_t at = n.find(t); !t.empty() && at != std::string::npos; at = n.find(t, at + 1))
    if ((at == 0 || !alnum(n[at - 1]) || !alnum(t.front())) && (at + t.size() == n.size() || !alnum(n[at + t.size()]) || !alnum(t.back())))
      return true;
  return false;
}

std::string lowercase(const std::string& x) { return ascii_lower(x); }

// A spec's own `match` terms (not inherited), lowercased; empty when it has none.
std::vector<std::string> match_terms(const std::string& text) {
  std::vector<std::string> out;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("match") || !j["match"].is_array()) return out;
  for (const auto& t : j["match"]) {
    if (!t.is_string()) return {};
    out.push_back(lowercase(t.get<std::string>()));
  }
  return out;
}
std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
// The embedded presets' own `match` terms, read once a process. A text without the key's name
// holds no `match` (the calibrated overlays, 1.3 MB of GEMM surfaces that JSON parsing took 12 ms
// of a 0.28 s replay to find nothing in).
const std::vector<std::pair<std::string, std::vector<std::string>>>& embedded_match_terms() {
  static const auto terms = [] {
    std::vector<std::pair<std::string, std::vector<std::string>>> out;
    for (const auto& [name, text] : embedded_hw_presets())
      if (std::string_view(text).find("\"match\"") != std::string_view::npos) out.emplace_back(name, match_terms(text));
    return out;
  }();
  return terms;
}
}  // namespace

std::string preset_for_device_name(const std::string& device_name) {
  const std::string n = lowercase(device_name);
  std::string best;
  std::size_t best_terms = 0;
  for (const auto& [name, terms] : embedded_match_terms()) {
    // A preset's own `match` (not inherited through `extends`), each term a token; the most specific match wins.
    bool all = !terms.empty();
    for (const auto& t : terms) all = all && has_token(n, t);
    if (all && terms.size() > best_terms) {
      best = name;
      best_terms = terms.size();
    }
  }
  return best;
}

std::string preset_for_device(const std::string& device_name) {
  std::string p = preset_for_device_name(device_name);
  // A calibrated overlay of that preset wins: an installed one (the user's own GPU, `bneck hw
  // install`), then the project's (hw/calibrated/).
  if (!p.empty() && !installed_hw_path(p + "-calibrated").empty()) return p + "-calibrated";
  if (!p.empty() && hw_preset_text(p + "-calibrated")) return p + "-calibrated";
  if (!p.empty()) return p;
  // A GPU with no preset: an installed spec whose own `match` terms all occur in its name (the
  // validate target writes one from the device's properties).
  const std::string lower = lowercase(device_name);
  std::size_t best_terms = 0;
  for (const auto& name : installed_hw_names()) {
    auto terms = match_terms(file_text(installed_hw_path(name)));
    bool all = !terms.empty();
    for (const auto& t : terms) all = all && lower.find(t) != std::string::npos;
    if (all && terms.size() > best_terms) {
      p = name;
      best_terms = terms.size();
    }
  }
  if (!p.empty() && !installed_hw_path(p + "-calibrated").empty()) return p + "-calibrated";
  return p;
}

}  // namespace bneck
