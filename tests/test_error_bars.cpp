// Error bars: the 80 % intervals of whatif forecasts hold on the references in validate/reference
// (docs/fidelity.md, "Error bars"), and their rules compute as the model card says.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <map>

#include "helpers.hpp"
#include "models/whatif/error_bar.hpp"

using namespace bneck;
using namespace bneck::test;

namespace {

struct Case {
  std::string family, trace, range;
  std::vector<std::string> args;
  double measured_ms;  // unprofiled median (or the measured pair's)
  bool held_out;       // not among the families' fit errors
};

std::vector<Case> reference_cases() {
  std::vector<Case> c;
  const std::string co = core("");
  c.push_back({"measured",
               co + "streams_base.sqlite",
               "round[1-5]",
               {"--scale", "2:name~k_compute"},
               measured_median(co + "streams_fast.sqlite", "round[1-5]") / 1e6,
               false});
  for (std::string p : {"fp32", "bf16"})
    for (std::string n : {"2", "4"})
      c.push_back({"fuse",
                   co + "chain.sqlite",
                   p + "_chain" + n,
                   {"--fuse", "range~" + p + "_chain" + n},
                   measured_median(co + "chain.sqlite", p + "_fused" + n) / 1e6,
                   false});
  c.push_back({"autocast",
               co + "block_fp32.sqlite",
               "step.*",
               {"--unprofile=off", "--precision", "autocast-bf16"},
               measured_median(co + "block_bf16.sqlite", "step.*") / 1e6,
               false});
  c.push_back({"cuda-graph",
               co + "decode_eager.sqlite",
               "tok.*",
               {"--cuda-graph"},
               measured_median(co + "decode_graph.sqlite", "tok.*") / 1e6,
               false});
  for (const char* size : {"268435456", "16777216"})
    c.push_back({"copies",
                 co + "memcpy.sqlite",
                 std::string("h2d_pageable_") + size,
                 {"--pin-memory"},
                 measured_median(co + "memcpy.sqlite", std::string("h2d_pinned_") + size) / 1e6,
                 false});
  for (const auto& m : hf_measured()) {
    c.push_back({"tf32", hf(m.workload), "step.*", {"--precision", "tf32"}, m.tf32_ms, false});
    c.push_back({"autocast", hf(m.workload), "step.*", {"--precision", "autocast-bf16"}, m.autocast_ms, false});
    c.push_back({"fuse", hf(m.workload), "step.*", {"--fuse", "auto"}, m.compile_ms, false});
  }
  // Held out: the Llama pairs (test_precision.cpp), the loops (validate/reference/h200/loops: medians
  // of the unprofiled processes), the parallel held-out sizes (test_parallel.cpp).
  const std::string ll = source_dir() + "/validate/reference/h200/hf_models/llama/";
  struct Llama {
    const char* w;
    double tf32, autocast, compile;
  };
  for (const Llama& l : {Llama{"llama_1b-inf-4x1024", 57.865, 50.146, 195.690}, Llama{"llama_1b-train-1x1024", 84.662, 94.440, 172.914}}) {
    const std::string p = ll + l.w + ".fp32.kineto.json.gz";
    c.push_back({"tf32", p, "step.*", {"--precision", "tf32"}, l.tf32, true});
    c.push_back({"autocast", p, "step.*", {"--precision", "autocast-bf16"}, l.autocast, true});
    c.push_back({"fuse", p, "step.*", {"--fuse", "auto"}, l.compile, true});
  }
  // The H100 pairs (validate/reference/h100/hf_autocast; test_precision.cpp), held out.
  const std::string hk = source_dir() + "/validate/reference/h100/hf_autocast/k/";
  struct H100 {
    const char* w;
    double tf32, autocast;
  };
  for (const H100& h : {H100{"bert_large-inf-8x512", 21.748, 24.278}, H100{"gpt2_large-inf-4x1024", 87.579, 87.904},
                        H100{"gpt2_large-train-1x1024", 112.071, 130.635}, H100{"opt_1.3b-inf-2x2048", 122.502, 121.089},
                        H100{"llama_1b-inf-4x1024", 63.339, 58.402}}) {
    const std::string p = hk + h.w + ".fp32.kineto.json.gz";
    c.push_back({"tf32", p, "step.*", {"--precision", "tf32"}, h.tf32, true});
    c.push_back({"autocast", p, "step.*", {"--precision", "autocast-bf16"}, h.autocast, true});
  }
  // The held-out families on H100 machines (validate/reference/h100/hf_heldout, h100/cnn_bn and
  // its pace2/; test_precision.cpp): TF32 and autocast of each, --fuse auto against torch.compile
  // where it ran (Phi-3's and ResNet-50's compile on another machine of the kind than their trace).
  struct Held {
    std::string dir;
    const char* w;
    double tf32, autocast, compile;  // compile 0: not run
  };
  const std::string hh = source_dir() + "/validate/reference/h100/";
  for (const Held& h :
       {Held{"hf_heldout", "gemma_2b-inf-4x1024", 89.090, 59.916, 428.801},
        Held{"hf_heldout", "phi3_mini-inf-2x1024", 94.006, 82.129, 347.539},
        Held{"hf_heldout", "vit_large-inf-32x224", 27.114, 24.490, 97.821}, Held{"hf_heldout", "vit_large-train-32x224", 97.868, 92.621, 0},
        Held{"hf_heldout", "resnet50-inf-64x224", 11.296, 8.845, 22.998}, Held{"hf_heldout", "resnet50-inf-16x224", 6.705, 8.394, 0},
        Held{"hf_heldout", "resnet50-train-32x224", 24.944, 23.059, 0},
        Held{"hf_heldout", "pythia_1.4b-inf-4x1024", 63.381, 53.369, 244.836},
        Held{"hf_heldout", "pythia_1.4b-train-1x1024", 110.097, 124.275, 0},
        Held{"hf_heldout", "bloom_1b1-inf-4x1024", 70.406, 55.813, 209.889},
        Held{"hf_heldout", "t5_large_enc-inf-8x512", 33.786, 33.546, 66.566}, Held{"cnn_bn", "resnet50-inf-8x224", 4.083, 5.838, 0},
        Held{"cnn_bn", "mobilenet_v2-inf-16x224", 9.302, 10.188, 0}, Held{"cnn_bn", "regnet_y-inf-16x224", 8.961, 14.853, 0},
        Held{"cnn_bn/pace2", "resnet50-inf-16x224", 6.728, 9.617, 0}, Held{"cnn_bn/pace2", "bert_large-inf-8x512", 25.719, 34.018, 0}}) {
    const std::string p = hh + h.dir + "/k/" + h.w + ".fp32.kineto.json.gz";
    c.push_back({"tf32", p, "step.*", {"--precision", "tf32"}, h.tf32, true});
    c.push_back({"autocast", p, "step.*", {"--precision", "autocast-bf16"}, h.autocast, true});
    // ResNet-50's compile at 64 images is a fit case of a convolutional network's fusion family.
    if (h.compile > 0) c.push_back({"fuse", p, "step.*", {"--fuse", "auto"}, h.compile, std::string(h.w) != "resnet50-inf-64x224"});
  }
  // torch.compile of convolutional networks and BERT-large (h100/compile_conv, its heldout/, and
  // h100/compiled_call/hf; test_precision.cpp): ResNet-50 64x224 the fit case, the others held out.
  const std::string cc = hh + "compile_conv/";
  c.push_back({"fuse", cc + "k/resnet50-inf-64x224.fp32.kineto.json.gz", "step.*", {"--fuse", "auto"}, 23.071, false});
  for (const auto& [w, ms] :
       {std::pair<const char*, double>{"resnet50-inf-16x224", 8.202}, {"mobilenet_v2-inf-16x224", 3.358}, {"regnet_y-inf-16x224", 15.549}})
    c.push_back({"fuse", cc + "heldout/k/" + w + ".fp32.kineto.json.gz", "step.*", {"--fuse", "auto"}, ms, true});
  // compile_conv/heldout2: other batch sizes on a third machine, captured after the fuse-conv family was fitted.
  for (const auto& [w, ms] :
       {std::pair<const char*, double>{"resnet50-inf-32x224", 13.225}, {"mobilenet_v2-inf-32x224", 3.517}, {"regnet_y-inf-8x224", 14.111}})
    c.push_back({"fuse", cc + "heldout2/k/" + w + ".fp32.kineto.json.gz", "step.*", {"--fuse", "auto"}, ms, true});
  c.push_back({"fuse", hh + "compiled_call/hf/bert_large-inf-8x512.fp32.kineto.json.gz", "step.*", {"--fuse", "auto"}, 62.570, true});
  // TF32 and torch.compile together (h100/tf32_compile, 2026-12-07, captured after every fit): TF32
  // alone and TF32 with --fuse auto against the same processes' TF32 and compiled TF32 medians.
  struct Tc {
    const char* run;
    const char* w;
    double tf32, compiled;  // the first: the precision alone (TF32 or autocast)
  };
  for (const Tc& x : {Tc{"run1", "bert_large-inf-8x512", 20.677, 16.793}, Tc{"run2", "gpt2_large-inf-4x1024", 87.809, 48.221},
                      Tc{"run2", "t5_large_enc-inf-8x512", 34.341, 18.214}, Tc{"run3", "bert_large-inf-8x512", 20.745, 16.810},
                      Tc{"run3", "vit_large-inf-32x224", 27.097, 24.724}}) {
    const std::string p = hh + "tf32_compile/" + x.run + "/k/" + x.w + ".fp32.kineto.json.gz";
    c.push_back({"tf32", p, "step.*", {"--precision", "tf32"}, x.tf32, true});
    c.push_back(
        {"tf32+fuse", p, "step.*", {"--precision", "tf32", "--fuse", "auto"}, x.compiled, false});  // the carrying rule was chosen on them
  }
  // run4 (2026-12-07, a fourth machine, after the rules above): held out.
  for (const Tc& x : {Tc{"run4", "pythia_1.4b-inf-4x1024", 62.001, 49.562}, Tc{"run4", "llama_1b-inf-4x1024", 64.038, 44.144},
                      Tc{"run4", "opt_1.3b-inf-2x2048", 121.965, 75.457}, Tc{"run4", "bloom_1b1-inf-4x1024", 70.034, 46.826}}) {
    const std::string p = hh + "tf32_compile/" + x.run + "/k/" + x.w + ".fp32.kineto.json.gz";
    c.push_back({"tf32", p, "step.*", {"--precision", "tf32"}, x.tf32, true});
    c.push_back({"tf32+fuse", p, "step.*", {"--precision", "tf32", "--fuse", "auto"}, x.compiled, true});
  }
  // bf16 autocast and torch.compile under it (h100/autocast_compile, 2026-12-07, captured after the
  // combination's rule): autocast alone and with --fuse auto against the same process's medians.
  for (const Tc& x : {Tc{"run1", "bert_large-inf-8x512", 23.535, 15.550}, Tc{"run1", "t5_large_enc-inf-8x512", 34.808, 12.855}}) {
    const std::string p = hh + "autocast_compile/" + x.run + "/k/" + x.w + ".fp32.kineto.json.gz";
    c.push_back({"autocast", p, "step.*", {"--precision", "autocast-bf16"}, x.tf32, true});
    c.push_back({"autocast+fuse", p, "step.*", {"--precision", "autocast-bf16", "--fuse", "auto"}, x.compiled, false});  // its family's fit
  }
  // run2 (captured at commit 7c2870c, another machine): GPT-2 large's compiled trace is where
  // autocast's activation casts made inside the compiled kernels were found (fuse.cpp), its
  // combined forecast the fit of that rule; with run1's, run2's combined forecasts are the fit of
  // the combination's own family (error_bar.cpp, "autocast+fuse"). run3 (captured after the cast
  // rule, a third machine): all held out.
  struct Ac {
    Tc x;
    bool held_fused;
  };
  for (const Ac& a :
       {Ac{{"run2", "vit_large-inf-32x224", 24.078, 15.718}, false}, Ac{{"run2", "gpt2_large-inf-4x1024", 87.625, 31.899}, false},
        Ac{{"run2", "pythia_1.4b-inf-4x1024", 51.714, 30.283}, false}, Ac{{"run2", "bloom_1b1-inf-4x1024", 54.504, 28.681}, false},
        Ac{{"run3", "bert_large-inf-8x512", 20.216, 11.112}, true}, Ac{{"run3", "t5_large_enc-inf-8x512", 33.630, 12.396}, true},
        Ac{{"run3", "llama_1b-inf-4x1024", 57.153, 28.650}, true}, Ac{{"run3", "opt_1.3b-inf-2x2048", 119.806, 49.908}, true}}) {
    const std::string p = hh + "autocast_compile/" + a.x.run + "/k/" + a.x.w + ".fp32.kineto.json.gz";
    c.push_back({"autocast", p, "step.*", {"--precision", "autocast-bf16"}, a.x.tf32, true});
    c.push_back({"autocast+fuse", p, "step.*", {"--precision", "autocast-bf16", "--fuse", "auto"}, a.x.compiled, a.held_fused});
  }
  const std::string lk = std::string(BNECK_TEST_DATA) + "/loops/k/";
  c.push_back({"copies", lk + "copy.pageable.json.gz", "step.*", {"--pin-memory"}, 1.945, true});
  c.push_back({"copies", lk + "stage.serial.json.gz", "step.*", {"--overlap-copies"}, 0.806, true});
  // Batched transfers (validate/reference/h200/copies; unprofiled medians of three processes): the
  // feats loop's two traces are the family's fit, the pinned feats loop and the metrics loop held out.
  const std::string cp = std::string(BNECK_TEST_DATA) + "/copies/";
  c.push_back({"batch-copies", cp + "feats.split.json", "step.*", {"--batch-copies"}, 0.535, false});
  c.push_back({"batch-copies", cp + "feats_split.sqlite", "step.*", {"--batch-copies"}, 0.535, false});
  c.push_back({"batch-copies", cp + "feats.split_pinned.json", "step.*", {"--batch-copies"}, 0.1886, true});
  c.push_back({"batch-copies", cp + "metrics.items.json", "step.*", {"--batch-copies"}, 0.756, true});
  c.push_back({"batch-copies", cp + "metrics_items.sqlite", "step.*", {"--batch-copies"}, 0.756, true});
  c.push_back({"autocast", lk + "host.fp32.json.gz", "step.*", {"--precision", "autocast-bf16"}, 3.88, true});
  c.push_back({"tf32", lk + "host.fp32.json.gz", "step.*", {"--precision", "tf32"}, 2.94, true});
  const std::string bb = lk + "bert_base-inf-1x128.fp32.kineto.json.gz", gm = lk + "gpt2_medium-inf-4x512.fp32.kineto.json.gz";
  c.push_back({"autocast", bb, "step.*", {"--precision", "autocast-bf16"}, 13.30, true});
  c.push_back({"tf32", bb, "step.*", {"--precision", "tf32"}, 9.23, true});
  c.push_back({"cuda-graph", bb, "step.*", {"--cuda-graph"}, 3.24, true});
  c.push_back({"autocast", gm, "step.*", {"--precision", "autocast-bf16"}, 18.43, true});
  c.push_back({"tf32", gm, "step.*", {"--precision", "tf32"}, 17.18, true});
  const std::string par = source_dir() + "/validate/reference/h200/parallel/",
                    ho = source_dir() + "/validate/reference/h200/parallel_heldout/";
  const std::vector<std::string> pp = {"--pipeline-parallel", "2", "--microbatch-range", "microbatch.*"};
  std::vector<std::string> pp1 = pp;
  pp1.insert(pp1.end(), {"--schedule", "1f1b"});
  struct Par {
    std::string dir, trace;
    std::vector<std::string> args;
    double ms;
    bool held;
  };
  for (const Par& p :
       {Par{par, "dp", {"--data-parallel", "2"}, 6.06, false}, Par{par, "tp", {"--tensor-parallel", "2"}, 3.36, false},
        Par{par, "pp", pp, 14.45, false}, Par{par, "pp", pp1, 14.38, false}, Par{ho, "dp", {"--data-parallel", "2"}, 11.81, true},
        Par{ho, "tp", {"--tensor-parallel", "2"}, 4.67, true}, Par{ho, "pp", pp, 21.37, true}, Par{ho, "pp", pp1, 20.81, true}})
    c.push_back({"parallel", p.dir + p.trace + "_1gpu_rank0.json.gz", "step.*", p.args, p.ms, p.held});
  return c;
}

}  // namespace

