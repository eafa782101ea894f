# Small PyTorch loops, each with one bottleneck or one structure, timed unprofiled and traced, for the
# advisor's remedies (copies, host-bound dispatch), the host model (per-op dispatch cost with and
# without autocast) and structure recognition (training anatomy, varying shapes).
# Loops (--loop) and their modes (--mode, comma separated; one process runs them in order):
#   copy      each step copies a 64 MiB host tensor to the GPU, then 4 GEMMs (4096^2, bf16) on it;
#             modes: pageable (torch.empty on the host), pinned (pin_memory(), non_blocking=True)
#   stage     each step copies a 32 MiB pinned batch to the GPU, then 8 GEMMs (2048 x 4096 x 4096, bf16) on it;
#             modes: serial (the copy on the compute stream, before its GEMMs), prefetch (the next
#             step's batch copied on a side stream while this step computes; two buffers, events)
#   host      L layers of Linear(256) + LayerNorm + GELU + residual add at batch 1 (host-bound):
#             modes: fp32, tf32, autocast (bf16), compile (torch.compile of the layers, default mode: the
#             warm-up steps compile it); --layers L (default 48)
#   train     a 4-layer transformer encoder (d 1024, 16 heads, batch 8 x 256) trained with AdamW;
#             modes: plain, accum2 (2 microbatches a step, one optimizer step)
#   cycle     BERT-like encoder inference cycling sequence lengths 64 / 128 / 256 (batch 8)
#   vision    torchvision ResNet-18 training step, batch 32 x 3 x 224 x 224, SGD with momentum;
#             modes: fp32, channels_last (bf16 autocast, channels-last memory format)
#   dataload  a DataLoader (2 workers, pinned) feeding batches of 64 x 1024 floats through an MLP
#             training step (AdamW); modes: plain
#   decode    GPT-2 small (12 layers) decoding 40 tokens with its KV cache, batch 1, one token a
#             step (a prefill step of 32 tokens first); modes: eager
#   mixed     a CUDA graph of an MLP forward (8 x Linear(2048), batch 16) then an eager tail
#             (softmax, top-k, an .item()); modes: plain
#   bert      Hugging Face BERT-base inference (random weights), batch 8 x 128, fp32; modes: plain
#   dit       one generation a step: 25 denoiser steps of 8 DiT-like blocks (d 768, 12 heads, 256
#             tokens, classifier-free guidance as a batch of 2), no sync between them, each in an
#             NVTX range "dstep{k}" with --nvtx, then a convolutional decoder; modes: plain
#   generate  Hugging Face GPT-2 small generate() (greedy, 24 new tokens, its stopping checks) of a
#             16-token prompt, one call a step; modes: plain
#   compiled  torch.compile'd encoder inference (4 layers, d 1024, 16 heads, batch 8 x 256); modes: plain
#   ddp       a DDP training step on one rank (NCCL, world 1): 6 x (Linear(2048) + GELU), batch 64, SGD
#   genvar    generate() as above with 8, 16, 24, 32 new tokens cycling from step to step
#   vision_inf torchvision ResNet-50 inference, batch 16, bf16 autocast, channels-last
#   feats     a batch of 64 features, each 256 x 64 fp32 (64 KiB), copied to the GPU, concatenated and
#             fed to an MLP (4096 -> 4096 -> 4096, bf16 autocast); modes: split (each feature its own
#             .to(): 64 pageable copies), packed (the features in one 4 MiB host tensor, one copy),
#             split_pinned / packed_pinned (pinned host memory, non_blocking)
#   metrics   an MLP forward (8 x Linear(2048), batch 64) then 32 metrics of its output read on the host;
#             modes: items (each metric's .item(): 32 copies and synchronizations), stacked (the 32
#             stacked on the GPU, one .tolist())
# Every step ends with torch.cuda.synchronize() (as a loss.item() would). Timing: --warmup steps,
# then --steps steps between CUDA events (and wall clock); prints per mode a line
#   loop L mode M steps_ms ... median_ms X wall_median_ms Y
# --nvtx: each timed step in an NVTX range "step{i}" (for Nsight Systems). --kineto FILE: the timed
# steps under torch.profiler (CPU + CUDA, record_shapes), each in record_function("step{i}"),
# chrome trace to FILE (the mode's name is inserted before .json). --count: also print the aten
# ops and kernel launches of one step (torch.profiler, not timed).
import argparse, statistics, sys, time

import torch

p = argparse.ArgumentParser()
p.add_argument("--loop", required=True, choices=["copy", "stage", "host", "train", "cycle", "vision", "dataload", "decode", "mixed", "bert", "dit",
                                                  "generate", "compiled", "ddp", "genvar", "vision_inf", "feats", "metrics"])
