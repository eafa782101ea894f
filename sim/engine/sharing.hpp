// Model card: sharing a GPU among concurrent ops (fluid resource model, in the spirit of SimGrid's
// max-min sharing, with the block scheduler's order for SMs).
// Captures: device ops that run at the same time on one GPU progress at rates (fractions of their
//   speed alone) set by what they share:
//   - SMs: a kernel's blocks spread over `sms` SMs (its grid, up to all) and hold `sm_fraction` of
//     each (the largest of threads, registers, shared memory and block slots its resident blocks
//     take). SMs go in start order (the block scheduler dispatches an earlier kernel's blocks
//     first): a later kernel gets only SMs with room left for its footprint; its rate is capped by
//     the share of the SMs it asked for that it got (a persistent GEMM beside NCCL's 24 blocks:
//     108 / 132 SMs -> 0.82). A kernel that gets none waits at rate 0. One wave of one block per
//     SM (its blocks, or a persistent kernel's tiles, known): rounds of tiles on the SMs got, plus
//     kShortRoundsLate of a round when it takes two rounds or more on the SMs it asked for.
//   - Drains: a kernel whose last blocks are retiring frees its SMs to the kernels after it; a
//     bandwidth-bound newcomer progresses on them, a compute-bound one (which ends a block's time
//     after its last block is placed) waits for the drain to end. Where a drain begins is learned
//     from the trace (calibration below) as the fraction of the kernel's alone work left then.
//   - Bandwidth: HBM, each PCIe direction and the PCIe link as a whole (capacity 1 each); an op
//     uses a fraction of each alone. Rates are shared max-min fairly by weight (progressive
//     filling: rates rise as level x weight, capped by each op's SM share, until a resource fills
//     and freezes its users). Weights are 1 but a bandwidth-bound draining kernel's (drain_weight).
//   - Communication kernels hold their SMs and bandwidth but keep their own time (rate 1): a
//     collective's progress is set by its last arrival and the links. One that `needs_sms` (a
//     collective a transform synthesized) makes no progress (rate 0, taking no bandwidth) until
//     it holds every SM it asks for: an NCCL kernel's channels run one block each, and a kernel
//     that started first keeps the SMs it holds (on two H200s, DDP's all-reduces wait 35-50 us
//     after the previous one ends, until the running weight-gradient GEMM drains).
//   - A copy whose work is done and waits to complete holds nothing.
// Rates are re-solved whenever an op starts, drains or finishes on the GPU; an op alone runs at 1.
// Calibration for exact replay: under the overlap a trace shows, an op's alone time is its measured
//   time less the time sharing cost it there (the integral of 1 - rate over its measured interval),
//   so that the simulation reproduces the measured durations and a what-if that removes the other
//   op runs it at its alone time. Assumed where the trace is ambiguous: a bandwidth-bound kernel
//   that starts while earlier kernels hold every SM drained the earliest-ending of them from that
//   moment; a copy shown ending with a later same-kind copy (within 1 % or 5 us) that started
//   while it ran finished its work when that one began (the copy engines ran them in turn; an
//   end -> end edge keeps its measured end).
// Not modelled: L2 capacity and bandwidth, NVLink shared by concurrent collectives and peer copies,
//   stream priorities, the shape of a drain (blocks leave at one rate; the weight stands for how
//   the trace splits bandwidth during it).
#pragma once
#include <cstdint>
#include <vector>

#include "sim/graph/graph.hpp"

