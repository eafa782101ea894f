#pragma once
// FP8 recipes of the precision what-if (--precision fp8-tensor | fp8-row | fp8-block) and what they
// share with the autocast recipe.
#include <memory>
#include <string>
#include <vector>

#include "models/whatif/transform.hpp"

namespace bneck {

// The thread that launches the trace's first kernel: the forward's (autograd runs the backward's
// GEMMs on a thread of its own).
LaneId forward_lane(const Trace& t);
// A kernel launched from another thread than the forward's: the trace holds a backward pass.
bool has_backward(const Trace& t);

// The precision recipe the trace already runs, from its kernels weighted by time: "fp32", "tf32",
// "autocast-bf16" (bf16 GEMMs, fp32 norms and softmax), "bf16" (the whole model), "fp8 GEMMs", ...
std::string recipe_in_use(const Trace& t, const WorkTable& work);
// Refuses (InputError naming the trace) a precision the forecast's GPU has no math for: fp8 on an
// A100 or MI210, bf16 on a V100 or T4, TF32 before Ampere. `what` is the transform as given.
void require_math(const Trace& t, const GpuSpec& g, Dtype d, const std::string& what);

// A streaming (elementwise, copy, batch-norm) kernel of `d` that moved elements of `old_b` bytes,
// moving `new_b`-byte elements instead: its body (the time beyond the kernel tail) x the bytes'
// ratio x the ratio of the two access widths' achieved bandwidths. PyTorch's vectorized kernels
// keep 16-byte accesses; one element per thread kernels (cuDNN's and PyTorch's batch norm, the
// non-vectorized loops) drop to the element's width, which reaches less bandwidth.
TimeNs streaming_at(const std::string& name, TimeNs d, double old_b, double new_b, const GpuSpec& g);

// A kernel a convolution op launched (from its recorded shapes: the op's math, or cuDNN's FFT
// transforms, filter flips and layout transposes beside it).
bool conv_op_kernel(const KernelWork& w);
// A trace's convolution ops: each op's kernels (consecutive launches of one thread from one
// convolution op of one output size, in launch order) and its math kernels' summed duration when
// found (before a precision change moves them). Empty where the trace has no convolution.
struct ConvOps {
  std::vector<std::vector<OpId>> kernels;
  std::vector<double> math_before;
};
ConvOps conv_ops(const Trace& t, const WorkTable& work, const std::vector<TimeNs>& durations);
// cuDNN picks a convolution's algorithm per precision, and its helper kernels (FFT transforms,
// filter flips, layout transposes) with it: each helper (a conv op's kernel outside the compute
// classes) moves by the ratio of its op's math kernels' durations now (c.durations) and before.
void scale_conv_helpers(const ConvOps& ops, const WorkTable& work, WhatIfCase& c);

// cuDNN's tensor-core convolutions take NHWC tensors: in a program of NCHW tensors (PyTorch's
// default), a convolution with a filter wider than 1x1 or a stride, traced on NCHW kernels (fp32,
// no "nhwc" in its math kernel's name), runs under TF32 or a 16-bit type behind transposes of its
// input and filter (nchwToNhwcKernel) and of its output back (nhwcToNchwKernel); 1x1 convolutions
// run as GEMMs in place. Each transpose reads and writes its tensor once (elements x `elem`
// bytes x 2) at the streaming rate, plus a kernel tail, folded into the op's first math kernel; its
// launch (the trace's median launch call) into that kernel's call. Returns the transposes added.
// `channels_last`: the program's tensors become NHWC instead (torch.compile's layout optimization
// for graphs with convolutions) and every convolution traced on NCHW fp32 kernels, 1x1 ones too,
// keeps them behind a transpose of its input and of its output (and of its filter where wider than
// 1x1).
std::size_t add_conv_layout_transposes(const Trace& t, const ConvOps& ops, const WorkTable& work, const std::vector<bool>& hit, double elem,
                                       WhatIfCase& c, bool channels_last = false);

// scaling: "tensor", "row" or "block"; sel: the ops it applies to (empty: all); host: host time of
// one quantization kernel's launch.
std::unique_ptr<TransformStep> make_fp8_step(const std::string& scaling, std::string sel, TimeNs host);

// --precision autocast-bf16 / autocast-fp16 (autocast.cpp): dtype the lower precision, sel the ops
// it applies to, host a cast's host time (negative: the measured default).
std::unique_ptr<TransformStep> make_autocast_step(Dtype dtype, std::string sel, TimeNs host);

}  // namespace bneck
