# LLM serving ground truth for `bneck serve`: a Llama-style model built from a config with
# random weights (bf16), served by transformers' continuous-batching engine (paged|sdpa attention,
# FIFO scheduler, prefix sharing off unless --block-sharing, synchronous batching) or by
# `model.generate` on padded static batches. Requests arrive by a Poisson process (--rate, requests/s; 0 = all at t=0, an offline
# batch) with uniform prompt and output lengths; outputs have a fixed length (eos disabled).
#
# Writes the request log (JSONL, bneck's format: id, arrival_s, prompt_tokens, output_tokens and the
# measured first_token_s, finish_s, token_times_s, seconds from the run's start) and, for the
# continuous engine, a step log (one JSON line per engine step: host times, q/kv tokens per
# sequence, the padded sizes). Every engine step is an NVTX range "step", with sub-ranges
# "prepare", "forward q=Q kv=KV seqs=S prefills=P qkv=SUM qpad=QP kvpad=KP" and "update": under
# Nsight Systems this is the calibration trace.
#
# An offline batch (--rate 0) is queued whole before the engine's first step (the engine's thread
# waits at a gate while the main thread submits): all requests arrive at t = 0.
# Usage: python3 serving.py --policy continuous|static --rate R --num N --log OUT.jsonl [--cuda-graph]
import argparse, json, random, statistics, sys, threading, time, zlib

import torch
from transformers import AutoModelForCausalLM, ContinuousBatchingConfig, GenerationConfig, LlamaConfig

p = argparse.ArgumentParser()
p.add_argument("--policy", default="continuous", choices=["continuous", "static"])
p.add_argument("--rate", type=float, default=0.0)
p.add_argument("--num", type=int, default=200)
p.add_argument("--prompt-len", default="32,768")
p.add_argument("--output-len", default="16,256")
p.add_argument("--seed", type=int, default=1)
p.add_argument("--cuda-graph", action="store_true")
p.add_argument("--block-size", type=int, default=64)
p.add_argument("--num-blocks", type=int, default=1024)
p.add_argument("--max-batch-tokens", type=int, default=512)
p.add_argument("--max-seqs", type=int, default=64)
p.add_argument("--static-batch", type=int, default=32)
p.add_argument("--warmup", type=int, default=24)
p.add_argument("--log", required=True)
p.add_argument("--steplog", default="")
p.add_argument("--warmup-repeat", type=int, default=1, help="serve the warm-up batch this many times (a calibration trace then shows steps on shapes already met)")
p.add_argument("--warmup-log", default="", help="write the warm-up requests (served first, unrecorded) as a request log")
p.add_argument("--config-out", default="")
p.add_argument("--plain", action="store_true", help="the engine as shipped: no NVTX ranges, no step log, no hooks (a plain profile)")
p.add_argument("--shared-prefix", default="", help="LEN:GROUPS: each prompt starts with one of GROUPS shared prefixes of LEN tokens "
               "(the log gets Mooncake-style hash_ids, one per --hash-block tokens)")
p.add_argument("--hash-block", type=int, default=0, help="prompt tokens one hash id covers (default: --block-size)")
p.add_argument("--block-sharing", action="store_true", help="the engine shares KV blocks of equal prompt prefixes (allow_block_sharing)")
p.add_argument("--diag", action="store_true", help="per-step engine-thread CPU time and an interpreter-speed probe in the step log; per-thread CPU times at the end")
p.add_argument("--diag-steps", default="2,3,12,13", help="with --diag: the engine steps whose forward is profiled (cProfile), an early pair and a later pair")
a = p.parse_args()

cfg = LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=16,
                  num_key_value_heads=8, vocab_size=32000, max_position_embeddings=4096, tie_word_embeddings=False)
if a.config_out:
    d = cfg.to_dict()
    d["torch_dtype"] = "bfloat16"
    json.dump(d, open(a.config_out, "w"), indent=1, sort_keys=True)
torch.manual_seed(0)
model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16,
                                         attn_implementation="sdpa" if a.policy == "static" else "paged|sdpa")
