// Model card: kernel classification and work estimation.
// Captures: what a kernel does (class from its name), in which precision and on which unit, and
//   how much work it does: FLOPs and bytes. From op shapes where the trace has them (PyTorch
//   `emit_nvtx(record_shapes=True)`: the innermost `aten::` range around the launch, with
//   `sizes = [[...]]`), else inferred from the measured duration on the source GPU (a memory-class
//   kernel moved duration x achievable bandwidth; a compute-class kernel did duration x peak x
//   efficiency), so that retargeting scales it by the ratio of the two GPUs' rates.
// Geometry (elementwise kernels without shapes, one element per thread: grid x block >= 2^20
//   threads, element type from the name's template argument): bytes = k x threads x E, with k the
//   whole number of arrays (reads + writes, 1..8) that explains the measured time at the
//   calibrated bandwidth of E-byte accesses; the model then predicts from k, E and the width's
//   efficiency (so a bf16 version or another GPU moves by the width's bandwidth, not by the
//   measured time).
// Equations: GEMM 2MNK FLOPs, bytes (MK + KN + MN) x E; attention forward 4 B H T S D FLOPs,
//   backward 2.5x; elementwise/norm/reduction: bytes = (inputs + output) x E, a few FLOPs/element.
//   An op's work is split evenly among the kernels it launched.
// Time (model_kernel): max(math, memory, chain) + kernel tail, with the launch geometry's wave
//   quantization; memory time stretched by memory-level parallelism at low occupancy (streaming
//   kernels with a known access width: memory_parallelism_factor), and a dependent chain per thread
//   (chain_ops, where known) taking chain x gpu.dependent_op_cycles / clock per wave of blocks.
// Valid: the PyTorch ops listed in kernel_work.cpp; other kernels fall back to inference. The
//   memory-parallelism factor assumes one access in flight per thread (no unrolled loads); GEMMs,
//   convolutions and attention are left out of it.
// Source: standard FLOP counts (e.g. the FlashAttention papers for attention).
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <unordered_map>
#include <vector>

#include "hw/spec.hpp"
#include "models/roofline.hpp"
#include "traces/ir.hpp"