namespace bneck {

struct ShareDemand {
  std::uint32_t sms = 0;    // SMs its blocks spread over (0: none, e.g. a copy engine's copy)
  float sm_fraction = 0;    // of each such SM it holds, 0..1
  float hbm = 0;            // fraction of the achievable HBM bandwidth it moves alone, 0..1
  float pcie_h2d = 0;       // fraction of the PCIe host-to-device direction it uses alone
  float pcie_d2h = 0;       // fraction of the device-to-host direction
  float pcie = 0;           // fraction of the link's bidirectional bandwidth (both directions at once)
  float weight = 1;         // its share when bandwidth is split (max-min fair by weight)
  bool fixed_rate = false;  // communication: holds resources, keeps its own time
  bool needs_sms = false;   // (fixed-rate) rate 0 until it holds every SM it asks for
  bool draining = false;    // its last blocks are retiring: its SMs are free for later kernels
  std::uint32_t tiles = 0;  // a one-wave kernel of one block per SM: its blocks, or, persistent (its
                            // blocks loop over work tiles), its tiles; short of SMs it runs
                            // ceil(tiles / SMs got) rounds instead of ceil(tiles / SMs asked),
                            // plus kShortRoundsLate when those are 2 or more (0: fluid, the share
                            // of SMs it got)
  // Bandwidth-bound (moves at least half the achievable bandwidth alone): it progresses on whatever
  // SMs a draining kernel frees. A compute-bound kernel finishes one block's time after its last
  // block is placed, so it gains nothing before the drain is over.
  bool bandwidth_bound() const { return hbm >= 0.5f && !fixed_rate; }
};

// A persistent kernel short of SMs, of two rounds of tiles or more on the SMs it asked for, takes
// this much of a round more than ceil(tiles / SMs got). Measured on one H200
// (validate/concurrency/persistent_gemm.py, validate/reference/h200/concurrency: bf16 cuBLAS GEMMs
// alone and while a 24-SM blocker holds their SMs; the blocker moves no memory, so this is not
// bandwidth): kernel time beside over time alone, in rounds alone, less ceil(tiles / 108):
// 1024x6144x6144 (256 tiles, 2 -> 3 rounds) 0.63, 2048x8192x8192 and 4096^3 (512 tiles, 4 -> 5)
// 0.65 and 0.67, 6144x6144x1024 (1024 tiles, 8 -> 10) 0.53, 8192^3 (1664 tiles, 13 -> 16) 0.07;
// a one-round GEMM (1024x4096x4096: 1 -> 2) none. Why (2-SM clusters' placement, the tile
// scheduler's last tiles) is not known. On two H200s beside NCCL (DDP, dp_2gpu): the same
// GEMMs 100 -> 187 us (256 tiles; 2 / 3.6 of a round: x1.8) and 112 -> 150 us (1024; x1.33).
inline constexpr double kShortRoundsLate = 0.6;

// What the engine asks about a graph's device ops (models/sharing.hpp implements it).
class ShareModel {
 public:
  virtual ~ShareModel() = default;
  virtual ShareDemand demand(NodeId n, const Graph& g) const = 0;
  virtual std::uint32_t sm_count(std::uint32_t device) const = 0;
  // How a draining kernel weighs against the kernels taking its SMs when bandwidth is split.
  virtual double drain_weight(std::uint32_t) const { return 1; }
};

// Rates (0..1) of ops running together on one GPU, given in start order. `rates` is resized.
// `binding[i]`: 0 alone or unconstrained, 1 SMs, 2 HBM, 3 PCIe. A draining op claims no SMs and,
// bandwidth-bound, weighs `drain_weight` in the bandwidth split; a compute-bound kernel after a
// draining one waits for the drain to end (rate 0, no claims).
void solve_rates(const std::vector<ShareDemand>& ops, std::uint32_t sm_count, std::vector<double>& rates,
                 std::vector<std::uint8_t>* binding = nullptr, double drain_weight = 1);

// solve_rates with a memory: the demands of a GPU's ops are interned once (an id each), and each
// distinct problem (the ids in start order, each with its draining flag) is solved once. A GPU's
// running ops are a few kinds of kernel in a few combinations: the 2 M-kernel bench export (8
// overlapping streams) poses 27,000 distinct problems in 7.6 M solves. Exact: a problem remembered
// gives the rates and bindings solving it gives. Memory is bounded: past kMaxDemands distinct
// demands `intern` gives kNone (the caller solves those with solve_rates), past kMaxEntries problems
// or kMaxKeys ops in them (about 13 bytes an op: its key, rate and binding) the memory of problems
// starts over.
class RateSolver {
 public:
  RateSolver(std::uint32_t sm_count, double drain_weight) : sm_count_(sm_count), drain_weight_(drain_weight) {}
  // The id of a demand (its `draining` flag ignored: a problem's key carries it); kNone when
  // kMaxDemands are interned already.
  std::uint32_t intern(const ShareDemand& d);
  const ShareDemand& demand(std::uint32_t id) const { return demands_[id]; }
  static std::uint32_t key(std::uint32_t id, bool draining) { return id << 1 | (draining ? 1u : 0u); }
  struct Rates {
    const double* rate;
    const std::uint8_t* binding;  // as solve_rates' `binding`
  };
  // The rates of ops given by key(id, draining), in start order; valid until the next call.
  Rates solve(const std::uint32_t* keys, std::size_t n);
  // The rates of n ops in start order: `id(k)` op k's demand id (kNone: none interned),
  // `draining(k)` its flag, `demand(k)` its demand, asked only where some op has no id (then all
  // are solved by solve_rates, without the memory). Valid until the next call.
  template <class Id, class Draining, class Demand>
  Rates solve_ops(std::size_t n, Id&& id, Draining&& draining, Demand&& demand) {
    ops_keys_.clear();
    bool interned = true;
    for (std::size_t k = 0; k < n; ++k) {
      const std::uint32_t i = id(k);
      interned = interned && i != kNone;
      ops_keys_.push_back(key(i, draining(k)));
    }
    if (interned) return solve(ops_keys_.data(), n);
    scratch_.clear();
    for (std::size_t k = 0; k < n; ++k) {
      scratch_.push_back(demand(k));
      scratch_.back().draining = draining(k);
    }
    solve_rates(scratch_, sm_count_, scratch_rates_, &scratch_binding_, drain_weight_);
    return {scratch_rates_.data(), scratch_binding_.data()};
  }
  static constexpr std::size_t kMaxEntries = 1 << 18;
  static constexpr std::size_t kMaxDemands = 1 << 16;
  static constexpr std::size_t kMaxKeys = 1 << 22;

 private:
  struct Entry {
    std::uint64_t hash = 0;
    std::uint32_t at = 0, n = 0;  // keys_[at, at + n), rates_ and bindings_ alike
    bool used = false;
  };
  std::uint32_t sm_count_;
  double drain_weight_;
  std::vector<ShareDemand> demands_;
  std::vector<std::uint64_t> demand_hash_;
  std::vector<std::uint32_t> packed_;        // each demand's fields as words (intern compares them)
  std::vector<std::uint32_t> demand_slots_;  // open addressing over demands_ (kNone: free)
  std::vector<Entry> table_;                 // open addressing over problems (power of 2)
  std::size_t entries_ = 0;
  std::vector<std::uint32_t> keys_;
  std::vector<double> rates_;
  std::vector<std::uint8_t> bindings_;
  std::vector<std::uint32_t> ops_keys_;  // solve_ops' keys
  std::vector<ShareDemand> scratch_;
  std::vector<double> scratch_rates_;
  std::vector<std::uint8_t> scratch_binding_;
};

// Sets g.sharing_lost from the measured overlap of the trace's device ops (see the model card), in
// one pass over the ops in start order; kernels that started late behind a full GPU get their
// launch delays back (the engine holds them at rate 0 instead). A trace of `split_min_ops` ops or
// more is swept in two parts on two threads, split where no device op runs (the same result).
void calibrate_sharing(Graph& g, const ShareModel& m, std::size_t split_min_ops = 200000);

}  // namespace bneck
