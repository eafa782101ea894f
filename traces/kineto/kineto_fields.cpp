#include "traces/kineto/kineto_fields.hpp"

#include <charconv>
#include <cmath>
#include <limits>

#include "sim/base/error.hpp"
#include "traces/kineto/kineto_importer.hpp"

namespace bneck {

namespace {
// Every form: a sign, an exponent, long integer parts, errors.
TimeNs us_text_to_ns_general(std::string_view s) {
  std::string_view t = s;
  bool neg = !t.empty() && t[0] == '-';
  if (neg) t.remove_prefix(1);
  auto via_double = [&s]() -> TimeNs {  // an exponent: rare, read as a double
    try {
      double ns = std::stod(std::string(s)) * 1000.0;
      if (!(std::fabs(ns) < 9.0e18)) throw std::out_of_range("timestamp");
      return static_cast<TimeNs>(std::llround(ns));
    } catch (const std::out_of_range&) {
      throw InputError("timestamp '" + std::string(s) + "' out of range");
    } catch (const std::exception&) { throw InputError("timestamp '" + std::string(s) + "' is not a number"); }
  };
  TimeNs whole = 0, frac = 0;
  int digits = 0;
  bool dot = false, any = false, round_up = false;
  for (char c : t) {
    if (c == '.') {
      if (dot) throw InputError("timestamp '" + std::string(s) + "' is not a number");
      dot = true;
      continue;
    }
    if (c == 'e' || c == 'E') return via_double();
    if (c < '0' || c > '9') throw InputError("timestamp '" + std::string(s) + "' is not a number");
    any = true;
    if (!dot) {
      if (whole > (std::numeric_limits<TimeNs>::max() - 9) / 10 / 1000) {
        if (t.find_first_of("eE") != std::string_view::npos) return via_double();  // a long mantissa with an exponent
        throw InputError("timestamp '" + std::string(s) + "' out of range");
      }
      whole = whole * 10 + (c - '0');
    } else if (digits < 3) {
      frac = frac * 10 + (c - '0');
      ++digits;
    } else if (digits == 3) {
      round_up = c >= '5';
      ++digits;
    }
  }
  if (!any) throw InputError("timestamp '" + std::string(s) + "' is not a number");
  while (digits < 3) {
    frac *= 10;
    ++digits;
  }
  if (whole > (std::numeric_limits<TimeNs>::max() - 1000) / 1000) throw InputError("timestamp '" + std::string(s) + "' out of range");
  TimeNs ns = whole * 1000 + frac + (round_up ? 1 : 0);
  return neg ? -ns : ns;
}
}  // namespace

TimeNs kineto_us_to_ns(std::string_view s) {
  // The usual form, `digits[.digits]` with at most 15 integer digits (no overflow possible), in
  // one pass; anything else takes the general path.
  const char* p = s.data();
  const char* const e = p + s.size();
  std::uint64_t whole = 0;
  while (p < e && static_cast<unsigned>(*p - '0') < 10) whole = whole * 10 + static_cast<unsigned>(*p++ - '0');
  const auto int_digits = p - s.data();
  if (int_digits == 0 || int_digits > 15) return us_text_to_ns_general(s);
  std::uint64_t frac = 0;
  int digits = 0;
  bool round_up = false;
  if (p < e && *p == '.') {
    for (++p; p < e && static_cast<unsigned>(*p - '0') < 10; ++p) {
      if (digits < 3) {
        frac = frac * 10 + static_cast<unsigned>(*p - '0');
        ++digits;
      } else if (digits == 3) {
        round_up = *p >= '5';
        ++digits;
      }
    }
  }
  if (p != e) return us_text_to_ns_general(s);
  for (; digits < 3; ++digits) frac *= 10;
  return static_cast<TimeNs>(whole * 1000 + frac + (round_up ? 1 : 0));
}

}  // namespace bneck