p.add_argument("--mode", required=True)
p.add_argument("--steps", type=int, default=20)
p.add_argument("--warmup", type=int, default=5)
p.add_argument("--layers", type=int, default=48)
p.add_argument("--nvtx", action="store_true")
p.add_argument("--kineto", default="")
p.add_argument("--count", action="store_true")
a = p.parse_args()
dev = torch.device("cuda")
torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def copy_loop(mode):
    n = 16 << 20  # 64 MiB of fp32
    host = torch.randn(n)
    if mode == "pinned":
        host = host.pin_memory()
    w = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)

    def step(i):
        x = host.to(dev, non_blocking=(mode == "pinned"))
        y = x.view(4096, 4096).to(torch.bfloat16)
        for _ in range(4):
            y = y @ w
        return y
    return step


def stage_loop(mode):
    n = 8 << 20  # 32 MiB of fp32 a batch
    batches = [torch.randn(n).pin_memory() for _ in range(4)]
    w = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16) / 64
    bufs = [torch.empty(n, device=dev) for _ in range(2)]
    side = torch.cuda.Stream()
    ready = [torch.cuda.Event() for _ in range(2)]
    done = [torch.cuda.Event() for _ in range(2)]
    state = {"primed": False}

    def compute(x):
        y = x.view(2048, 4096).to(torch.bfloat16)
        for _ in range(8):
            y = y @ w
        return y

    if mode == "serial":
        def step(i):
            bufs[0].copy_(batches[i % 4], non_blocking=True)
            return compute(bufs[0])
        return step

    def issue(i):
        b = i % 2
        with torch.cuda.stream(side):
            side.wait_event(done[b])  # the buffer's last reader
            bufs[b].copy_(batches[i % 4], non_blocking=True)
            ready[b].record(side)

    def step(i):
        if not state["primed"]:
            issue(i)
            state["primed"] = True
        issue(i + 1)  # the next batch while this one computes
        b = i % 2
        cur = torch.cuda.current_stream()
        cur.wait_event(ready[b])
        y = compute(bufs[b])
        done[b].record(cur)
        return y
    return step


def host_loop(mode):
    torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
    L, d = a.layers, 256
    lins = [torch.nn.Linear(d, d).to(dev) for _ in range(L)]
    lns = [torch.nn.LayerNorm(d).to(dev) for _ in range(L)]
    x0 = torch.randn(1, d, device=dev)

    def body(x):
        for lin, ln in zip(lins, lns):
            x = x + torch.nn.functional.gelu(lin(ln(x)))
        return x
    fwd = torch.compile(body) if mode == "compile" else body

    def step(i):
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16, enabled=(mode == "autocast")):
            return fwd(x0)
    return step


def encoder(d=1024, heads=16, layers=4):
    layer = torch.nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True)
    return torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).to(dev)


def train_loop(mode):
    m = encoder()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    micro = 2 if mode == "accum2" else 1
    xs = torch.randn(8, 256, 1024, device=dev)

    def step(i):
        for k in range(micro):
            x = xs[k * (8 // micro):(k + 1) * (8 // micro)]
            loss = m(x).float().pow(2).mean() / micro
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss
    return step


def cycle_loop(mode):
    m = encoder(768, 12, 6).eval()
    xs = {s: torch.randn(8, s, 768, device=dev) for s in (64, 128, 256)}

    def step(i):
        with torch.no_grad():
            return m(xs[(64, 128, 256)[i % 3]])
    return step


def vision_loop(mode):
    import torchvision
    m = torchvision.models.resnet18().to(dev)
    x = torch.randn(32, 3, 224, 224, device=dev)
    y = torch.randint(0, 1000, (32,), device=dev)
    if mode == "channels_last":
        m = m.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)

    def step(i):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=(mode == "channels_last")):
            loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss
    return step


class _Batches(torch.utils.data.Dataset):
    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(64, 1024, generator=g), torch.randn(64, 256, generator=g)


def dataload_loop(mode):
    m = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 4096), torch.nn.GELU(),
                            torch.nn.Linear(4096, 256)).to(dev)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    it = iter(torch.utils.data.DataLoader(_Batches(), batch_size=None, num_workers=2, pin_memory=True, prefetch_factor=4))

    def step(i):
        x, y = next(it)
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        loss = torch.nn.functional.mse_loss(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss
    return step


def decode_loop(mode):
    from transformers import GPT2Config, GPT2LMHeadModel
    m = GPT2LMHeadModel(GPT2Config(n_layer=12, n_embd=768, n_head=12)).to(dev).eval()
    prompt = torch.randint(0, 50257, (1, 32), device=dev)
    state = {}

    def step(i):
        # step 0 of every 41: the prefill; then one token a step with the cache
        k = i % 41
        with torch.no_grad():
            if k == 0:
                out = m(input_ids=prompt, use_cache=True)
            else:
                out = m(input_ids=state["tok"], past_key_values=state["past"], use_cache=True)
        state["past"] = out.past_key_values
        state["tok"] = out.logits[:, -1:].argmax(-1)
        return state["tok"]
    return step


def mixed_loop(mode):
    lins = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.ReLU()) for _ in range(8)]).to(dev)
    x = torch.randn(16, 2048, device=dev)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(side):
        for _ in range(3):
            lins(x)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(g):
        out = lins(x)

    def step(i):
        g.replay()
        with torch.no_grad():
            p = torch.softmax(out, -1)
            v, idx = torch.topk(p, 8, dim=-1)
            return float(v.sum().item())
    return step


