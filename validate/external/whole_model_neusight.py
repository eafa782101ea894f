#!/usr/bin/env python3
"""Whole-model forecasts of NeuSight's released end-to-end labels from H200 traces, and each GPU's
median |error| into its overlay (hw/calibrated/<preset>-calibrated.json: gpu.held_out_error["whole
model"], which `--hw` prints and its interval takes in).

NeuSight released the whole-model latencies of two workloads on every GPU it measured
(labels/labels_e2e_calibration.csv: gpt3_xl and opt_13, fp32 eager, TF32 off, inference = forward
under no_grad, training = forward + loss.backward(), CUDA events, mean of the 5 fastest of 25) and
the same two timed the same way on one H200 (labels/h200_e2e_calibration.csv). bneck's H200 traces of
them (validate/reference/h200/loops/neusight.tar.xz: Kineto with shapes, inference 2 x 2048,
training 1 x 2048) are forecast on each GPU: forecast = the H200's label x predicted / baseline
(`bneck whatif TRACE --range 'step.*' --hw GPU`, with `--batch K` for the labels' larger batches).
What these rows decided, and so do not check: the L4's GEMM level (fit_neusight.py PER_OP_LEVEL).
The other workloads NeuSight measured stay held out.

Run after fit_neusight.py and fit_vidur.py (which rewrite the overlays without this field).
Usage: validate/external/whole_model_neusight.py BNECK NEUSIGHT_DIR
  BNECK: the bneck executable; NEUSIGHT_DIR: $BNECK_EXTRA_TRACES/external/neusight
"""
import csv, json, os, statistics, subprocess, sys, tarfile, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fit_neusight import write_overlay  # noqa: E402

GPUS = {
    "NVIDIA_A100-PCIE-40GB": "a100-pcie-40gb",
    "NVIDIA_A100_80GB_PCIe": "a100-pcie-80gb",
    "NVIDIA_H100_80GB_HBM3": "h100-sxm",
    "NVIDIA_L4": "l4",
    "Tesla_T4": "t4",
    "Tesla_P100-PCIE-16GB": "p100-pcie-16gb",
    "Tesla_V100-PCIE-32GB": "v100-pcie-32gb",
}
TRACED_BATCH = {"inf": 2, "train": 1}


def forecasts(bneck, ndir, traces):
    h200 = {}
    with open(os.path.join(ndir, "labels", "h200_e2e_calibration.csv"), encoding="utf-8-sig") as f:
        for r in csv.DictReader(f):
            h200[(r["model"], r["mode"], int(r["batch"]))] = float(r["e2e_ms"])
    rows = []
    with open(os.path.join(ndir, "labels", "labels_e2e_calibration.csv"), encoding="utf-8-sig") as f:
        for r in csv.DictReader(f):
            dev = r.get("device") or r.get("Device")
            if dev not in GPUS:
                continue
            model, mode, batch = r["model"], r["mode"], int(r["batch"])
            base = TRACED_BATCH[mode]
            if (model, mode, base) not in h200 or batch % base:
                continue
            trace = os.path.join(traces, f"{model}-{mode}-{base}x2048.fp32.kineto.json.gz")
            args = [bneck, "whatif", trace, "--range", "step.*", "--hw", GPUS[dev], "--json", "-"]
            if batch != base:
                args[5:5] = ["--batch", str(batch // base)]
            d = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
            f_ms = h200[(model, mode, base)] * d["predicted_ns"] / d["baseline_ns"]
            rows.append((dev, model, mode, batch, f_ms, float(r["e2e_ms"])))
    return rows


def main(bneck, ndir):
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(os.path.join(ROOT, "validate", "reference", "h200", "loops", "neusight.tar.xz")) as t:
            t.extractall(tmp)
        rows = forecasts(bneck, ndir, os.path.join(tmp, "k"))
    by = {}
    for dev, model, mode, batch, f, m in rows:
        print(f"{dev:24s} {model:8s} {mode:5s} batch {batch}: forecast {f:8.1f} ms, measured {m:8.1f} ms, {100 * (f / m - 1):+6.1f} %")
        by.setdefault(dev, []).append(abs(f / m - 1))
    for dev, errs in by.items():
        name = GPUS[dev]
        path = os.path.join(ROOT, "hw", "calibrated", name + "-calibrated.json")
        with open(path) as f:
            out = json.load(f)
        med = round(statistics.median(errs), 4)
        out["gpu"].setdefault("held_out_error", {})["whole model"] = med
        out["sources"]["gpu.held_out_error"] = (out["sources"].get("gpu.held_out_error", "") + "; whole model: median |error| of "
                                                f"{len(errs)} forecasts of NeuSight's released gpt3_xl / opt_13 labels from H200 traces "
                                                "(validate/external/whole_model_neusight.py)")
        write_overlay(out, path)
        print(f"{name}: whole model median |error| {med * 100:.1f} % over {len(errs)} rows")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