// Fit and held out together, 120 forecasts (59 until the H100 held-out families joined on
// 2026-12-06, 98 until the compiled convolutional networks and BERT-large, 103 until
// compile_conv/heldout2, 106 until tf32_compile and autocast_compile, 120 until autocast_compile's
// run2, 128 until its run3, 136 until tf32_compile's run4). At this commit: 137 of 144 inside (95
// %; the held-out 98 of 104), median half-width 13.8 % of the forecast, the widest 107 % (at 136:
// 130, 91 of 96 and 14.9 %; 131 inside, the held-out 96 of 101,
// while autocast with --fuse auto carried its two families: 30-50 % half-widths against errors
// under 8 % on run2 and run3; its own family now, 22 %, holds run3's four; at 128: 123, 88 of 93 and
// 13.0 %; at 120: 115, 81 of 86 and 11.0 %; 978 % the widest, and 116
// inside, while the profiler's cost taken out and a family's error carried into a combination were
// ratios of the forecast, not times: the host loop's TF32 below was inside at an upper end of 3.24
// ms, BERT-large's autocast with --fuse auto had 8.8 .. 76.5 ms around 11.2). (tf32_compile's
// TF32 with --fuse auto, the fit of carrying a family's error into a combination: 3 of 5 inside
// before it, 5 of 5 after; autocast_compile's four, captured after its first form, all inside.)
// Outside:
// autocast_compile run1's BERT-large with --fuse auto (-28.1 %: its compiled steps host-bound on a
// slow host; a fit case of the combination's family), OPT-1.3B's TF32 with --fuse auto
// (tf32_compile run4, -10.4 %: its attention's softmax run priced at 458 us against Triton's 792,
// the run's last kernel a small copy of another tensor, so its bytes are undercounted), RegNetY's TF32 and autocast (+202 / +118 %: its
// fp32 trace ran its host 2.6x slower than its process's other traces, h100/cnn_bn), ViT-L's --fuse auto against torch.compile (+1.7 % past
// a narrow interval), ResNet-50 16x224's (-12.2 %: its eager trace replays 11.6 % under its process's eager median) and the host loop's
// TF32 (1.75 ms forecast, 2.94 measured: the profiler's cost of its tight loop's events, 0.59 x the launch pace taken out, was about half
// that). The bar: 80 % inside, a median half-width of at most 15 %.
TEST_CASE("error bars: 80 % intervals hold on the references, and are not wider than they need", "[whatif][error_bar][e2e]") {
  if (!std::filesystem::exists(hf("bert_large-inf-8x512"))) {
    WARN("no unpacked hf_models traces: skipped");
    return;
  }
  std::size_t inside = 0, held = 0, held_inside = 0;
  std::vector<double> half;
  std::map<std::string, std::pair<int, int>> by_family;  // inside, all
  for (const Case& c : reference_cases()) {
    const WhatIfReport w = whatif_of(c.trace, c.range, c.args);
    const double lo = static_cast<double>(w.error_bar.low_ns) / 1e6, hi = static_cast<double>(w.error_bar.high_ns) / 1e6;
    const double p = static_cast<double>(w.predicted_ns) / 1e6;
    const bool in = lo <= c.measured_ms && c.measured_ms <= hi;
    INFO(c.trace << " " << c.args.back() << ": forecast " << p << " ms, interval " << lo << " .. " << hi << ", measured " << c.measured_ms);
    CHECK(lo < p);
    CHECK(p < hi);
    CHECK_FALSE(w.error_bar.basis.empty());
    inside += in;
    held += c.held_out;
    held_inside += c.held_out && in;
    half.push_back((hi - lo) / 2 / p);
    by_family[c.family].first += in;
    ++by_family[c.family].second;
  }
  const double coverage = static_cast<double>(inside) / static_cast<double>(half.size());
  INFO("coverage " << coverage << " (held out " << held_inside << " of " << held << "), median half-width " << median(half));
  CHECK(half.size() == 144);
  CHECK(coverage >= 0.8);
  CHECK(static_cast<double>(held_inside) / static_cast<double>(held) >= 0.8);
  CHECK(median(half) <= 0.15);
  for (const auto& [f, n] : by_family) {
    INFO(f << ": " << n.first << " of " << n.second);
    CHECK(static_cast<double>(n.first) / n.second >= 0.6);
  }
}