model = model.cuda().eval()


SHARED, GROUPS = (map(int, a.shared_prefix.split(":")) if a.shared_prefix else (0, 1))
HASH_BLOCK = a.hash_block or a.block_size


def make_requests(seed, n, rate):
    rng = random.Random(seed)
    plo, phi = map(int, a.prompt_len.split(","))
    olo, ohi = map(int, a.output_len.split(","))
    t, out = 0.0, []
    for i in range(n):
        if rate > 0:
            t += rng.expovariate(rate)
        out.append({"id": f"r{i}", "arrival_s": round(t, 6), "prompt_tokens": rng.randint(plo, phi),
                     "output_tokens": rng.randint(olo, ohi)})
        if SHARED:  # drawn after the others: without --shared-prefix the requests are unchanged
            g = rng.randrange(GROUPS)
            r = out[-1]
            r["prompt_tokens"] += SHARED
            r["group"] = g
            n_ids = (r["prompt_tokens"] + HASH_BLOCK - 1) // HASH_BLOCK
            # hash id k: the group's when block k lies inside the shared prefix, else the request's own
            r["hash_ids"] = [g * 1000000 + k if (k + 1) * HASH_BLOCK <= SHARED else 10 ** 9 + i * 10000 + k for k in range(n_ids)]
    return out


def prompt_ids(r, seed):
    g = random.Random(zlib.crc32(f"{r['id']}/{seed}".encode()))
    own = r["prompt_tokens"] - (SHARED if "group" in r else 0)
    head = []
    if "group" in r:  # the group's prefix: the same tokens for every request of the group
        h = random.Random(zlib.crc32(f"group{r['group']}/{seed}".encode()))
        head = [h.randrange(3, cfg.vocab_size) for _ in range(SHARED)]
    return head + [g.randrange(3, cfg.vocab_size) for _ in range(own)]


reqs = make_requests(a.seed, a.num, a.rate)
nv = torch.cuda.nvtx

if a.policy == "static":
    # Static batching: batches of --static-batch requests in arrival order (all arrive at t=0), left-
    # padded to the longest prompt, each batch generating its longest output for every sequence.
    gen = GenerationConfig(do_sample=False, eos_token_id=None, pad_token_id=0)
    def run_batch(batch):
        L = max(r["prompt_tokens"] for r in batch)
        ids = torch.zeros((len(batch), L), dtype=torch.long)
        mask = torch.zeros((len(batch), L), dtype=torch.long)
        for i, r in enumerate(batch):
            x = prompt_ids(r, a.seed)
            ids[i, L - len(x):] = torch.tensor(x)
            mask[i, L - len(x):] = 1
        n = max(r["output_tokens"] for r in batch)
        kw = {}
        if a.diag:  # the time of every generation step (a stopping criterion that never stops)
            from transformers import StoppingCriteria, StoppingCriteriaList
            marks = STEP_TIMES.setdefault(len(STEP_TIMES), [time.perf_counter()])
            class Mark(StoppingCriteria):
                def __call__(self, input_ids, scores, **k):
                    marks.append(time.perf_counter())
                    return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
            kw["stopping_criteria"] = StoppingCriteriaList([Mark()])
        out = model.generate(input_ids=ids.cuda(), attention_mask=mask.cuda(), generation_config=gen,
                             max_new_tokens=n, min_new_tokens=n, **kw)
        torch.cuda.synchronize()
        return out
    STEP_TIMES = {}
    if a.diag:
        print("diag torch", torch.__version__, "cudnn", torch.backends.cudnn.version(), "cudnn sdp", torch.backends.cuda.cudnn_sdp_enabled())
    run_batch(reqs[:min(4, len(reqs))])  # warm-up
    t0 = time.perf_counter()
    for b in range(0, len(reqs), a.static_batch):
        batch = reqs[b:b + a.static_batch]
        nv.range_push(f"static_batch {b // a.static_batch}")
        run_batch(batch)
        nv.range_pop()
        t = time.perf_counter() - t0
        for r in batch:  # every request of a static batch finishes with the batch
            r["finish_s"] = round(t, 6)
    dur = time.perf_counter() - t0
    for k, m in STEP_TIMES.items():  # --diag: per batch, step times (ms): median, how many over 30 ms
        d = [1e3 * (y - x) for x, y in zip(m, m[1:])]
        print(f"diag batch {k} steps {len(d)} first {d[0]:.1f} median {statistics.median(d):.1f} over30 {sum(x > 30 for x in d)} "
              f"mean {statistics.mean(d):.1f} ms; first 12: {[round(x, 1) for x in d[:12]]}")
    with open(a.log, "w") as f:
        for r in reqs:
            f.write(json.dumps(r) + "\n")
    toks = sum(r["output_tokens"] for r in reqs)
    print(f"policy static batch {a.static_batch} requests {len(reqs)} duration_s {dur:.4f} "
          f"output_throughput {toks / dur:.1f} request_throughput {len(reqs) / dur:.3f}")
    sys.exit(0)

