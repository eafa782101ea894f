"""bneck for notebooks: load a trace, replay it, forecast what-ifs, sweep, simulate LLM serving.

    import bneck
    t = bneck.load("traces/data/demo_pipeline.sqlite")
    r = t.replay(range="iter.*")
    r.makespan_ns, r["critical_path"]          # the CLI's --json keys, as a dict with attributes
    r.frame("ranges")                          # a pandas DataFrame, when pandas is installed
    w = t.whatif(["--scale", "2:kind=kernel"], range="iter.*")
    s = t.sweep(hw=["h200-sxm", "h100-sxm"], scenarios={"fast": ["--scale", "2:kind=kernel"]})
    bneck.serve(model="config.json", hw="h200-sxm", num=200, rate=5)

Errors are bneck.InputError (a ValueError) with the command line's one-line message.
"""
import json as _json
import shlex as _shlex

from . import _bneck

__all__ = ["load", "serve", "Trace", "Result", "InputError", "__version__"]
__version__ = "0.1.0"
InputError = _bneck.InputError


class Result(dict):
    """A report: the CLI's JSON as a dict whose top-level keys are also attributes."""

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None

    def frame(self, key):
        """The list under `key` (ranges, critical_path, ranks, requests, cases, ...) as a DataFrame."""
        import pandas as pd  # optional dependency

        value = self[key]
        if isinstance(value, list):
            return pd.DataFrame([v if isinstance(v, dict) else {key: v} for v in value])
        if isinstance(value, dict):
            return pd.DataFrame([value])
        raise TypeError(f"{key} is not a list or an object")

    def frames(self):
        """Every list of objects in the report as a DataFrame, by key."""
        return {k: self.frame(k) for k, v in self.items() if isinstance(v, list) and v and isinstance(v[0], dict)}


def _args(transforms):
    if isinstance(transforms, str):
        return _shlex.split(transforms)
    out = []
    for t in transforms:  # "--scale 2:name~gemm" splits into words; "2:name~gemm" stays one
        t = str(t)
        out.extend(_shlex.split(t) if t.startswith("--") and " " in t else [t])
    return out


class Trace:
    """A loaded trace (nsys SQLite, Kineto JSON, Chakra, bneck JSON; several files = one per rank)."""

    def __init__(self, handle):
        self._h = handle

    source = property(lambda self: self._h.source)
    format = property(lambda self: self._h.format)
    op_count = property(lambda self: self._h.op_count)
    device_op_count = property(lambda self: self._h.device_op_count)

    def __repr__(self):
        return f"<bneck.Trace {self.source!r}: {self.format}, {self.op_count} ops>"

    def replay(self, range=None, hw="", sharing=True):
        """`bneck replay`: critical path, overlap, ranges measured vs simulated."""
        return Result(_json.loads(_bneck.replay(self._h, range, hw, sharing)))

    def whatif(self, transforms=(), range=None, sharing=True):
        """`bneck whatif`: transforms as command-line words (["--scale", "2:name~gemm"]) or one string."""
        return Result(_json.loads(_bneck.whatif(self._h, _args(transforms), range, sharing)))

    def sweep(self, hw=(), scenarios=None, range=None, jobs=0):
        """`bneck sweep`: every hardware spec x (baseline + each scenario); scenarios: {name: transforms}."""
        scenarios = scenarios or {}
        names = list(scenarios)
        return Result(_json.loads(_bneck.sweep(self._h, list(hw), names, [_args(scenarios[n]) for n in names], range, jobs)))


def load(path, *more):
    """Loads a trace; several paths (or a directory) are one trace per rank."""
    paths = [str(path)] + [str(p) for p in more]
    return Trace(_bneck.load(paths))


def serve(**options):
    """`bneck serve`: the serving pipeline with typed keyword arguments named as the CLI's options
    without dashes (model=, hw=, requests=, num=50, rate=5.0, policy="static", max_batch_tokens=512,
    cuda_graph=True, calibrate=, trace_log=, calibrate_log=, engine_wake="160 us", rates=[1, 2, 4]
    or "1,2,4", prefix_caching=True, shared_prefix="2048:8", step_costs=TRACE, ...). A wrong type or
    an unknown name raises InputError."""
    return Result(_json.loads(_bneck.serve(**options)))