// The rules by hand: TF32's fit errors {0, -7.2, +9.9, -1.0 %}: mean b = +0.425 %, squared
// deviations 0.0018 + 58.14 + 89.78 + 2.03 = 150.13 (%^2), sample s = sqrt(150.13 / 3) = 7.074 %,
// w = t(0.9, 3) x s x sqrt(1 + 1/4) = 1.638 x 7.074 x 1.118 = 12.955 %. A forecast of 100 ms: the
// measured time in [100 / (1 + b + w), 100 / (1 + b - w)] = [88.20, 114.32] ms.
TEST_CASE("error bars: a family's prediction interval and its composition (hand-computed)", "[whatif][error_bar]") {
  const ErrorFamily f = family_stats("tf32", {0.000, -0.072, 0.099, -0.010});
  CHECK(f.bias == Approx(0.00425).margin(1e-6));
  CHECK(f.half_width == Approx(0.12955).epsilon(1e-3));
  const auto [lo, hi] = measured_interval(100, f.bias, f.half_width);
  CHECK(lo == Approx(88.20).epsilon(1e-3));
  CHECK(hi == Approx(114.32).epsilon(1e-3));
  // Fewer than 3 errors: no bias, 1.645 x their RMS ({+6.4, -5.3 %}: RMS 5.87 %, w 9.66 %).
  const ErrorFamily g = family_stats("cuda-graph", {0.064, -0.053});
  CHECK(g.bias == 0);
  CHECK(g.half_width == Approx(1.645 * std::sqrt((0.064 * 0.064 + 0.053 * 0.053) / 2)).epsilon(1e-6));
  // The table's families are those of docs/fidelity.md, each at least 1 % wide.
  for (const ErrorFamily& e : error_families()) {
    INFO(e.name);
    CHECK(e.n >= 2);
    CHECK(e.half_width >= 0.01);
  }
}

