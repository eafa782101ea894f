// Calibrating the step cost model from a trace of the real engine (and the log of its requests).
//
// The engine's steps, from either source:
//   - ranges the engine marks (used when the trace has 8 or more): an NVTX/record_function range
//     whose name starts with "forward" and carries the step's shape as key=value pairs ("forward
//     q=512 kv=3119 seqs=11 qkv=..."; q, kv and seqs are required), optionally inside a range
//     "step" with sibling ranges "prepare" (before) and "update" (after);
//   - a plain profile and the request log of the same run: the steps are the iterations structure
//     recognition finds (an engine's steps are alike, not equal: the batch changes the kernels),
//     each from its first launch to its last op's end; the log's clock is aligned with the trace's
//     (the offset at which most token times fall between a step's end and the next step's start:
//     the engine records a token once its step is out), and the continuous scheduler is replayed
//     over the measured steps (serve.hpp, replay_schedule: at each step's start it picks the batch
//     the simulation would, with the engine's settings as it ran) to give each step its batch. The
//     replay is checked against the log: at least 90 % of its tokens must come out on the step
//     the scheduler gives them, or calibration stops with one line saying what was found.
// From each step bneck takes:
//   - gpu: the summed duration of the step's kernels and copies; fitted to the hardware-model
//     features (llm.hpp) by non-negative least squares, once with the attention counted per
//     sequence and once over the packed batch; the better fit wins;
//   - launch: from the forward's start to the end of its last launch call (the host's work to
//     issue the forward), the median time per kernel launched times the kernels per step; lag
//     (start to first kernel) and tail (last launch to the end) as medians. A plain profile's step
//     starts at its first launch (its inputs copied in): the forward proper is taken to start after
//     the longest host pause before the plan build (a build happens inside the forward) or among
//     the first 15 % of launches; what comes before is preparation, fitted to [1, seqs, q, kv];
//   - the plan build of a step on a new shape: steps that build show one launch pause far longer
//     than any other (found from the trace: the split of those pauses), else new by shape key;
//   - prepare and update: the durations of those ranges, fitted to [1, seqs, q, kv] and [1, seqs];
//     without them the host gap between steps (update + the next prepare) where the engine did
//     not wait for a request, fitted to the next step's [1, seqs, q, kv] and this step's seqs.
// A static-batching engine (model.generate: its log has finish times alone, a batch's requests
// sharing theirs) is aligned by its batches instead (align_static_log): each batch is as many steps
// as its longest output, counted back from the last step found, its shapes the padded batch's.
// Then a request log (fit_host_scale): the simulation of its requests with the fitted model is
// compared with its measured inter-token latency, and every host term is scaled so the two
// medians agree (host_scale; a static log's end-to-end latency). A log from the traced run itself gives a scale near 1; a log of the
// same requests served without the profiler removes the profiler's overhead (40 % of each step
// under Nsight Systems on an H200 machine).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "models/serving/serve.hpp"
#include "traces/ir.hpp"

