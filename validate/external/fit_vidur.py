#!/usr/bin/env python3
"""Adds fp16/bf16 GEMM efficiency by shape to bneck's overlays of the A100 SXM 80 GB and the H100 SXM
from Vidur's published per-op profiles (github microsoft/vidur @ 7d475133, data/profiling/compute:
`mlp__{a100,h100}_meta-llama_Llama-2-{7b,70b}-hf.csv`, FP16, "A100 80GB DGX" and "H100 DGX"; the
median of each op's timings, ms).

Each row's four projections of one decoder layer are GEMMs of known shape (tokens T, tensor
parallel degree t, head dim d = n_embd / n_head):
  attn_pre_proj  T x n_embd  @ n_embd x (n_head + 2 n_kv_head) d / t
  attn_post_proj T x n_embd / t @ n_embd / t x n_embd
  mlp_up_proj    T x n_embd  @ n_embd x 2 n_expanded_embd / t   (gated: gate and up together)
  mlp_down_proj  T x n_expanded_embd / t @ n_expanded_embd / t x n_embd
efficiency = 2 M K N / time / the preset's dense fp16 tensor peak. A shape is held out by the rule
fit_neusight.py uses (FNV-1a of "B,M,N,K" mod 10 >= 7); the rest become gemm_samples.fp16 (and
bf16: the same tensor cores and peak on these GPUs; said in the sources) and the held-out median
|error| of the nearest-shapes rule becomes held_out_error."gemm fp16".
NCCL: `net__{a100,h100}_dgx_{all_reduce,send_recv}.csv` (NCCL kernel time vs message size, fp16
buffers, GPUs of one node): the two-GPU rows become node.collectives.{all_reduce,send_recv} (the
median time per size at 12 sizes, 8 B .. 1 GiB nearest available, as a curve, its first point the
latency, the bus bandwidth from the largest two sizes); the 4- and 8-GPU all-reduce rows are held
out (bneck moves the two-GPU curve to N by NCCL's ring steps and bus factor; tests/test_cross_gpu.cpp).
Run after fit_neusight.py (which rewrites the H100 overlay): this merges into the overlays.
Usage: validate/external/fit_vidur.py VIDUR_DIR   ($BNECK_EXTRA_TRACES/external/vidur)
"""
import csv, json, math, os, statistics, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fit_neusight import ROOT, K_NEAREST, held_out, nearest_efficiency, preset, quantity, write_overlay  # noqa: E402

GPUS = {"a100": ("a100-sxm-80gb", "A100 80GB DGX"), "h100": ("h100-sxm", "H100 DGX")}
MODELS = ("Llama-2-7b-hf", "Llama-2-70b-hf")