// Two transforms combined, the second's error carried 4x into the combined forecast (r as --fuse
// auto's after --precision tf32 on the transformers of validate/reference/h100/tf32_compile: 3.6-4.5),
// where it changes 32 % of that forecast (BERT-large: 5.3 of 16.4 ms). Fusion's fit errors (11):
// mean b = -1.218 %, sample s = 1.704 %, w = t(0.9, 10) x s x sqrt(1 + 1/11) = 1.372 x 1.704 x
// 1.0445 = 2.442 %; carried, b = 4 x -1.218 = -4.873 % and w = 9.768 % (under the 32 % it changes).
// --scale's family ({+0.2, +0.2 %}: under 3 errors, 1.645 x RMS = 0.33 %, raised to the 1 % floor),
// not carried (r 1). The carried one is an error in the time fusion changes: 9.768 ms around a
// forecast of 100 ms, beside --scale's ratio: [100 / (1 - 0.04873 + 0.01), 100 / (1 - 0.04873 -
// 0.01)] = [104.029, 106.239] ms around 100 / (1 - 0.04873) = 105.123, each side widened in
// quadrature: 105.123 - hypot(1.094, 9.768) = 95.29 and 105.123 + hypot(1.117, 9.768) = 114.95 ms
// (as a ratio w = sqrt(9.768^2 + 1^2) = 9.818 % gave 117.22 ms). Without the ratios: w =
// sqrt(2.442^2 + 1^2) = 2.639 %. Where fusion changes 5 % of the combined forecast, the carried
// half-width stops there: x 5 / 2.442 = 2.048, 5 ms, b = -2.494 %: [97.45, 107.67] ms.
TEST_CASE("error bars: a family's error carried into a combined forecast (hand-computed)", "[whatif][error_bar]") {
  const std::vector<Transform> trs = {parse_transform("scale", "2:name~gemm"), parse_transform("fuse", "auto")};
  ErrorContext ctx;
  ctx.carry_ratio = {1.0, 4.0};
  ctx.combined_share = {0.0, 0.32};
  const ErrorBar b = error_bar(trs, ctx, 100'000'000);
  CHECK(b.bias == Approx(-0.04873).margin(1e-5));
  CHECK(b.half_width == Approx(0.01).epsilon(1e-3));
  CHECK(b.additive == Approx(0.09768).epsilon(1e-3));
  CHECK(static_cast<double>(b.low_ns) / 1e6 == Approx(95.29).epsilon(1e-3));
  CHECK(static_cast<double>(b.high_ns) / 1e6 == Approx(114.95).epsilon(1e-3));
  REQUIRE(b.basis.size() == 2);
  CHECK(b.basis[0].find("fusion") == 0);
  CHECK(b.basis[0].find("(x4.00") != std::string::npos);
  ctx.combined_share = {0.0, 0.05};
  const ErrorBar capped = error_bar(trs, ctx, 100'000'000);
  CHECK(capped.additive == Approx(0.05).epsilon(1e-3));
  CHECK(capped.bias == Approx(-0.02494).margin(1e-5));
  CHECK(static_cast<double>(capped.low_ns) / 1e6 == Approx(97.45).epsilon(1e-3));
  CHECK(static_cast<double>(capped.high_ns) / 1e6 == Approx(107.67).epsilon(1e-3));
  // What it changes under its own family's width: not carried.
  ctx.combined_share = {0.0, 0.02};
  CHECK(error_bar(trs, ctx, 100'000'000).half_width == Approx(0.02639).epsilon(1e-3));
  ctx.carry_ratio = {};
  ctx.combined_share = {};
  CHECK(error_bar(trs, ctx, 100'000'000).half_width == Approx(0.02639).epsilon(1e-3));
  // A ratio under 1.05 is not carried; a target GPU's error never is (no held-out error for it
  // here: the widest family's, the same with a ratio of 4 or without).
  ctx.carry_ratio = {1.0, 1.04};
  ctx.combined_share = {0.0, 0.32};
  CHECK(error_bar(trs, ctx, 100'000'000).half_width == Approx(0.02639).epsilon(1e-3));
  const std::vector<Transform> hw = {parse_transform("hw", "b200"), parse_transform("fuse", "auto")};
  ErrorContext plain, carried;
  carried.carry_ratio = {4.0, 1.0};
  carried.combined_share = {0.9, 0.0};
  CHECK(error_bar(hw, carried, 100'000'000).half_width == Approx(error_bar(hw, plain, 100'000'000).half_width).epsilon(1e-9));
}

