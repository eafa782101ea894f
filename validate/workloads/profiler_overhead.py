# Host cost of profilers, per recorded event: host-bound programs (the GPU finishes each kernel long
# before the next launch), so a step's wall time is host time, timed with no profiler and under each
# profiler.
# Programs (--program):
#   mlp         48 x (Linear(256, 256) + ReLU), batch 8, fp32, forward under torch.no_grad()
#   gpt2_inf    GPT2LMHeadModel(GPT2Config(n_layer=12, n_embd=768, n_head=12)), random weights (no
#               download), eager attention, eval(), batch 1, seq 16, forward under no_grad, use_cache False
#   gpt2_train  the same model, train() (dropout on), batch 1, seq 16: forward + LM loss (labels =
#               inputs) + loss.backward() (runs on autograd's device thread) + torch.optim.AdamW(lr 1e-4,
#               defaults) step + zero_grad(set_to_none=True)
# Modes (--mode):
#   plain              nothing
#   kineto             torch.profiler.profile(activities CPU + CUDA, record_shapes=True)
#   kineto_noshapes    the same with record_shapes=False
#   kineto_stack       record_shapes=True, with_stack=True; the profile is never processed: the process
#                      ends (os._exit) right after printing its timings
#   kineto_memory      record_shapes=True, profile_memory=True (the allocator's [memory] events)
#   nvtx               torch.autograd.profiler.emit_nvtx(record_shapes=True) around the timed steps (to
#                      run under Nsight Systems)
#   plain_nvtx_ranges  only torch.cuda.nvtx.range_push/range_pop("step{i}") around each timed step
# Timing: --warmup steps (default 10, no profiler, no ranges), then --steps timed steps (default 30).
# Each timed step i: t0 = time.perf_counter(); [range open] step(); torch.cuda.synchronize()
# [range close]; t1 = time.perf_counter(). The range is record_function("step{i}") in the kineto
# modes and the NVTX range "step{i}" in the nvtx modes. A profiler is entered before the first timed
# step and left after the last one; the trace export (--trace PATH, kineto modes, gzipped when PATH
# ends in .gz) happens after that.
# Prints: config ...; steps_ms ...; median_ms X; mean_ms/min_ms/max_ms; then exit_s, export_s.
import argparse, os, statistics, sys, time

import torch

PROGRAMS = ("mlp", "gpt2_inf", "gpt2_train")
MODES = ("plain", "kineto", "kineto_noshapes", "kineto_stack", "kineto_memory", "nvtx", "plain_nvtx_ranges")

p = argparse.ArgumentParser()
p.add_argument("--program", required=True, choices=PROGRAMS)
p.add_argument("--mode", required=True, choices=MODES)
p.add_argument("--warmup", type=int, default=10)
p.add_argument("--steps", type=int, default=30)
p.add_argument("--trace", default="", help="kineto modes: export the chrome trace here (.json.gz gzips)")
a = p.parse_args()
if a.trace and a.mode not in ("kineto", "kineto_noshapes", "kineto_memory"):
    sys.exit("--trace is for the kineto, kineto_noshapes and kineto_memory modes")

dev = torch.device("cuda")
torch.manual_seed(0)
extra = ""

if a.program == "mlp":
    layers = []
    for _ in range(48):
        layers += [torch.nn.Linear(256, 256), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).to(dev).eval()
    x = torch.randn(8, 256, device=dev)

    def step():
        with torch.no_grad():
            model(x)
    extra = "layers 48 width 256 batch 8 dtype fp32"
else:
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_layer=12, n_embd=768, n_head=12)
    try:
        cfg._attn_implementation = "eager"
    except Exception:
        pass
    how = "from_config"
    try:
        with torch.device(dev):
            model = GPT2LMHeadModel._from_config(cfg, attn_implementation="eager")
    except Exception as e:  # older/newer transformers: plain constructor
        how = f"ctor ({type(e).__name__})"
        model = GPT2LMHeadModel(cfg)
    model = model.to(dev, torch.float32)
    train = a.program == "gpt2_train"
    model.train(train)
    g = torch.Generator(device=dev).manual_seed(0)
    ids = torch.randint(0, cfg.vocab_size, (1, 16), device=dev, generator=g)
    nparams = sum(q.numel() for q in model.parameters())
    if train:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step():
            loss = model(input_ids=ids, labels=ids, use_cache=False).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    else:
        def step():
            with torch.no_grad():
                model(input_ids=ids, use_cache=False)
    extra = (f"n_layer 12 n_embd 768 n_head 12 batch 1 seq 16 params {nparams} "
             f"attn {getattr(model.config, '_attn_implementation', '?')} build {how} train {train} "
             f"transformers {transformers.__version__}")
    if train:
        extra += " optimizer AdamW(lr=1e-4, defaults) zero_grad(set_to_none=True)"

print(f"config program {a.program} mode {a.mode} warmup {a.warmup} steps {a.steps} {extra} "
      f"torch {torch.__version__} gpu {torch.cuda.get_device_name(0)} pid {os.getpid()}", flush=True)

for _ in range(a.warmup):
    step()
torch.cuda.synchronize()

kineto = a.mode.startswith("kineto")
nvtx_ranges = a.mode in ("nvtx", "plain_nvtx_ranges")
ctx = None
if kineto:
    from torch.profiler import ProfilerActivity, profile
    ctx = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                  record_shapes=(a.mode != "kineto_noshapes"), with_stack=(a.mode == "kineto_stack"),
                  profile_memory=(a.mode == "kineto_memory"))
elif a.mode == "nvtx":
    ctx = torch.autograd.profiler.emit_nvtx(record_shapes=True)

times = []
t_enter = time.perf_counter()
if ctx is not None:
    ctx.__enter__()
enter_s = time.perf_counter() - t_enter
for i in range(a.steps):
    if kineto:
        t0 = time.perf_counter()
        with torch.profiler.record_function(f"step{i}"):
            step()
            torch.cuda.synchronize()
        t1 = time.perf_counter()
    elif nvtx_ranges:
        t0 = time.perf_counter()
        torch.cuda.nvtx.range_push(f"step{i}")
        step()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        t1 = time.perf_counter()
    else:
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
    times.append((t1 - t0) * 1e3)

print("steps_ms " + " ".join(f"{t:.4f}" for t in times))
print(f"median_ms {statistics.median(times):.4f}")
print(f"mean_ms {statistics.mean(times):.4f} min_ms {min(times):.4f} max_ms {max(times):.4f} "
      f"stdev_ms {statistics.pstdev(times):.4f}")
print(f"enter_s {enter_s:.3f}", flush=True)

if a.mode == "kineto_stack":
    sys.stdout.flush()
    os._exit(0)  # the with_stack profile is not processed (saves its teardown time)

if ctx is not None:
    t0 = time.perf_counter()
    ctx.__exit__(None, None, None)
    print(f"exit_s {time.perf_counter() - t0:.3f}", flush=True)
if a.trace:
    t0 = time.perf_counter()
    d = os.path.dirname(a.trace)
    if d:
        os.makedirs(d, exist_ok=True)
    ctx.export_chrome_trace(a.trace)
    print(f"export_s {time.perf_counter() - t0:.3f} trace {a.trace} bytes {os.path.getsize(a.trace)}", flush=True)
print("done", flush=True)
