#!/usr/bin/env python3
"""GEMM efficiency of the H200 by shape and precision, from gemm.csv (run_gemm.sh), into
hw/calibrated/h200-sxm-calibrated.json's gpu.gemm_samples (fp32, tf32, bf16; fp16 takes bf16's).

Each row: efficiency = 2 B M K N / kernel time (CUPTI, its split-K memset included) / the preset's
dense peak of that precision (fp32 SIMT 66.9, TF32 494.7, bf16 989.4 TFLOP/s), as
(log2 batch, log2 output rows, log2 inner, log2 output columns, efficiency): bneck's GemmSurface,
the median of the 7 nearest samples in log2 space (hw/spec.cpp). A shape is held out when the FNV-1a
hash of "B,M,K,N" mod 10 is 7 or more (the rule of validate/external/fit_neusight.py); the rest are
the samples. Prints the held-out median |error| of the time per precision, and of the calibrated
single-efficiency fit (gpu.gemm_fit) on the same rows for comparison.
Run after `bneck calibrate` (which rewrites the overlay).
Usage: validate/reference/h200/gemm/fit_gemm.py [gemm.csv]
"""
import csv, json, math, os, statistics, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "validate", "external"))
from fit_neusight import K_NEAREST, held_out, nearest_efficiency, write_overlay  # noqa: E402

PEAK = {"fp32": 66.9e12, "tf32": 494.7e12, "bf16": 989.4e12}  # hw/presets/h100-sxm.json, dense
SOURCE = "H200 sweep (validate/reference/h200/gemm)"  # one program, one library: ratios of its surfaces are consistent


def main(path):
    overlay_path = os.path.join(ROOT, "hw", "calibrated", "h200-sxm-calibrated.json")
    with open(overlay_path) as f:
        overlay = json.load(f)
    fit = overlay["gpu"]["gemm_fit"]
    samples, report = {}, []
    with open(path) as f:
        rows = list(csv.DictReader(f))
    for dt in ("fp32", "tf32", "bf16"):
        train, test = [], []
        for r in rows:
            if r["dtype"] != dt or not r["kernel_ms"] or r["kernel_ms"] == "nan":
                continue
            b, m, k, n = (int(r[x]) for x in ("B", "M", "K", "N"))
            s = float(r["kernel_ms"]) * 1e-3
            eff = 2 * b * m * k * n / s / PEAK[dt]
            x = (math.log2(b), math.log2(m), math.log2(k), math.log2(n))
            (test if held_out(f"{b},{m},{k},{n}") else train).append((x, eff))
        rows_out = [[round(v, 4) for v in x] + [round(e, 4)] for x, e in train]
        samples[dt] = {"nearest": K_NEAREST, "source": SOURCE, "rows": rows_out}
        err = [abs(e / nearest_efficiency(rows_out, x) - 1) for x, e in test]  # time error = efficiency ratio
        flat = float(fit[dt]["efficiency"])
        err_fit = [abs(e / flat - 1) for x, e in test]
        report.append(f"{dt}: {len(train)} samples, {len(test)} held out: median |error| {100 * statistics.median(err):.1f} % "
                      f"(the single efficiency {flat}: {100 * statistics.median(err_fit):.1f} %)")
    samples["fp16"] = "bf16"
    overlay["gpu"]["gemm_samples"] = samples
    # GEMMs with an inner or output dimension off a multiple of 16 bytes (gemm_align.csv): their own
    # surface (the library runs other kernels), checked against the aligned surface on held-out rows.
    overlay.setdefault("sources", {})
    apath = os.path.join(os.path.dirname(path), "gemm_align.csv")
    if os.path.exists(apath):
        with open(apath) as f:
            arows = list(csv.DictReader(f))
        unaligned = {}
        for dt in ("fp32", "tf32", "bf16"):
            per16 = 8 if dt == "bf16" else 4
            train, test = [], []
            for r in arows:
                if r["dtype"] != dt or not r["kernel_ms"] or r["kernel_ms"] == "nan":
                    continue
                m, k, n = (int(r[x]) for x in ("M", "K", "N"))
                if k % per16 == 0 and n % per16 == 0:
                    continue
                eff = 2 * m * k * n / (float(r["kernel_ms"]) * 1e-3) / PEAK[dt]
                x = (0.0, math.log2(m), math.log2(k), math.log2(n))
                (test if held_out(f"1,{m},{k},{n}") else train).append((x, eff))
            rows_out = [[round(v, 4) for v in x] + [round(e, 4)] for x, e in train]
            unaligned[dt] = {"nearest": 3, "source": SOURCE, "rows": rows_out}
            err = [abs(e / nearest_efficiency(rows_out, x, 3) - 1) for x, e in test]
            err_al = [abs(e / nearest_efficiency(samples[dt]["rows"], x) - 1) for x, e in test]
            report.append(f"{dt} unaligned: {len(train)} samples, {len(test)} held out: median |error| "
                          f"{100 * statistics.median(err):.1f} % (the aligned surface: {100 * statistics.median(err_al):.1f} %)")
        unaligned["fp16"] = "bf16"
        overlay["gpu"]["gemm_samples_unaligned"] = unaligned
        overlay["sources"]["gpu.gemm_samples_unaligned"] = (
            "validate/reference/h200/gemm (gemm_align.py on one H200, 2026-12-03: torch.matmul with an inner or output dimension "
            "off a multiple of 16 bytes, CUPTI kernel times), fitted by fit_gemm.py on the shapes not held out; "
            + "; ".join(r for r in report if "unaligned" in r))
    overlay.setdefault("sources", {})["gpu.gemm_samples"] = (
        "validate/reference/h200/gemm (run_gemm.sh on one H200, 2026-12-03: torch.matmul / bmm kernel times by CUPTI, "
        "fp32, TF32, bf16; fp16 takes bf16's), fitted by fit_gemm.py on the shapes not held out; "
        + "; ".join(r for r in report if "unaligned" not in r))
    write_overlay(overlay, overlay_path + ".tmp")
    os.replace(overlay_path + ".tmp", overlay_path)
    print("\n".join(report))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "gemm.csv"))