// The ratios from the whatif itself: r_i = F_i / F x |F_-i - F| / |B - F_i| (F_i: the transform
// alone, F_-i: the others, F: all, B: none). On BERT-large 8x512's fp32 trace (h100/tf32_compile):
// B 65.8 ms a step, TF32 alone 21.7, fusion alone 60.4, both 16.4: fusion's r = 60.4 / 16.4 x 5.3 /
// 5.4 = 3.6, TF32's 21.7 / 16.4 x 44.0 / 44.1 = 1.3. A target GPU is in every forecast (B too) and
// keeps its own error; a transform that changes nothing adds none of its family's error.
TEST_CASE("error bars: a combination's ratios from its forecasts, with a target GPU and a change that does nothing",
          "[whatif][error_bar][e2e]") {
  const std::string p = source_dir() + "/validate/reference/h100/tf32_compile/run1/k/bert_large-inf-8x512.fp32.kineto.json.gz";
  auto line = [](const WhatIfReport& w, const std::string& start) {
    for (const std::string& b : w.error_bar.basis)
      if (b.rfind(start, 0) == 0) return b;
    return std::string();
  };
  auto ratio = [](const std::string& b) {
    const std::size_t at = b.find("(x");
    return at == std::string::npos ? 1.0 : std::stod(b.substr(at + 2));
  };
  auto ms = [](const WhatIfReport& w) { return static_cast<double>(w.predicted_ns); };
  auto expected = [&](double from, double alone, double others, double all) {
    return alone / all * std::abs(others - all) / std::abs(from - alone);
  };
  const WhatIfReport both = whatif_of(p, "step.*", {"--precision", "tf32", "--fuse", "auto"});
  const WhatIfReport tf32 = whatif_of(p, "step.*", {"--precision", "tf32"});
  const WhatIfReport fuse = whatif_of(p, "step.*", {"--fuse", "auto"});
  const double from = static_cast<double>(both.baseline_ns);
  REQUIRE_FALSE(line(both, "TF32").empty());
  REQUIRE_FALSE(line(both, "fusion").empty());
  CHECK(ratio(line(both, "TF32")) == Approx(expected(from, ms(tf32), ms(fuse), ms(both))).epsilon(0.01));
  CHECK(ratio(line(both, "fusion")) == Approx(expected(from, ms(fuse), ms(tf32), ms(both))).epsilon(0.01));
  CHECK(ratio(line(both, "fusion")) > 3);
  auto width = [](const WhatIfReport& w) {
    return static_cast<double>(w.error_bar.high_ns - w.error_bar.low_ns) / static_cast<double>(w.predicted_ns);
  };
  CHECK(width(both) > width(tf32));
  REQUIRE_FALSE(line(tf32, "TF32").empty());
  CHECK(line(tf32, "TF32").find("combined") == std::string::npos);  // a single transform: as measured
  // On a target GPU: its line as measured; the others' ratios from forecasts on that GPU.
  const WhatIfReport hw = whatif_of(p, "step.*", {"--hw", "b200", "--precision", "tf32", "--fuse", "auto"});
  const WhatIfReport hw_only = whatif_of(p, "step.*", {"--hw", "b200", "--scale", "1:name~nothing"});
  const WhatIfReport hw_tf32 = whatif_of(p, "step.*", {"--hw", "b200", "--precision", "tf32"});
  const WhatIfReport hw_fuse = whatif_of(p, "step.*", {"--hw", "b200", "--fuse", "auto"});
  REQUIRE_FALSE(line(hw, "b200").empty());
  CHECK(line(hw, "b200").find("combined") == std::string::npos);
  CHECK(ratio(line(hw, "TF32")) == Approx(expected(ms(hw_only), ms(hw_tf32), ms(hw_fuse), ms(hw))).epsilon(0.01));
  CHECK(ratio(line(hw, "fusion")) == Approx(expected(ms(hw_only), ms(hw_fuse), ms(hw_tf32), ms(hw))).epsilon(0.01));
  // DDP's gradient compression on a trace with no all-reduce changes nothing: its family's error is
  // not added, beside TF32 (r = 0: alone it is the baseline to the ns, and TF32 alone is the
  // combination) or alone (the forecast is the baseline), and TF32's interval is its own.
  const WhatIfReport noop = whatif_of(p, "step.*", {"--precision", "tf32", "--grad-compress", "bf16"});
  REQUIRE(noop.error_bar.basis.size() >= 2);
  for (const std::string& b : noop.error_bar.basis) CHECK(b.find("combined") == std::string::npos);
  CHECK(noop.predicted_ns == tf32.predicted_ns);
  CHECK(line(noop, "--grad-compress").find("changes nothing") != std::string::npos);
  CHECK(noop.error_bar.low_ns == tf32.error_bar.low_ns);
  CHECK(noop.error_bar.high_ns == tf32.error_bar.high_ns);
  const WhatIfReport alone = whatif_of(p, "step.*", {"--grad-compress", "bf16"});
  CHECK(alone.predicted_ns == alone.baseline_ns);
  CHECK(line(alone, "--grad-compress").find("changes nothing") != std::string::npos);
  for (const std::string& b : alone.error_bar.basis) CHECK(b.find("measured error") == std::string::npos);
}

