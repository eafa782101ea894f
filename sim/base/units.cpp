#include "sim/base/units.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

#include "sim/base/error.hpp"

namespace bneck {
namespace {

struct Split {
  double value;
  std::string unit;
};

Split split_number_unit(std::string_view text, const char* what) {
  std::string s(text);
  std::size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  std::size_t j = i;
  while (j < s.size() &&
         (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '.' || s[j] == '-' || s[j] == '+' || s[j] == 'e' || s[j] == 'E')) {
    // stop at 'e'/'E' when it begins a unit (no digit follows), e.g. never for our units
    ++j;
  }
  if (j == i) throw InputError(std::string("expected a ") + what + " with a unit, got '" + s + "'");
  double v = 0;
  auto res = std::from_chars(s.data() + i, s.data() + j, v);
  if (res.ec != std::errc() || res.ptr != s.data() + j || !std::isfinite(v))
    throw InputError(std::string("malformed ") + what + " '" + s + "'");
  std::string unit;
  for (std::size_t k = j; k < s.size(); ++k)
    if (!std::isspace(static_cast<unsigned char>(s[k]))) unit += s[k];
  if (unit.empty() && v != 0) throw InputError(std::string(what) + " '" + s + "' has no unit");  // zero needs none
  return {v, unit};
}

double prefix_factor(std::string_view p, bool& ok) {
  ok = true;
  if (p.empty()) return 1;
  if (p == "k" || p == "K") return 1e3;
  if (p == "M") return 1e6;
  if (p == "G") return 1e9;
  if (p == "T") return 1e12;
  if (p == "P") return 1e15;
  if (p == "Ki") return 1024.0;
  if (p == "Mi") return 1024.0 * 1024;
  if (p == "Gi") return 1024.0 * 1024 * 1024;
  if (p == "Ti") return 1024.0 * 1024 * 1024 * 1024;
  ok = false;
  return 0;
}

std::string fmt(double v, const char* unit) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g %s", v, unit);
  return buf;
}

}  // namespace

TimeNs parse_duration(std::string_view text) {
  auto [v, u] = split_number_unit(text, "duration");
  if (u.empty() && v == 0) return 0;  // zero needs no unit
  double f;
  if (u == "ns")
    f = 1;
  else if (u == "us" || u == "\xc2\xb5s")
    f = 1e3;
  else if (u == "ms")
    f = 1e6;
  else if (u == "s")
    f = 1e9;
  else
    throw InputError("duration '" + std::string(text) + "': unknown unit '" + u + "' (ns, us, ms, s)");
  double ns = std::round(v * f);
  if (std::fabs(ns) > 9.2e18) throw InputError("duration '" + std::string(text) + "' out of range");
  return static_cast<TimeNs>(ns);
}

double parse_bandwidth(std::string_view text) {
  auto [v, u] = split_number_unit(text, "bandwidth");
  if (u.empty() && v == 0) return 0;
  if (u.size() < 3 || u.substr(u.size() - 3) != "B/s")
    throw InputError("bandwidth '" + std::string(text) + "': unit must end in B/s (e.g. 4.8 TB/s)");
  bool ok;
  double f = prefix_factor(std::string_view(u).substr(0, u.size() - 3), ok);
  if (!ok) throw InputError("bandwidth '" + std::string(text) + "': unknown prefix");
  return v * f;
}

double parse_op_rate(std::string_view text) {
  auto [v, u] = split_number_unit(text, "rate");
  if (u.empty() && v == 0) return 0;
  std::string_view uv(u);
  std::size_t cut = 0;
  if (uv.size() >= 6 && uv.substr(uv.size() - 6) == "FLOP/s")
    cut = 6;
  else if (uv.size() >= 4 && uv.substr(uv.size() - 4) == "OP/s")
    cut = 4;
  else
    throw InputError("rate '" + std::string(text) + "': unit must end in FLOP/s or OP/s (e.g. 989 TFLOP/s)");
  bool ok;
  double f = prefix_factor(uv.substr(0, uv.size() - cut), ok);
  if (!ok) throw InputError("rate '" + std::string(text) + "': unknown prefix");
  return v * f;
}

double parse_frequency(std::string_view text) {
  auto [v, u] = split_number_unit(text, "frequency");
  if (u.size() < 2 || u.substr(u.size() - 2) != "Hz") throw InputError("frequency '" + std::string(text) + "': unit must end in Hz");
  bool ok;
  double f = prefix_factor(std::string_view(u).substr(0, u.size() - 2), ok);
  if (!ok) throw InputError("frequency '" + std::string(text) + "': unknown prefix");
  return v * f;
}

Bytes parse_bytes(std::string_view text) {
  auto [v, u] = split_number_unit(text, "size");
  if (u.empty() && v == 0) return 0;  // zero needs no unit
  if (u.empty() || u.back() != 'B') throw InputError("size '" + std::string(text) + "': unit must end in B");
  bool ok;
  double f = prefix_factor(std::string_view(u).substr(0, u.size() - 1), ok);
  if (!ok || v < 0) throw InputError("size '" + std::string(text) + "': bad prefix or negative");
  return static_cast<Bytes>(std::llround(v * f));
}

double parse_amount(std::string_view text, const char* what) {
  std::string s(text);
  try {
    std::size_t pos = 0;
    double v = std::stod(s, &pos);
    if (pos != s.size() || !std::isfinite(v) || v < 0) throw std::invalid_argument(s);
    return v;
  } catch (const std::exception&) { throw InputError(std::string(what) + " '" + s + "': expected a non-negative number (e.g. 2.4e12)"); }
}

std::string format_duration(TimeNs ns) {
  double a = std::fabs(static_cast<double>(ns));
  char buf[64];
  if (a >= 1e9)
    std::snprintf(buf, sizeof buf, "%.3f s", static_cast<double>(ns) / 1e9);
  else if (a >= 1e6)
    std::snprintf(buf, sizeof buf, "%.3f ms", static_cast<double>(ns) / 1e6);
  else if (a >= 1e3)
    std::snprintf(buf, sizeof buf, "%.3f us", static_cast<double>(ns) / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%lld ns", static_cast<long long>(ns));
  return buf;
}

std::string format_share(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f %%", fraction * 100);
  return buf;
}

std::string format_bandwidth(double b) {
  if (b >= 1e12) return fmt(b / 1e12, "TB/s");
  if (b >= 1e9) return fmt(b / 1e9, "GB/s");
  if (b >= 1e6) return fmt(b / 1e6, "MB/s");
  return fmt(b, "B/s");
}

std::string format_frequency(double hz) {
  if (hz >= 1e9) return fmt(hz / 1e9, "GHz");
  if (hz >= 1e6) return fmt(hz / 1e6, "MHz");
  return fmt(hz, "Hz");
}

std::string format_op_rate(double r) {
  if (r >= 1e15) return fmt(r / 1e15, "PFLOP/s");
  if (r >= 1e12) return fmt(r / 1e12, "TFLOP/s");
  if (r >= 1e9) return fmt(r / 1e9, "GFLOP/s");
  return fmt(r, "FLOP/s");
}

std::string format_bytes(Bytes b) {
  double d = static_cast<double>(b);
  if (b >= (1ull << 30) && b % (1ull << 20) == 0) return fmt(d / (1ull << 30), "GiB");
  if (b >= (1ull << 20) && b % (1ull << 10) == 0) return fmt(d / (1ull << 20), "MiB");
  if (b >= (1ull << 10) && b % (1ull << 10) == 0) return fmt(d / (1ull << 10), "KiB");
  return std::to_string(b) + " B";
}

}  // namespace bneck