namespace bneck::kineto {

Cat cat_of(std::string_view c) {
  if (c == "cpu_op" || c == "Operator" || c == "operator") return Cat::CpuOp;
  if (c == "cuda_runtime" || c == "Runtime" || c == "runtime") return Cat::Runtime;
  if (c == "cuda_driver" || c == "Driver") return Cat::Driver;
  if (c == "kernel" || c == "Kernel") return Cat::Kernel;
  if (c == "gpu_memcpy" || c == "Memcpy") return Cat::Memcpy;
  if (c == "gpu_memset" || c == "Memset") return Cat::Memset;
  if (c == "cuda_sync") return Cat::Sync;
  if (c == "user_annotation") return Cat::UserAnno;
  if (c == "gpu_user_annotation") return Cat::GpuAnno;
  if (c == "python_function") return Cat::Python;  // with_stack
  return Cat::Other;
}

Field event_field(std::string_view k) {
  if (k == "ph") return Field::Ph;
  if (k == "cat") return Field::Cat;
  if (k == "name") return Field::Name;
  if (k == "pid") return Field::Pid;
  if (k == "tid") return Field::Tid;
  if (k == "ts") return Field::Ts;
  if (k == "dur") return Field::Dur;
  return Field::None;
}
Field arg_field(std::string_view k) {
  switch (k.empty() ? 0 : k[0]) {
    case 'c':
      if (k == "correlation") return Field::Corr;
      if (k == "cuda_sync_kind") return Field::SyncKind;
      break;
    case 's':
      if (k == "stream") return Field::Stream;
      if (k == "shared memory") return Field::Smem;
      if (k == "size") return Field::Bytes;  // ROCm runtime args
      break;
    case 'd':
      if (k == "device") return Field::Device;
      if (k == "dtype") return Field::Dtype;
      break;
    case 'b':
      if (k == "bytes") return Field::Bytes;
      if (k == "block") return Field::Block;
      break;
    case 'w':
      if (k == "wait_on_stream") return Field::WaitStream;
      if (k == "wait_on_cuda_event_record_corr_id") return Field::WaitRecord;
      if (k == "wait_on_cuda_event_id") return Field::WaitEvent;
      break;
    case 'r':
      if (k == "registers per thread") return Field::Regs;
      break;
    case 'g':
      if (k == "grid") return Field::Grid;
      break;
    case 'n':
      if (k == "name") return Field::ArgName;
      break;
    case 'k':
      if (k == "kind") return Field::Kind;
      break;
    case 'I':
      if (k == "Input Dims") return Field::Dims;
      if (k == "Input type") return Field::InType;
      if (k == "In msg nelems") return Field::InNelems;
      break;
    case 'O':
      if (k == "Out msg nelems") return Field::OutNelems;
      break;
    case 'C':
      if (k == "Collective name") return Field::CollName;
      if (k == "Concrete Inputs") return Field::Concrete;
      break;
    case 'P':
      if (k == "Process Group Name") return Field::PgName;
      if (k == "Process Group Ranks") return Field::PgRanks;
      break;
    case 'G':
      if (k == "Group size") return Field::GroupSize;
      break;
    default: break;
  }
  return Field::None;
}
Field device_field(std::string_view k) {
  if (k == "id") return Field::DevId;
  if (k == "name") return Field::DevName;
  if (k == "numSms") return Field::DevSms;
  if (k == "totalGlobalMem") return Field::DevMem;
  if (k == "computeMajor") return Field::DevMajor;
  if (k == "computeMinor") return Field::DevMinor;
  if (k == "maxThreadsPerBlock") return Field::DevMaxThreads;
  if (k == "regsPerMultiprocessor") return Field::DevRegs;
  if (k == "sharedMemPerMultiprocessor") return Field::DevSmem;
  if (k == "maxThreadsPerMultiprocessor") return Field::DevThreadsPerSm;
  return Field::None;
}

void append_dims(std::string& s, const std::vector<std::vector<std::int64_t>>& d, std::size_t n) {
  s += '[';
  char num[24];
  for (std::size_t i = 0; i < n && i < d.size(); ++i) {
    if (i) s += ", ";
    s += '[';
    for (std::size_t j = 0; j < d[i].size(); ++j) {
      if (j) s += ", ";
      const auto r = std::to_chars(num, num + sizeof num, d[i][j]);
      s.append(num, r.ptr);
    }
    s += ']';
  }
  s += ']';
}

}  // namespace bneck::kineto