// The trace's own spread: the larger of its repeated ranges' measured and forecast coefficients of
// variation, x 1.282 (no transform: that alone). Forecasts per step 65.1 / 64.7 / 79.5 ms (Qwen2's
// under autocast): mean 69.77, sample s 8.43, CV 0.1208, w = 0.1549; the measured spans' CV 0.02
// is smaller. A forecast of 100 ms: [100 / 1.1549, 100 / 0.8451] = [86.59, 118.33] ms, its basis
// naming the forecasts.
TEST_CASE("error bars: the spread of the repeated ranges' forecasts widens the interval (hand-computed)", "[whatif][error_bar]") {
  ErrorContext ctx;
  ctx.spread = 0.02;
  ctx.spread_predicted = 0.1208;
  const ErrorBar b = error_bar({}, ctx, 100'000'000);
  CHECK(b.half_width == Approx(1.282 * 0.1208).epsilon(1e-6));
  CHECK(static_cast<double>(b.low_ns) / 1e6 == Approx(86.59).epsilon(1e-3));
  CHECK(static_cast<double>(b.high_ns) / 1e6 == Approx(118.33).epsilon(1e-3));
  REQUIRE(b.basis.size() == 1);
  CHECK(b.basis[0].find("forecasts") != std::string::npos);
  // Measured spans that spread more than the forecasts: theirs.
  ctx.spread = 0.05;
  ctx.spread_predicted = 0.01;
  CHECK(error_bar({}, ctx, 100'000'000).half_width == Approx(1.282 * 0.05).epsilon(1e-6));
}