def bert_loop(mode):
    from transformers import BertConfig, BertModel
    m = BertModel(BertConfig()).to(dev).eval()
    ids = torch.randint(0, 30522, (8, 128), device=dev)

    def step(i):
        with torch.no_grad():
            return m(input_ids=ids).last_hidden_state
    return step


def dit_loop(mode):
    d, h = 768, 12

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
            self.qkv, self.o = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))
            self.ada = torch.nn.Linear(d, 2 * d)

        def forward(self, x, t):
            sh, sc = self.ada(t).unsqueeze(1).chunk(2, -1)
            y = self.n1(x) * (1 + sc) + sh
            q, k, v = self.qkv(y).view(x.shape[0], -1, 3, h, d // h).permute(2, 0, 3, 1, 4)
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(x.shape)
            x = x + self.o(a)
            return x + self.mlp(self.n2(x))

    blocks = torch.nn.ModuleList([Block() for _ in range(8)]).to(dev).eval()
    temb = torch.nn.Linear(1, d).to(dev)
    dec = torch.nn.Sequential(torch.nn.Conv2d(d, 256, 3, padding=1), torch.nn.SiLU(), torch.nn.Upsample(scale_factor=4),
                              torch.nn.Conv2d(256, 64, 3, padding=1), torch.nn.SiLU(), torch.nn.Conv2d(64, 3, 3, padding=1)).to(dev).eval()
    lat0 = torch.randn(1, 256, d, device=dev)

    @torch.no_grad()
    def step(i):
        lat = lat0.clone()
        for k in range(25):
            if a.nvtx:
                torch.cuda.nvtx.range_push(f"dstep{k}")
            x = torch.cat([lat, lat])
            t = temb(torch.full((2, 1), 1.0 - k / 25, device=dev))
            for b in blocks:
                x = b(x, t)
            cond, unc = x.chunk(2)
            lat = lat - 0.04 * (unc + 5.0 * (cond - unc))
            if a.nvtx:
                torch.cuda.nvtx.range_pop()
        return dec(lat.transpose(1, 2).reshape(1, d, 16, 16))
    return step


def generate_loop(mode):
    from transformers import GPT2Config, GPT2LMHeadModel
    m = GPT2LMHeadModel(GPT2Config(n_layer=12, n_embd=768, n_head=12)).to(dev).eval()
    prompt = torch.randint(0, 50257, (1, 16), device=dev)

    def step(i):
        with torch.no_grad():
            return m.generate(prompt, max_new_tokens=24, min_new_tokens=24, do_sample=False, pad_token_id=0)
    return step


def compiled_loop(mode):
    # torch.compile'd encoder inference: 4 layers (d 1024, 16 heads), batch 8 x 256 (the warm-up
    # steps compile it).
    layer = torch.nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True, dropout=0.0)
    m = torch.compile(torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False).to(dev).eval())
    x = torch.randn(8, 256, 1024, device=dev)

    def step(i):
        with torch.no_grad():
            return m(x)
    return step


