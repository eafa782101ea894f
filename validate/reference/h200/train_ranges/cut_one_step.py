#!/usr/bin/env python3
"""One profiled training step cut from train_kineto.json.gz (4 ProfilerStep#N steps): the host events
inside ProfilerStep#5's window, the device ops their calls launched, and the metadata; written as
one_step.json.gz, and as one_step_bare.json.gz without the step ranges and user annotations (a
profile of one step with nothing marking it).
Usage: validate/reference/h200/train_ranges/cut_one_step.py   (run in this folder's repository)
"""
import gzip, json, os

here = os.path.dirname(os.path.abspath(__file__))
d = json.load(gzip.open(os.path.join(here, "train_kineto.json.gz")))
ev = d["traceEvents"]
steps = sorted((e for e in ev if e.get("name", "").startswith("ProfilerStep#")), key=lambda e: e["ts"])
t0, t1 = steps[1]["ts"], steps[1]["ts"] + steps[1]["dur"]
device = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
keep, corr = [], set()
for e in ev:
    if e.get("ph") == "X" and e.get("cat") not in device and t0 <= e["ts"] <= t1:
        keep.append(e)
        if e.get("args", {}).get("correlation") is not None:
            corr.add(e["args"]["correlation"])
for e in ev:
    if e.get("ph") != "X":
        keep.append(e)
    elif e.get("cat") in device[:3] and e.get("args", {}).get("correlation") in corr:
        keep.append(e)
d["traceEvents"] = keep
with gzip.open(os.path.join(here, "one_step.json.gz"), "wt") as f:
    json.dump(d, f)
d["traceEvents"] = [e for e in keep if not (e.get("name", "").startswith("ProfilerStep#") or e.get("cat") in ("user_annotation", "gpu_user_annotation"))]
with gzip.open(os.path.join(here, "one_step_bare.json.gz"), "wt") as f:
    json.dump(d, f)