# ---- continuous batching ----
from transformers.generation.continuous_batching import continuous_api as capi
from transformers.generation.continuous_batching import scheduler as csched

steps, cur = [], {}
T0 = [None]


def now():
    return time.perf_counter() - (T0[0] or 0.0)


orig_sched = csched.FIFOScheduler.schedule_batch
def sched(self, token_budget, cache_budget):
    res = orig_sched(self, token_budget, cache_budget)
    reqs_in, fast, nq, nkv = res
    if reqs_in:
        seq = []
        for fs in reqs_in:
            q = fs.query_length
            past = fs.state.position_offset
            seq.append((q, past))
        cur["seq"], cur["nq"], cur["nkv"] = seq, nq, nkv
    return res
if not a.plain:
    csched.FIFOScheduler.schedule_batch = sched

orig_prep = capi.ContinuousBatchProcessor.prepare_next_batch
orig_step = capi.ContinuousBatchProcessor._generation_step
orig_upd = capi.ContinuousBatchProcessor.update_batch
orig_pad = None


GATE = threading.Event()
GATE.set()


def prep(self):
    global orig_pad
    GATE.wait()  # an offline batch: the engine starts once every request is queued
    if orig_pad is None:
        orig_pad = type(self.model_runner).maybe_pad_inputs
        def pad(mr, nq, nkv, fast):
            r = orig_pad(mr, nq, nkv, fast)
            cur["qpad"], cur["kvpad"] = r
            return r
        type(self.model_runner).maybe_pad_inputs = pad
    cur.clear()
    cur["t_step"] = now()
    if a.diag:
        cur["cpu_step"] = time.thread_time()
        t = time.perf_counter()
        x = 0
        for i in range(20000):
            x += i
        cur["probe_us"] = round(1e6 * (time.perf_counter() - t), 1)
    nv.range_push("step")
    nv.range_push("prepare")
    ok = orig_prep(self)
    nv.range_pop()
    if not ok:
        nv.range_pop()
    return ok


PROF = {}  # --diag: cProfile of the engine thread's forward in an early and a later step
DIAG_STEPS = [int(x) for x in a.diag_steps.split(",")]
if len(DIAG_STEPS) != 4:
    p.error("--diag-steps takes four steps: an early pair and a later pair")


def mem_counts():
    st = torch.cuda.memory_stats()
    return {k: st.get(k, 0) for k in ("num_device_alloc", "num_device_free", "num_alloc_retries", "reserved_bytes.all.current")}