def ddp_loop(mode):
    # A DDP training step on one rank (world 1, NCCL): 6 x (Linear(2048) + GELU), batch 64, SGD;
    # the reducer's bucket all-reduces and copies run as on more ranks.
    import os
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")
    if not dist.is_initialized():
        dist.init_process_group("nccl", rank=0, world_size=1)
    layers = []
    for _ in range(6):
        layers += [torch.nn.Linear(2048, 2048), torch.nn.GELU()]
    m = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(*layers).to(dev), device_ids=[0])
    opt = torch.optim.SGD(m.parameters(), lr=1e-4)
    x = torch.randn(64, 2048, device=dev)

    def step(i):
        loss = m(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss
    return step


def genvar_loop(mode):
    # GPT-2 small generate() of a 16-token prompt, greedy, as many new tokens as the step asks:
    # 8, 16, 24, 32, ... cycling (units alike but unequal).
    from transformers import GPT2Config, GPT2LMHeadModel
    m = GPT2LMHeadModel(GPT2Config(n_layer=12, n_embd=768, n_head=12)).to(dev).eval()
    prompt = torch.randint(0, 50257, (1, 16), device=dev)

    def step(i):
        n = 8 * (1 + i % 4)
        with torch.no_grad():
            return m.generate(prompt, max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)
    return step


def vision_inf_loop(mode):
    # torchvision ResNet-50 inference, batch 16 x 3 x 224 x 224, bf16 autocast, channels-last.
    import torchvision
    m = torchvision.models.resnet50().to(dev).eval().to(memory_format=torch.channels_last)
    x = torch.randn(16, 3, 224, 224, device=dev).to(memory_format=torch.channels_last)

    def step(i):
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            return m(x)
    return step


def feats_loop(mode):
    # 64 features of 256 x 64 fp32 each; split: one host tensor per feature, packed: all in one.
    pinned = mode.endswith("_pinned")
    packed = mode.startswith("packed")
    host = torch.randn(256, 64 * 64)
    parts = [host[:, 64 * k:64 * (k + 1)].contiguous() for k in range(64)]
    if pinned:
        host = host.pin_memory()
        parts = [t.pin_memory() for t in parts]
    w1 = torch.randn(4096, 4096, device=dev) / 64
    w2 = torch.randn(4096, 4096, device=dev) / 64

    def step(i):
        if packed:
            x = host.to(dev, non_blocking=pinned)
        else:
            x = torch.cat([t.to(dev, non_blocking=pinned) for t in parts], dim=1)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return torch.relu(x @ w1) @ w2
    return step


def metrics_loop(mode):
    lins = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.ReLU()) for _ in range(8)]).to(dev)
    x = torch.randn(64, 2048, device=dev)

    def step(i):
        with torch.no_grad():
            y = lins(x)
            ms = [y[:, 64 * k:64 * (k + 1)].mean() for k in range(32)]
            if mode == "stacked":
                return torch.stack(ms).tolist()
            return [m.item() for m in ms]
    return step


LOOPS = {"copy": copy_loop, "stage": stage_loop, "host": host_loop, "train": train_loop, "cycle": cycle_loop,
         "vision": vision_loop, "dataload": dataload_loop, "decode": decode_loop, "mixed": mixed_loop,
         "bert": bert_loop, "dit": dit_loop, "generate": generate_loop, "compiled": compiled_loop, "ddp": ddp_loop,
         "genvar": genvar_loop, "vision_inf": vision_inf_loop,
         "feats": feats_loop, "metrics": metrics_loop}


def count(step):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step(0)
        torch.cuda.synchronize()
    ev = prof.events()
    aten = sum(1 for e in ev if e.name.startswith("aten::"))
    top = sum(1 for e in ev if e.name.startswith("aten::") and e.cpu_parent is None)
    launches = sum(1 for e in ev if e.name in ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx"))
    casts = sum(1 for e in ev if e.name == "aten::_to_copy")
    print(f"count loop {a.loop} mode {mode} aten_ops {aten} top_level_ops {top} launches {launches} to_copy {casts}", flush=True)


def run(mode):
    step = LOOPS[a.loop](mode)
    for i in range(a.warmup):
        step(i)
        torch.cuda.synchronize()
    if a.count:
        count(step)
    s = [torch.cuda.Event(enable_timing=True) for _ in range(a.steps)]
    e = [torch.cuda.Event(enable_timing=True) for _ in range(a.steps)]
    walls = []
    prof = None
    if a.kineto:
        from torch.profiler import ProfilerActivity, profile
        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True)
        prof.__enter__()
    torch.cuda.synchronize()
    for i in range(a.steps):
        w0 = time.perf_counter()
        if a.nvtx:
            torch.cuda.nvtx.range_push(f"step{i}")
        ctx = torch.profiler.record_function(f"step{i}") if prof else None
        if ctx:
            ctx.__enter__()
        s[i].record()
        step(a.warmup + i)
        e[i].record()
        torch.cuda.synchronize()
        if ctx:
            ctx.__exit__(None, None, None)
        if a.nvtx:
            torch.cuda.nvtx.range_pop()
        walls.append((time.perf_counter() - w0) * 1e3)
    if prof:
        prof.__exit__(None, None, None)
        path = a.kineto.replace(".json", f".{mode}.json")
        prof.export_chrome_trace(path)
    ms = [x.elapsed_time(y) for x, y in zip(s, e)]
    print(f"loop {a.loop} mode {mode} {'kineto' if prof else 'nvtx' if a.nvtx else 'plain'} steps_ms {' '.join(f'{v:.4f}' for v in ms)} "
          f"median_ms {statistics.median(ms):.4f} wall_median_ms {statistics.median(walls):.4f} "
          f"torch {torch.__version__} gpu {torch.cuda.get_device_name()}", flush=True)


for mode in a.mode.split(","):
    run(mode)
