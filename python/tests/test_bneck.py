"""The Python package against the command line (run by ctest after `pip install .`)."""
import json
import os
import subprocess

import pytest

import bneck

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.path.join(ROOT, "traces", "data", "demo_pipeline.sqlite")
CONFIG = os.path.join(ROOT, "validate", "reference", "h200", "serving", "config.json")


def cli(*args):
    exe = os.environ.get("BNECK_EXE", "bneck")
    return json.loads(subprocess.run([exe, *args, "--json", "-"], check=True, capture_output=True, text=True).stdout)


def test_replay_matches_the_cli():
    t = bneck.load(DEMO)
    assert t.op_count > 0 and "nsys" in t.format
    r = t.replay(range="iter.*")
    assert r.makespan_ns == r["makespan_ns"] == cli("replay", DEMO, "--range", "iter.*")["makespan_ns"]
    assert len(r.ranges) == 6


def test_whatif_and_sweep():
    t = bneck.load(DEMO)
    w = t.whatif(["--scale", "2:kind=kernel"], range="iter.*")
    assert w.predicted_ns < w.baseline_ns
    assert w.predicted_ns == t.whatif("--scale 2:kind=kernel", range="iter.*").predicted_ns
    # The 80 % interval around the forecast, with its sources (as whatif --json).
    assert w.error_bar["low_ns"] < w.predicted_ns < w.error_bar["high_ns"] and w.error_bar["basis"]
    assert all(r["error_bar"]["low_ns"] < r["predicted_ns"] < r["error_bar"]["high_ns"] for r in w.ranges)
    s = t.sweep(hw=["h200-sxm", "h100-sxm"], scenarios={"fast": ["--scale", "2:kind=kernel"]}, range="iter.*")
    assert [(c["hw"], c["scenario"]) for c in s.cases] == [("h200-sxm", "baseline"), ("h200-sxm", "fast"), ("h100-sxm", "baseline"), ("h100-sxm", "fast")]


def test_serve():
    r = bneck.serve(model=CONFIG, hw="h200-sxm", num=50, rate=5, rates="1,5")
    assert r.completed == 50 and len(r.requests) == 50 and len(r.sweep) == 2
    assert r.median_tpot_ms > 0
    # Uncalibrated: the hardware model alone, its interval says so.
    lo, hi = r.error_bars["median_tpot_ms"]
    assert lo < r.median_tpot_ms < hi and "uncalibrated" in r.error_bars["basis"][0]
    # The engine's warm-up and wake-up are options too (as --warmup-requests, --engine-wake).
    ref = os.path.join(ROOT, "validate", "reference", "h200", "serving")
    w = bneck.serve(model=CONFIG, hw="h200-sxm", requests=os.path.join(ref, "offline.jsonl"), block_size=64, num_blocks=1024,
                    max_batch_tokens=512, max_seqs=64, warmup_requests=os.path.join(ref, "offline_warmup.jsonl"), engine_wake="160 us")
    assert w.completed == 100


def test_serve_prefix_caching(tmp_path):
    # Two requests with the same 1,024-token prefix (two hash ids of 512): the second finds 63 of its
    # 64 blocks of 16 cached (its last token is computed), as the CLI says.
    log = tmp_path / "shared.jsonl"
    log.write_text('{"timestamp": 0, "input_length": 1024, "output_length": 4, "hash_ids": [7, 8]}\n'
                   '{"timestamp": 1000, "input_length": 1024, "output_length": 4, "hash_ids": [7, 8]}\n')
    r = bneck.serve(model=CONFIG, hw="h200-sxm", requests=str(log), prefix_caching=True)
    assert r["prefix_cache"]["hit_tokens"] == 63 * 16
    assert r["prefix_cache"] == cli("serve", "--model", CONFIG, "--hw", "h200-sxm", "--requests", str(log), "--prefix-caching")["prefix_cache"]


def test_errors_are_input_errors_with_the_cli_message():
    with pytest.raises(bneck.InputError) as e:
        bneck.load("/nonexistent/trace.sqlite")
    assert "/nonexistent/trace.sqlite" in str(e.value)
    assert isinstance(e.value, ValueError)
    with pytest.raises(bneck.InputError, match="unknown option"):
        bneck.serve(model=CONFIG, hw="h200-sxm", num=5, nonsense=1)
    with pytest.raises(bneck.InputError, match="num='five': wrong type"):
        bneck.serve(model=CONFIG, hw="h200-sxm", num="five")


def test_dataframes():
    pd = pytest.importorskip("pandas")
    r = bneck.load(DEMO).replay(range="iter.*")
    df = r.frame("ranges")
    assert isinstance(df, pd.DataFrame) and len(df) == 6


def test_no_device_work(tmp_path):
    # A CPU-only profile: one line instead of a forecast, as the CLI says it.
    p = tmp_path / "cpu_only.json"
    p.write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0, "dur": 10}]}')
    t = bneck.load(str(p))
    assert t.whatif("--scale 2:kind=kernel").no_device_work.startswith("no device work in this trace: nothing to forecast")
    assert "no_device_work" in t.replay()