// The profiler's cost taken out where the host runs the forecast: ResNet-50 at 16 images under TF32
// (validate/reference/h100/hf_heldout) kept its GPU busy 92 % of the forecast's span, but the host
// held 97 % of its critical path, and the profiler's cost taken out of each traced step (10.12 ->
// 7.01 ms) was 0.98x the 3.25 ms forecast. Its per-input cost varies 28 % between the programs it
// was measured on: 1.282 x 0.28 x 0.98 = 35.18 % of the forecast, 1.1433 ms, a time (the cost
// taken out was too large or too small by it), not a ratio. Alone: [3.25 - 1.1433, 3.25 + 1.1433]
// ms, its low end held at the GPU's 92 % of 3.25 = 2.99 ms: [2.99, 4.3933] ms (as a ratio it was
// [3.25 / 1.3518, 3.25 / 0.6482] = [2.40, 5.01] ms). With the trace's spread of 5 % beside it (w
// = 6.41 %: [3.25 / 1.0641, 3.25 / 0.9359] = [3.0542, 3.4726] ms), each side widened in quadrature
// around 3.25 ms: 3.25 + hypot(0.2226, 1.1433) = 4.4148 ms, and 3.25 - hypot(0.1958, 1.1433) =
// 2.0901 held at 0.92 x 3.0542 = 2.8099 ms. With the host off the path (a GPU-bound forecast)
// nothing is added.
TEST_CASE("error bars: the profiler's cost taken out widens a forecast the host runs by a time (hand-computed)", "[whatif][error_bar]") {
  ErrorContext ctx;
  ctx.gpu_busy_after = 0.92;
  ctx.host_on_path = 0.97;
  ctx.profiler_share = 0.98;
  ctx.profiler_cv = 0.28;
  const ErrorBar b = error_bar({}, ctx, 3'250'000);
  CHECK(b.half_width == 0);
  CHECK(b.additive == Approx(1.282 * 0.28 * 0.98).epsilon(1e-6));
  CHECK(static_cast<double>(b.low_ns) / 1e6 == Approx(2.99).epsilon(1e-4));
  CHECK(static_cast<double>(b.high_ns) / 1e6 == Approx(4.3933).epsilon(1e-4));
  REQUIRE(b.basis.size() == 1);
  CHECK(b.basis[0].find("profiler") != std::string::npos);
  CHECK(b.basis[0].find("in time") != std::string::npos);
  ctx.spread = 0.05;
  const ErrorBar s = error_bar({}, ctx, 3'250'000);
  CHECK(s.half_width == Approx(1.282 * 0.05).epsilon(1e-6));
  CHECK(static_cast<double>(s.low_ns) / 1e6 == Approx(2.8099).epsilon(1e-4));
  CHECK(static_cast<double>(s.high_ns) / 1e6 == Approx(4.4148).epsilon(1e-4));
  // A range of half the forecast keeps the same fractions (scaled_bar).
  const ErrorBar r = scaled_bar(s, 1'625'000);
  CHECK(static_cast<double>(r.high_ns) / 1e6 == Approx(4.4148 / 2).epsilon(1e-4));
  // Where the removed cost is 4x the forecast (a with_stack profile's), the interval stays within
  // the forecast -+ that time: [0.95, 1 + 1.282 x 0.3 x 4.01] x the forecast, no longer [0.40, 20]x.
  ErrorContext big;
  big.gpu_busy_after = 0.95;
  big.host_on_path = 1;
  big.profiler_share = 4.01;
  big.profiler_cv = 0.3;
  const ErrorBar g = error_bar({}, big, 1'000'000);
  CHECK(static_cast<double>(g.low_ns) / 1e6 == Approx(0.95).epsilon(1e-4));
  CHECK(static_cast<double>(g.high_ns) / 1e6 == Approx(1 + 1.282 * 0.3 * 4.01).epsilon(1e-4));
  ctx.host_on_path = 0.1;
  for (const std::string& why : error_bar({}, ctx, 3'250'000).basis) CHECK(why.find("profiler") == std::string::npos);
}
