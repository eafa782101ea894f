// Units: simulated and measured time is integer nanoseconds; sizes are bytes; rates carry units.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace bneck {

using TimeNs = std::int64_t;  // a point in time or a duration, integer nanoseconds
using Bytes = std::uint64_t;  // a size in bytes

inline constexpr TimeNs kNsPerUs = 1'000;
inline constexpr TimeNs kNsPerMs = 1'000'000;
inline constexpr TimeNs kNsPerS = 1'000'000'000;

// Parses "2 us", "1.5ms", "300 ns", "2 s" into nanoseconds (rounded to nearest).
// Throws InputError on anything else. A bare number is rejected: durations carry units.
TimeNs parse_duration(std::string_view text);
// Parses "4.8 TB/s", "900 GB/s", "64 GiB/s" into bytes per second (decimal SI; binary with "i").
double parse_bandwidth(std::string_view text);
// Parses "989.4 TFLOP/s", "1979 TOP/s" into operations per second.
double parse_op_rate(std::string_view text);
// Parses "1.98 GHz", "1410 MHz" into Hz.
double parse_frequency(std::string_view text);
// Parses "60 MB", "80 GiB", "4096 B" into bytes.
Bytes parse_bytes(std::string_view text);

// Parses a plain non-negative number ("2.4e12": FLOPs, bytes as counts); `what` names the option
// in the InputError.
double parse_amount(std::string_view text, const char* what);

// Human formatting with units, e.g. "12.204 ms", "4.81 TB/s", "60 MiB".
std::string format_duration(TimeNs ns);
std::string format_share(double fraction);  // 0.675 -> "68 %"
std::string format_bandwidth(double bytes_per_s);
std::string format_frequency(double hz);
std::string format_op_rate(double ops_per_s);  // "66.9 TFLOP/s"
std::string format_bytes(Bytes b);

}  // namespace bneck
