// The Kineto reader's vocabulary (internal to traces/kineto): event categories, the one event
// being read, and which field each JSON key fills. Kept apart from the SAX reader so that adding a
// field is one enum value and one line in the key tables (kineto_fields.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/units.hpp"

namespace bneck::kineto {

enum class Cat : std::uint8_t { Other, CpuOp, Runtime, Driver, Kernel, Memcpy, Memset, Sync, UserAnno, GpuAnno, Meta, Python };

Cat cat_of(std::string_view c);

// One event as read; reset between events. Only the fields bneck uses are kept. Its scalars apart
// (EvScalars), so that an event kept for later (a second reading thread's) is a plain record and
// its text.
struct EvScalars {
  char ph = 0;
  Cat cat = Cat::Other;
  bool has_cat = false;
  bool pid_num = false, tid_num = false;
  bool legacy_cpu = false;  // the legacy profiler's host row ("CPU functions")
  bool has_ts = false, has_dur = false;
  bool has_dims = false;
  std::int64_t pid = 0, tid = 0;
  TimeNs ts = 0, dur = 0;
  // args
  std::int64_t correlation = -1, stream = -1, device = -1, bytes = -1;
  std::int64_t wait_on_stream = -1, wait_record_corr = -1, wait_event_id = -1;
  std::int64_t regs = -1, smem = -1;
  std::int64_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  std::int64_t in_nelems = -1, out_nelems = -1, group_size = -1;
};

struct Ev : EvScalars {
  std::string name;
  std::string sync_kind, arg_name, memkind, in_type, coll_name, dtype, pg_name, pg_ranks;
  // "Concrete Inputs" (PyTorch 2.1+ with record_shapes: scalar arguments as text, "[2, 2]", "1"),
  // joined "|" between arguments: the convolutions' stride, padding, dilation and groups
  std::string concrete;
  // Input shapes: the first `dims_n` of `dims` (the rest keep their memory for the next event).
  std::vector<std::vector<std::int64_t>> dims;
  std::size_t dims_n = 0;
  void add_dim() {
    if (dims_n < dims.size())
      dims[dims_n].clear();
    else
      dims.emplace_back();
    ++dims_n;
  }
  // The next event: fields back to their defaults, strings and lists emptied but their memory
  // kept (an event a few dozen bytes of names, hundreds of thousands of events).
  void reset();
};
// Every text field of Ev (a kept event's text is stored in this order).
inline constexpr std::string Ev::*kStrings[] = {&Ev::name,      &Ev::sync_kind, &Ev::arg_name, &Ev::memkind,  &Ev::in_type,
                                                &Ev::coll_name, &Ev::dtype,     &Ev::pg_name,  &Ev::pg_ranks, &Ev::concrete};
inline void Ev::reset() {
  static_cast<EvScalars&>(*this) = EvScalars{};
  for (std::string Ev::*s : kStrings) (this->*s).clear();
  dims_n = 0;
}

// Which field a scalar goes to.
enum class Field : std::uint8_t {
  None,
  Ph,
  Cat,
  Name,
  Pid,
  Tid,
  Ts,
  Dur,
  Corr,
  Stream,
  Device,
  Bytes,
  WaitStream,
  WaitRecord,
  WaitEvent,
  Regs,
  Smem,
  Grid,
  Block,
  SyncKind,
  ArgName,
  Kind,
  InType,
  Concrete,
  CollName,
  Dtype,
  PgName,
  PgRanks,
  InNelems,
  OutNelems,
  GroupSize,
  Dims,
  // top level
  DevId,
  DevName,
  DevSms,
  DevMem,
  DevMajor,
  DevMinor,
  DevMaxThreads,
  DevRegs,
  DevSmem,
  DevThreadsPerSm,
  Rank,
  WorldSize,
};

Field event_field(std::string_view k);   // keys of a trace event
Field arg_field(std::string_view k);     // keys of an event's args
Field device_field(std::string_view k);  // keys of a deviceProperties entry

// Appends the first `n` shapes of `d` to `s` as PyTorch's emit_nvtx writes them: [[8, 2048], [2048]].
void append_dims(std::string& s, const std::vector<std::vector<std::int64_t>>& d, std::size_t n);

}  // namespace bneck::kineto
