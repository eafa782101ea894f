// The engine's steps as a trace shows them, shared by the step model's calibration (calibrate.cpp),
// its plain-profile path (calibrate_plain.cpp) and the engines' named steps (calibrate_named.cpp).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "models/serving/calibrate.hpp"

namespace bneck::serve::calibration {

// One engine step as the trace shows it: from its forward range (annotated), or from a structure
// instance (its first launch to its last op's end).
struct StepObs {
  TimeNs start = 0, end = 0;  // host: the forward's start and end (the tokens are out)
  bool shaped = false;        // the shape is known (named by the range, or replayed from the log)
  StepShape shape;
  std::pair<double, double> key;     // the shape as the engine keys it: (qpad, kvpad) when given, else (q, kv)
  TimeNs prepare = -1, update = -1;  // annotated ranges
  TimeNs gap = -1;                   // unannotated: host time since the previous step's end (its update + this prepare)
  std::int64_t prev_seqs = 0;        // the previous step's sequences (with gap)
  TimeNs gpu = 0, first_kernel = -1, last_launch = -1;
  std::int64_t kernels = 0;
  std::vector<std::pair<TimeNs, TimeNs>> launches;  // launch calls of the step: start, end
};

// "forward q=512 kv=3119 seqs=11 qkv=...": the shape, or nullopt if q, kv or seqs is missing.
bool parse_shape(const std::string& name, StepShape& s, std::pair<double, double>& key);

// A number with `prec` significant digits.
std::string fmt(double v, int prec = 3);

// The steps of an engine from a plain profile. A step ends when its sampled tokens reach the host:
// one device-to-host copy a step, which the host waits for. So on the thread that launches most
// device ops, the steps are its launches up to each such copy, when these segments are about as
// long as the iterations structure recognition finds (their median at least half the iterations'
// median op count: one copy a step), or are once a segment of under 10 % of an iteration's ops is
// joined to the step before it (a second copy a step: model.generate's stopping criteria); else
// the iterations themselves (alike, not equal: the batch changes the kernels).
std::vector<StepObs> engine_steps(const Trace& trace, std::string& how);

// The request log of the traced run aligned with the steps found: its clock offset (each token out
// between its step's end and the next step's start), then the scheduler replayed over the steps
// (replay_schedule) gives each its batch. Fills the steps' shapes and gaps; throws when the log
// and the steps do not agree.
void align_log(std::vector<StepObs>& steps, const TraceLog& tl, const std::string& trace_path, CalibrationReport& rep);

// The log of a static-batching engine (no token times; a batch's requests share their finish)
// aligned with the steps found: each batch is its longest output's steps, counted back from the
// last step (calibrate_plain.cpp). Fills the steps' shapes and gaps; throws when they disagree.
void align_static_log(std::vector<StepObs>& steps, const TraceLog& tl, const std::string& trace_path, CalibrationReport& rep);

}  // namespace bneck::serve::calibration