def gemms(r):
    nh, nkv, e, f = (int(float(r[k])) for k in ("n_head", "n_kv_head", "n_embd", "n_expanded_embd"))
    t, tok = int(float(r["num_tensor_parallel_workers"])), int(float(r["num_tokens"]))
    d = e // nh
    up = (2 if r["use_gated_mlp"].strip().lower() == "true" else 1) * f // t
    for op, (k, n) in {"attn_pre_proj": (e, (nh + 2 * nkv) * d // t), "attn_post_proj": (e // t, e),
                       "mlp_up_proj": (e, up), "mlp_down_proj": (f // t, e)}.items():
        ms = r.get(f"time_stats.{op}.median", "")
        if ms:
            yield tok, k, n, float(ms) * 1e-3


def nccl_curve(path, ranks):
    """Median time (s) per message size (bytes) of the rows on `ranks` GPUs of one node."""
    by = {}
    with open(path) as fh:
        for r in csv.DictReader(fh):
            if int(r["num_workers"]) == ranks and int(r["devices_per_node"]) == ranks:
                by.setdefault(int(r["size"]), []).append(float(r[[k for k in r if k.endswith(".median")][0]]) * 1e-3)
    return {size: statistics.median(v) for size, v in sorted(by.items())}


def fit_collective(curve, ranks):
    sizes = sorted(curve)
    picks = []
    for target in [2048 * 4**i for i in range(10)]:
        best = min(sizes, key=lambda z: abs(math.log2(z) - math.log2(target)))
        if best not in picks:
            picks.append(best)
    picks.sort()
    pts = [[f"{z} B", f"{round(curve[z] * 1e9)} ns"] for z in picks]
    # No time may fall with size on the curve (the interpolation reads it as monotone).
    for i in range(1, len(pts)):
        if int(pts[i][1].split()[0]) < int(pts[i - 1][1].split()[0]):
            pts[i][1] = pts[i - 1][1]
    a, b = picks[-2], picks[-1]
    bus = (b - a) / max(1e-12, curve[b] - curve[a]) * 2 * (ranks - 1) / ranks  # all-reduce's bus factor (send/recv: 2 GPUs, 1)
    return {"bus_bandwidth": f"{bus / 1e9:.6g} GB/s", "curve": pts, "latency": pts[0][1], "ranks": ranks}


def main(vdir):
    for key, (name, label) in GPUS.items():
        _, field = preset(name)
        peak = quantity(field("gpu", "peak", "fp16", "tensor"))
        samples, held, seen = [], [], set()
        for model in MODELS:
            with open(os.path.join(vdir, f"mlp__{key}_meta-llama_{model}.csv")) as fh:
                for r in csv.DictReader(fh):
                    for m, k, n, sec in gemms(r):
                        shape = f"1,{m},{k},{n}"
                        if shape in seen or sec <= 0:
                            continue
                        seen.add(shape)
                        x, flops = (0.0, math.log2(m), math.log2(k), math.log2(n)), 2.0 * m * k * n
                        if held_out(shape):
                            held.append((x, flops, sec))
                        else:
                            samples.append((*x, flops / sec / peak))
        errs = [abs(flops / (peak * nearest_efficiency(samples, x)) / sec - 1) for x, flops, sec in held]
        err = round(statistics.median(errs), 4)
        path = os.path.join(ROOT, "hw", "calibrated", name + "-calibrated.json")
        if os.path.exists(path):
            with open(path) as fh:
                ov = json.load(fh)
        else:
            ov = {"name": name + "-calibrated", "extends": name,
                  "description": field("description") + "; fp16/bf16 GEMM efficiencies by shape fitted to Vidur's published profiles",
                  "gpu": {}, "sources": {}}
        g = ov.setdefault("gpu", {})
        surface = {"nearest": K_NEAREST, "source": "Vidur", "columns": ["log2 batch", "log2 output rows", "log2 inner", "log2 output columns", "efficiency"],
                   "rows": [[round(v, 4) for v in s] for s in sorted(samples)]}
        g.setdefault("gemm_samples", {})["fp16"] = surface
        g["gemm_samples"]["bf16"] = "fp16"  # the same measurements
        g.setdefault("held_out_error", {})["gemm fp16"] = err
        src = (f"Vidur's per-op profiles (github microsoft/vidur @ 7d475133, data/profiling/compute), {label}, FP16, Llama-2 7B and "
               f"70B decoder projections at 1-4096 tokens and tensor parallel 1-8: {len(samples)} training shapes (FNV-1a of the shape "
               f"mod 10 < 7), held-out median |error| {err * 100:.1f} % over {len(held)} shapes; bf16 given the fp16 figures (the same "
               f"tensor cores and peak)")
        srcs = ov.setdefault("sources", {})
        for k, text in (("gpu.gemm_samples", src), ("gpu.held_out_error", "gemm fp16: " + src)):
            old = srcs.get(k, "").split(" | Vidur")[0].split(" | gemm fp16: Vidur")[0]
            srcs[k] = old + " | " + text if old else text
        node = ov.setdefault("node", {}).setdefault("collectives", {})
        notes = []
        for kind, ranks in (("all_reduce", 2), ("all_reduce", 8), ("send_recv", 2)):
            curve = nccl_curve(os.path.join(vdir, f"net__{key}_dgx_{kind}.csv"), ranks)
            if curve:
                name_k = kind if ranks == 2 else f"{kind}@{ranks}"
                node[name_k] = fit_collective(curve, ranks)
                notes.append(f"{name_k} on {ranks} GPUs: {node[name_k]['bus_bandwidth']} bus, {node[name_k]['latency']} first")
        if notes:
            srcs["node.collectives"] = (f"Vidur's NCCL profiles (github microsoft/vidur @ 7d475133, data/profiling/network), {label}, "
                                        f"GPUs of one node: " + "; ".join(notes) + "; the 4-GPU all-reduce rows held out")
        write_overlay(ov, path)
        print(f"{name}: fp16 GEMM by shape, {len(samples)} training shapes, held out {len(held)}: median |error| {err * 100:.1f} %")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "..", "shared", "external", "vidur"))