def step(self, model):
    seq = cur.get("seq", [])
    k = len(steps)
    prof = None
    if a.diag and T0[0] is not None and k in DIAG_STEPS:
        import cProfile
        prof = PROF.setdefault("early" if k < DIAG_STEPS[2] else "late", cProfile.Profile())
        cur["mem0"] = mem_counts()
    qs = sum(q for q, _ in seq)
    kv = sum(q + past for q, past in seq)
    qkv = sum(q * (past + q) for q, past in seq)
    pre = sum(1 for q, past in seq if q > 1 or past == 0)
    cur["t_fwd"] = now()
    if a.diag:
        cur["cpu_fwd"] = time.thread_time()
    nv.range_push(f"forward q={qs} kv={kv} seqs={len(seq)} prefills={pre} qkv={qkv} "
                  f"qpad={cur.get('qpad', qs)} kvpad={cur.get('kvpad', kv)}")
    if prof is not None:
        prof.enable()
    r = orig_step(self, model)
    if prof is not None:
        prof.disable()
        m1 = mem_counts()
        print("diag step", k, "memory", {n: m1[n] - cur["mem0"][n] for n in m1}, "reserved", m1["reserved_bytes.all.current"] >> 20, "MiB")
    nv.range_pop()
    cur["t_upd"] = now()
    if a.diag:
        cur["cpu_fwd"] = round(time.thread_time() - cur["cpu_fwd"], 7)
    return r


def upd(self):
    nv.range_push("update")
    r = orig_upd(self)
    nv.range_pop()
    nv.range_pop()  # step
    if T0[0] is not None and "seq" in cur:
        steps.append({"t_step": round(cur["t_step"], 7), "t_fwd": round(cur["t_fwd"], 7),
                      "t_upd": round(cur["t_upd"], 7), "t_end": round(now(), 7), "seq": cur["seq"],
                      "qpad": cur.get("qpad"), "kvpad": cur.get("kvpad")})
        if a.diag:
            steps[-1].update(cpu_fwd=cur["cpu_fwd"], cpu_step=round(time.thread_time() - cur["cpu_step"], 7),
                             probe_us=cur["probe_us"])
    return r


if not a.plain:
    capi.ContinuousBatchProcessor.prepare_next_batch = prep
    capi.ContinuousBatchProcessor._generation_step = step
    capi.ContinuousBatchProcessor.update_batch = upd

cbc = ContinuousBatchingConfig(block_size=a.block_size, num_blocks=a.num_blocks, max_batch_tokens=a.max_batch_tokens,
                               max_requests_per_batch=a.max_seqs, allow_block_sharing=bool(a.block_sharing),
                               use_async_batching=False, use_cuda_graph=bool(a.cuda_graph), scheduler_type="fifo")
gen = GenerationConfig(do_sample=False, eos_token_id=-1, max_new_tokens=16)
mgr = model.init_continuous_batching(generation_config=gen, continuous_batching_config=cbc)
mgr.start()


def serve(rs, seed, record):
    ids = {r["id"]: prompt_ids(r, seed) for r in rs}
    res = {}
    def collect():
        for _ in range(len(rs)):
            o = mgr.get_result(timeout=300)
            if o is None:
                break
            res[o.request_id] = o
    th = threading.Thread(target=collect)
    th.start()
    offline = record and all(r["arrival_s"] == 0 for r in rs)
    if offline:  # queue them all, then open the gate: every request arrives at t = 0
        GATE.clear()
        time.sleep(0.3)  # the engine thread parks at the gate
        for r in rs:
            mgr.add_request(ids[r["id"]], request_id=r["id"], max_new_tokens=r["output_tokens"], record_timestamps=True)
        t0 = time.perf_counter()
        T0[0] = t0
        GATE.set()
        th.join()
        return t0, res
    t0 = time.perf_counter()
    if record:
        T0[0] = t0
    for r in rs:
        dt = t0 + r["arrival_s"] - time.perf_counter()
        if dt > 0:
            time.sleep(dt)
        r["arrival_s"] = round(time.perf_counter() - t0, 6)  # when it was submitted
        mgr.add_request(ids[r["id"]], request_id=r["id"], max_new_tokens=r["output_tokens"], record_timestamps=True)
    th.join()
    return t0, res


