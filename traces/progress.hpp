// Progress on stderr for long work (imports, sweeps): silent for the first second, then one line
// per phase; for work of known size a bar redrawn in place on a terminal, plain lines (every 10 %)
// otherwise (a log, a CI job).
#pragma once
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <mutex>
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
  // `done` of `total` units of `unit` (thread-safe). The last call (done == total) ends the bar.
  void step(std::uint64_t done, std::uint64_t total, const char* unit) {
    if (!enabled_ || total == 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    const double s = seconds();
    if (s < 1.0 && done < total) return;
    const int pct = static_cast<int>(100 * done / total);
    if (tty_) {
      if (done < total && s - last_draw_ < 0.1) return;
      last_draw_ = s;
      const int w = 30, fill = w * pct / 100;
      std::fprintf(stderr, "\rbneck: %s [%.*s%.*s] %3d %% %llu/%llu %s %.1f s", what_.c_str(), fill, "##############################",
                   w - fill, "                              ", pct, static_cast<unsigned long long>(done),
                   static_cast<unsigned long long>(total), unit, s);
      if (done == total) std::fputc('\n', stderr);
    } else if (pct / 10 > last_decile_ || done == total) {
      if (s < 1.0) return;
      last_decile_ = pct / 10;
      std::fprintf(stderr, "bneck: %s: %llu/%llu %s (%d %%, %.1f s)\n", what_.c_str(), static_cast<unsigned long long>(done),
                   static_cast<unsigned long long>(total), unit, pct, s);
    }
  }

 private:
  std::string what_;
  bool enabled_;
  std::chrono::steady_clock::time_point t0_;
  bool tty_ = ::isatty(2) != 0;
  std::mutex mu_;
  double last_draw_ = -1;
  int last_decile_ = -1;
};

}  // namespace bneck
