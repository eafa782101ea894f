// A stretch of a trace as a trace of its own: what `advise` works on when the whole run would not
// fit in memory (a trace of a hundred million ops needs about 65 GB to advise on: each suggestion
// is a simulation of the run) or when asked (`--window-ops`).
#pragma once
#include <cstddef>
#include <string>

#include "traces/ir.hpp"

namespace bneck {

struct WindowSpan {
  OpId begin = 0, end = 0;  // ops [begin, end) of the trace (sorted by start)
  std::size_t total_ops = 0;
  bool quiet_begin = false, quiet_end = false;  // each end falls where no device op was running
};

// About `ops` ops in the middle of the run. Each end moves forward (by up to a tenth of `ops`) to
// the first op before which every device op that started has ended (no kernel or copy cut in two);
// where there is none, the end stays. The whole trace when `ops` is at least its size.
WindowSpan middle_window(const Trace& t, std::size_t ops);

// The ops [w.begin, w.end) of a finalized trace as a trace of their own, the trace's lanes,
// devices, processes, names and side tables with them (the trace is consumed). A device op whose
// launch lies before the window keeps no launch (it starts where the trace shows it); dependencies
// and collectives with a member outside, and ranges not wholly inside the window's time (from its
// first op's start to its last end or the next op's start, the later), are left out. Its `format` says which ops it holds.
Trace trace_window(Trace&& t, const WindowSpan& w);

// Two lines: which ops the window holds, and how like the run it is: "ops 1,000,957 .. 3,000,149
// of 4,000,200 (50 % of its ops, from its middle; 3300.8 ms of the run's 6604.5 ms)" and "device
// time 363 % of its span (the run's: 363 %), its device time by op name 0.1 % from the run's"
// (device time: the device ops' durations summed, over 100 % where they overlap; by op name: the
// total variation distance between the stretch's shares and the run's).
std::string window_text(const Trace& whole, const WindowSpan& w);

}  // namespace bneck