namespace bneck {

enum class KernelClass : std::uint8_t { Gemm = 0, Conv, Attention, Elementwise, Reduction, Softmax, Norm, Communication, Copy, Other };
inline constexpr int kKernelClassCount = 10;
const char* to_string(KernelClass c);
KernelClass classify_kernel(std::string_view name);
// cuBLAS's own helpers around a split-K GEMM, launched inside the library's call: the output scaled
// by beta first (scal_kernel), the partial sums reduced and the bias added after (cublasLt's
// epilogue, splitKreduce). Streaming kernels (elementwise, reduction), no part of the GEMM's math,
// and no kernel a compiler fuses.
bool gemm_helper_kernel(std::string_view name);
bool is_compute_class(KernelClass c);  // GEMM, convolution, attention: bound by math when large
// Precision and unit from the kernel's name (template arguments, cuBLAS/cuDNN/nvjet tokens).
Dtype kernel_dtype(std::string_view name, Dtype fallback = Dtype::FP32);
// A GEMM whose weights are stored in 4 bits (or 6) and widened inside the kernel, by the kernel's
// name: mxfp4 / nvfp4 / e2m1 (OCP and NVIDIA microscaling), int4 and the weight-only kernels that
// carry them (w4a16, w4a8, wna16, Marlin, AWQ, GPTQ). Its compute runs in the activations' type
// (kernel_dtype), its weight traffic is already below fp8's.
bool low_bit_weight_gemm(std::string_view name);
ComputeUnit kernel_unit(std::string_view name, KernelClass c, Dtype d, const GpuSpec& g);

// The output tile of a GEMM kernel from its name ("nvjet_sm90_tst_192x128_...", "..._128x256_32x3_...",
// "tilesize128x128x8"): the first AxB with both 16..512; {0, 0} if none.
std::pair<int, int> gemm_tile(std::string_view name);

// `sizes = [[8, 1024, 2048], [], [2048]]` from an NVTX text; empty if none.
std::vector<std::vector<std::int64_t>> parse_nvtx_sizes(std::string_view text);

struct KernelWork {
  // (The one-byte fields first: 120 bytes; a trace keeps one per distinct work, WorkTable.)
  KernelClass cls = KernelClass::Other;
  Dtype dtype = Dtype::FP32;
  ComputeUnit unit = ComputeUnit::Simt;
  bool from_shapes = false;        // false: inferred from the measured duration
  bool from_geometry = false;      // bytes from the launch geometry (threads x element x arrays)
  MemLevel level = MemLevel::Hbm;  // where its working set streams from
  bool conv_spatial = false;       // a convolution's kernel: its filter wider than 1x1, or strided (shapes)
  // A forward convolution's kind for Inductor's layout choice (shapes; 0: not known): 1 default,
  // 2 grouped (groups > 1 and more than one input channel a group), 3 small (at most 64 output and
  // 64 input channels a group), 4 in-out (output channels at most half the input's, filter wider
  // than 1): torch/_inductor/graph.py's decide_layout_opt.
  std::uint8_t conv_kind = 0;
  double flops = 0, bytes = 0;
  double weight_elems = 0;                       // GEMM forward (addmm): elements of the weight operand (autocast casts it)
  Bytes access_width = 0;                        // bytes one thread moves per access, where known (launch geometry):
                                                 // the memory time uses the calibrated efficiency of that width
  double read_bytes = -1;                        // of `bytes`, those read (the rest written), where known: with an
                                                 // access width, reads and writes take their own calibrated rates
  double chain_ops = 0;                          // dependent arithmetic ops one thread runs one after another
                                                 // (a latency-bound loop), where known
  std::string_view op;                           // the aten op it came from, if any (op_name_of: stored once a process)
  double out_elems = 0;                          // elements of its op's output, where shapes say (GEMM, attention)
  double rhs_elems = 0;                          // GEMM: elements of its second operand (a forward GEMM's weight)
  double out_rows = 0, out_cols = 0, batch = 1;  // GEMM: its output's shape (row-major, as PyTorch)
  double tiles = 0;                              // GEMM: output tiles (the tile the kernel's name gives, over the output; 0: unknown)
};

// An aten op's name kept for the life of the process (a handful of distinct names), for KernelWork::op.
std::string_view op_name_of(std::string_view op);

// A GEMM of known shape (from the trace's shapes): its inner dimension; 0 where the shape is unknown.
double gemm_inner(const KernelWork& w);
// Whether a GEMM of known shape has an inner or output dimension off a multiple of 16 bytes of its
// elements (a vocabulary of 50257 in bf16): libraries run it on other, often much slower, kernels.
bool gemm_unaligned(const KernelWork& w);

// The efficiency `g` measured for GEMMs of this one's shape and precision (GpuSpec::gemm_samples),
// where the shape is known and measured near; the model then ignores the launch's grid.
std::optional<double> gemm_efficiency_by_shape(const KernelWork& w, const GpuSpec& g);

// How a launch geometry stretches the roofline's times on `g`: a grid of fewer blocks than SMs
// gets the fraction blocks/SMs of the rates (both times / f); a larger one divides the math time by
// its wave efficiency (occupancy from threads, registers and shared memory).
struct GridScaling {
  double compute = 1, memory = 1;  // multipliers of the roofline's compute and memory times
  double waves = 0, wave_efficiency = 1;
};
GridScaling grid_scaling(const LaunchConfig& lc, const GpuSpec& g);

// How much longer a streaming kernel takes to move its bytes at the occupancy of `lc` than at full
// occupancy (1 when the spec has no memory_latency). Each resident thread keeps one `width`-byte
// read in flight; by Little's law with queueing, the time to move B bytes is
//   t(I) = B / P x sqrt(1 + (P x L x r / I)^2)
// with P the achievable bandwidth, L the spec's memory_latency, r the share of reads in the traffic
// and I the bytes in flight over the GPU (SMs x resident threads x width): bandwidth-bound when I
// is large, latency-bound (t ~ B L / I) when small. The factor is t(I at this occupancy) / t(I at
// full occupancy): full-occupancy kernels keep their calibrated streaming rate.
double memory_parallelism_factor(const LaunchConfig& lc, const GpuSpec& g, Bytes width, double read_share);

struct KernelEstimate {
  TimeNs time_ns = 0;
  Bound bound = Bound::Memory;
  double waves = 0, wave_efficiency = 1;
};

// The model's time for kernel `k` of the trace, doing work `w`, on `hw`: the roofline of the work
// on the GPU's rates, with small grids (fewer blocks than SMs) getting the fraction blocks/SMs of
// those rates and larger ones dividing the math time by the wave efficiency, plus the kernel tail.
KernelEstimate model_kernel(const Trace& t, OpId k, const KernelWork& w, const HwSpec& hw);
// The same with launch geometry `lc` (nullptr: none known), e.g. a split kernel's smaller grid.
KernelEstimate model_kernel(const LaunchConfig* lc, const KernelWork& w, const HwSpec& hw);
// The same with a GEMM's efficiency by shape from `surfaces`' measured samples (another GPU of the
// same compute, gemm_pair_sibling) instead of hw's own; nullptr: hw's.
KernelEstimate model_kernel(const LaunchConfig* lc, const KernelWork& w, const HwSpec& hw, const GpuSpec* surfaces);

// Each op's work, indexed by op id, in 12 bytes an op instead of KernelWork's 120: an op's work is
// a template shared by the ops that do the same (interned: an op's class, precision and unit from
// its name, the work its shapes or launch geometry give) plus, for work inferred from the op's
// measured duration, its own amount (the flops of a compute-class kernel, else the bytes).
// Reading an op gives its KernelWork by value.
class WorkTable {
 public:
  WorkTable() = default;
  explicit WorkTable(std::size_t ops) : index_(ops, 0), amount_(ops, 0), templates_(1) {}
  explicit WorkTable(const std::vector<KernelWork>& each) : WorkTable(each.size()) {
    for (std::size_t i = 0; i < each.size(); ++i) set(i, each[i]);
  }
  KernelWork operator[](std::size_t op) const {
    KernelWork w = templates_[index_[op]];
    if (!w.from_shapes && !w.from_geometry) (is_compute_class(w.cls) ? w.flops : w.bytes) = amount_[op];
    return w;
  }
  std::size_t size() const { return index_.size(); }
  bool empty() const { return index_.empty(); }
  void resize(std::size_t ops) {  // ops added do default work
    if (templates_.empty()) templates_.emplace_back();
    index_.resize(ops, 0);
    amount_.resize(ops, 0);
  }
  // Op `op`'s work becomes `w` (interned; an inferred amount is kept apart).
  void set(std::size_t op, const KernelWork& w);
  // The amount of an op whose work is inferred (its template unchanged).
  void set_amount(std::size_t op, double amount) { amount_[op] = amount; }
  std::size_t templates() const { return templates_.size(); }

