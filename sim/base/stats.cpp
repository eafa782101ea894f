#include "sim/base/stats.hpp"

#include <algorithm>
#include <cmath>

namespace bneck {

namespace {

template <class T>
double interpolate(std::vector<T>& v, double q) {
  if (v.empty()) return 0;
  q = q >= 0 ? std::min(q, 1.0) : 0.0;  // (NaN: 0)
  const double x = q * static_cast<double>(v.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(std::floor(x));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(lo), v.end());
  const double a = static_cast<double>(v[lo]);
  if (lo + 1 >= v.size() || x == static_cast<double>(lo)) return a;
  const double b = static_cast<double>(*std::min_element(v.begin() + static_cast<std::ptrdiff_t>(lo) + 1, v.end()));
  return a + (b - a) * (x - static_cast<double>(lo));
}

}  // namespace

double quantile(std::vector<double> v, double q) { return interpolate(v, q); }

TimeNs quantile(std::vector<TimeNs> v, double q) { return static_cast<TimeNs>(std::llround(interpolate(v, q))); }

}  // namespace bneck