# Warm-up: the same engine serves a short offline batch first (allocations, kernels' first launches,
# CUDA graphs of the common sizes).
def thread_cpu():
    """CPU seconds (user, system) of every OS thread of this process, by thread id and name."""
    import os
    out = {}
    tick = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir("/proc/self/task"):
        try:
            st = open(f"/proc/self/task/{tid}/stat").read()
            name = st[st.index("(") + 1:st.rindex(")")]
            f = st[st.rindex(")") + 2:].split()
            out[tid] = (name, int(f[11]) / tick, int(f[12]) / tick)
        except (OSError, ValueError, IndexError):
            pass
    return out


wu = [dict(r, id=f"w{i}", arrival_s=0.0) for i, r in enumerate(make_requests(a.seed + 1000, a.warmup, 0))]
if a.warmup_log:
    with open(a.warmup_log, "w") as f:
        for k in range(a.warmup_repeat):
            for r in wu:
                f.write(json.dumps(dict(r, id=f"{r['id']}.{k}" if k else r["id"])) + "\n")
for k in range(a.warmup_repeat):
    serve([dict(r, id=f"{r['id']}.{k}" if k else r["id"]) for r in wu], a.seed + 1000, False)
if a.diag:
    import os
    print("diag cpu_count", os.cpu_count(), "torch threads", torch.get_num_threads(), "interop", torch.get_num_interop_threads(),
          "switchinterval", sys.getswitchinterval(), "threads", [t.name for t in threading.enumerate()])
    c0, w0 = thread_cpu(), time.perf_counter()
t0, res = serve(reqs, a.seed, True)
if a.diag:
    c1, w1 = thread_cpu(), time.perf_counter()
    busy = sorted(((c1[k][1] + c1[k][2] - (c0[k][1] + c0[k][2] if k in c0 else 0), k, c1[k][0]) for k in c1), reverse=True)
    import pstats, io
    for tag, pr in PROF.items():
        buf = io.StringIO()
        pstats.Stats(pr, stream=buf).sort_stats("tottime").print_stats(25)
        print(f"diag profile {tag} (two steps)\n" + buf.getvalue())
    print(f"diag wall {w1 - w0:.3f} s; threads by CPU s (user+sys):", [(n, k, round(v, 2)) for v, k, n in busy[:12]])
mgr.stop(block=True, timeout=60)
bad = 0
for r in reqs:
    o = res.get(r["id"])
    ts = [t - t0 for t in (o.timestamps or [])] if o is not None else []
    if o is None or o.error or not ts:
        bad += 1
        r["error"] = (o.error if o is not None else "no result") or "no tokens"
        continue
    if len(ts) != r["output_tokens"]:  # the engine's count wins; the request asked for another
        r["output_tokens_requested"], r["output_tokens"] = r["output_tokens"], len(ts)
    r["token_times_s"] = [round(t, 6) for t in ts]
    r["first_token_s"] = r["token_times_s"][0]
    r["finish_s"] = r["token_times_s"][-1]
with open(a.log, "w") as f:
    for r in reqs:
        f.write(json.dumps(r) + "\n")
if a.steplog:
    with open(a.steplog, "w") as f:
        for s in steps:
            f.write(json.dumps(s) + "\n")
ok = [r for r in reqs if "finish_s" in r]
dur = max(r["finish_s"] for r in ok) - min(r["arrival_s"] for r in ok)
ttft = [1e3 * (r["first_token_s"] - r["arrival_s"]) for r in ok]
tpot = [1e3 * (r["finish_s"] - r["first_token_s"]) / (r["output_tokens"] - 1) for r in ok if r["output_tokens"] > 1]
e2e = [1e3 * (r["finish_s"] - r["arrival_s"]) for r in ok]
toks = sum(r["output_tokens"] for r in ok)
print(f"policy continuous rate {a.rate} cuda_graph {int(a.cuda_graph)} requests {len(ok)} failed {bad} steps {len(steps)} "
      f"duration_s {dur:.4f} output_throughput {toks / dur:.1f} median_ttft_ms {statistics.median(ttft):.2f} "
      f"median_tpot_ms {statistics.median(tpot):.3f} median_e2el_ms {statistics.median(e2e):.1f}")
