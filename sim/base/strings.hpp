// Interned strings: ops refer to names by a 32-bit id.
#pragma once
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace bneck {

// `s` in ASCII lower case (names of kernels, devices, dtypes: matched case-blind).
inline std::string ascii_lower(std::string_view s) {
  std::string l(s);
  for (char& c : l)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return l;
}

using StrId = std::uint32_t;

class StringTable {
 public:
  StringTable() { intern(""); }
  StringTable(const StringTable& o) {
    for (const auto& s : o.strings_) intern(s);
  }
  StringTable& operator=(const StringTable& o) {
    if (this != &o) {
      strings_.clear();
      index_.clear();
      for (const auto& s : o.strings_) intern(s);
    }
    return *this;
  }
  StringTable(StringTable&&) noexcept = default;
  StringTable& operator=(StringTable&&) noexcept = default;

  StrId intern(std::string_view s) {
    auto it = index_.find(s);
    if (it != index_.end()) return it->second;
    strings_.emplace_back(s);
    auto id = static_cast<StrId>(strings_.size() - 1);
    index_.emplace(std::string_view(strings_.back()), id);
    return id;
  }
  const std::string& str(StrId id) const { return strings_.at(id); }
  std::size_t size() const { return strings_.size(); }

 private:
  std::deque<std::string> strings_;  // deque: stable addresses for the string_view keys
  std::unordered_map<std::string_view, StrId> index_;
};

}  // namespace bneck