 private:
  std::uint32_t intern(const KernelWork& w);
  std::vector<std::uint32_t> index_;
  std::vector<double> amount_;
  std::vector<KernelWork> templates_;
  struct Hash {
    std::size_t operator()(const KernelWork& w) const;
  };
  struct Eq {
    bool operator()(const KernelWork& a, const KernelWork& b) const;
  };
  std::unordered_map<KernelWork, std::uint32_t, Hash, Eq> interned_;
};

// Work of every kernel of the trace (indexed by op id; non-kernels left default), with `source`
// the spec of the GPU the trace was captured on (for inference).
WorkTable estimate_work(const Trace& t, const HwSpec& source);
// The model's times of one kernel's work before and after a change of precision on one GPU: a GEMM
// by the measured shape surfaces where the GPU has one for both precisions, else both by the
// calibrated single efficiency of each (never one of each: their ratio would mix two rules).
// Where the GPU lacks a surface for one of the two, or its two come from different sources (two
// publications: two libraries' kernels), a GEMM of known shape takes the ratio of the two surfaces of
// a GPU of the same compute that measured both in one source (gemm_pair_sibling): one program's
// measurements on both sides of the ratio.
// `by_surfaces`, where given, says whether both times came from measured surfaces (own or sibling).
std::pair<TimeNs, TimeNs> model_kernel_pair(const Trace& t, OpId k, const KernelWork& before, const KernelWork& after, const HwSpec& hw,
                                            bool* by_surfaces = nullptr);
// A GPU of the same compute as `g` whose measured GEMM surfaces cover both precisions from one
// source: an installed or compiled-in spec with g's SM count, clock and peak rates of both (the H200
// beside the H100 SXM: one GH100). nullptr where `g` has such a pair itself or no such spec exists.
// Loaded once a process (thread-safe); installed specs are looked at before the presets, each in
// name order.
const HwSpec* gemm_pair_sibling(const GpuSpec& g, Dtype a, Dtype b);
// For a transform's log: "; GEMMs by the fp32/bf16 ratio of h200-sxm-calibrated's measured surfaces
// (...)" where a sibling prices the change, else "".
std::string gemm_pair_note(const GpuSpec& g, Dtype from, Dtype to);

}  // namespace bneck
