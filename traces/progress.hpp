// Progress on stderr for long imports: silent for the first second, then one line per phase.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>

namespace bneck {

class Progress {
 public:
  explicit Progress(std::string what, bool enabled = true)
      : what_(std::move(what)), enabled_(enabled), t0_(std::chrono::steady_clock::now()) {}
  void phase(const std::string& name, std::uint64_t rows = 0) {
    double s = seconds();
    if (!enabled_ || s < 1.0) return;
    if (rows)
      std::fprintf(stderr, "bneck: %s: %s (%llu rows so far, %.1f s)\n", what_.c_str(), name.c_str(), static_cast<unsigned long long>(rows),
                   s);
    else
      std::fprintf(stderr, "bneck: %s: %s (%.1f s)\n", what_.c_str(), name.c_str(), s);
  }
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }

 private:
  std::string what_;
  bool enabled_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace bneck