namespace bneck::serve {

// The request log of the traced run, and the engine's settings as it ran: the batches of steps the
// trace does not name.
struct TraceLog {
  const std::vector<Request>* requests = nullptr;
  std::string path;
  EngineConfig engine;
};

// What fit_host_steps (below) found.
struct HostStepFit {
  std::size_t steps = 0, used = 0;
  double agreement = 0;
  double scale = 1, per_token_ns = 0, per_seq_ns = 0;
  bool q_fitted = false, seq_fitted = false;
  double q_spread = 0, seq_spread = 0, q_lo = 0, q_hi = 0, seq_lo = 0, seq_hi = 0;
  double median_abs_log_error = 0;
  // The host's pace over stretches of the run against its median (10th and 90th percentiles of
  // windowed medians of measured / model step time, less 1: -0.2 is a stretch whose steps took 20 %
  // less time); 0 where fewer than 30 host-bound steps.
  double pace_lo = 0, pace_hi = 0;
  std::string note;
};

struct CalibrationReport {
  std::size_t steps = 0;   // with a shape, fitted
  std::string steps_from;  // what found them
  // Alignment with the traced run's log (unannotated traces).
  std::size_t steps_found = 0, steps_in_log = 0, steps_scheduled = 0, tokens = 0, tokens_agreeing = 0;
  TimeNs log_offset_ns = 0;
  std::string alignment;  // one line: what was found and how well it agrees
  double gpu_rms_ns = 0, launch_rms_ns = 0, prepare_rms_ns = 0;
  double measured_itl_ms = 0, simulated_itl_ms = 0;  // the log's median inter-token latency (static: E2E), after scaling
  std::optional<HostStepFit> host_fit;               // the host's work per step fitted on the log's steps (fit_host_steps)
};

// Fits `model` (from hardware_step_model) to the trace's engine steps: its 'forward' ranges when
// it has 8 or more, else the steps structure recognition finds, their batches from `log` (needed
// then). Throws InputError naming the trace (or the log) when neither tells the steps' shapes, or
// when the log and the steps disagree.
CalibrationReport calibrate_step_model(const Trace& trace, StepCostModel& model, const TraceLog* log = nullptr);

// Scales the host terms so the simulated median inter-token latency of `log` matches its measured one.
void fit_host_scale(const std::vector<Request>& log, const EngineConfig& eng, StepCostModel& model, CalibrationReport& rep,
                    const std::string& log_path);

// NNLS with one pass of outlier removal (rows whose residual exceeds 5 median absolute residuals).
std::vector<double> robust_nnls(const std::vector<std::vector<double>>& a, const std::vector<double>& b, double* rms = nullptr);

// The engine's steps from a request log alone: a step's tokens come out together, so the log's
// token times fall in groups, one a step (gaps under 1 ms, or a quarter of the median spacing of
// the groups where that is less). A step ran back to back with the one before (busy) when a request
// was in flight as that one ended; it was scheduled then. Otherwise the engine was idle and woke on
// the next arrival.
struct LogStep {
  TimeNs sched = 0, emit = 0;
  bool busy = false;
};
std::vector<LogStep> log_steps(const std::vector<Request>& reqs);

// The host's work per step as a function of the batch, fitted on a log's steps where the batch
// varies. The scheduler replayed over the log's steps (replay_schedule) gives each its batch (90 %
// of the tokens on the replayed step, or nothing is fitted); each back-to-back step's time (from
// the previous step's tokens to its own) is fitted by NNLS to [host, q, seqs]: host is the model's
// host time of that shape (prepare, launch, plan build, update) at scale 1, q and seqs its query
// tokens and sequences. The coefficients: the host scale and the forward's host work per query token
// and per sequence (added to the launch: CUDA graphs remove it, as the engine's graph runs show).
// A slope whose feature spreads under 10 % over the steps is not fitted (the log cannot tell it).
// On success sets m.host_scale and adds the slopes to m.launch; false (m untouched) when the log
// cannot tell them, with why in fit.note.
bool fit_host_steps(const std::vector<Request>& reqs, const EngineConfig& eng, StepCostModel& m, HostStepFit& fit);

}  // namespace bneck::serve

namespace bneck::serve {

// An engine step an engine's own profiler annotation names (vLLM's model runner:
// "execute_<tokens>_context_<n>(sq..sk..sqsq..sqsk..)_generation_<n>(...)" or the older
// "execute_context_<n>(<tokens>_<sum q^2>)_generation_<n>(<kv>)"; SGLang's "step[DECODE bs=N]",
// "step[EXTEND bs=N toks=T]"; bneck's "forward q= kv= seqs="), with what it cost on the traced GPU.
struct NamedStep {
  std::string engine, mode, name;  // mode: eager, piecewise CUDA graphs, full CUDA graphs
  StepShape shape;
  std::int64_t prefills = 0, decodes = 0;
  TimeNs start = 0, host_span = 0;    // the range, on the host
  TimeNs gpu_busy = 0, gpu_span = 0;  // its device ops: summed durations, first start to last end
  std::int64_t device_ops = 0, launches = 0, graph_launches = 0;
};
struct NamedSteps {
  std::vector<NamedStep> steps;
  std::vector<std::string> captures;  // CUDA-graph capture ranges ("capture_32_DECODE"): no step to time
};
NamedSteps read_named_steps(const Trace& trace);

}  // namespace bneck::serve
