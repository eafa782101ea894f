# A latent-diffusion pipeline for `bneck pipeline` and the step/guidance/resolution what-ifs
#, in plain PyTorch with random weights, bf16: a CLIP text encoder (transformers, from a
# config), a DiT denoiser (16 layers, d 1152, 16 heads, patch 2, adaLN, cross-attention to the
# text), an Euler sampler with classifier-free guidance (conditional and unconditional halves in one
# batch), and a convolutional VAE decoder (latent /8 -> pixels, 512-256-128 channels).
# Ranges (record_function, shown by Kineto and NVTX): "generation" > "text_encoder", "denoise" >
# "step_N" > ("denoiser", "guidance"), "vae_decode".
# Times each configuration unprofiled (median of --reps generations, synchronized wall time) and
# profiles the baseline once with the PyTorch profiler (shapes recorded): --kineto FILE.
# Prints "config NAME steps K cfg C res R median_ms T".
import argparse, json, math, statistics, time

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import CLIPTextConfig, CLIPTextModel

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=2)
p.add_argument("--reps", type=int, default=3)
p.add_argument("--kineto", default="")
p.add_argument("--nvtx", action="store_true", help="one baseline generation under emit_nvtx (for Nsight Systems), nothing else")
p.add_argument("--configs", default="base:20:1:1024,steps50:50:1:1024,steps10:10:1:1024,nocfg:20:0:1024,res1536:20:1:1536")
a = p.parse_args()
dev, dt = "cuda", torch.bfloat16
rf = torch.profiler.record_function
torch.manual_seed(0)

text = CLIPTextModel(CLIPTextConfig(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
                                    max_position_embeddings=77, vocab_size=49408)).to(dev, dt).eval()

D, H, L, P, C = 1152, 16, 16, 2, 4


class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.ada = nn.Linear(D, 6 * D)
        s.n1, s.n2, s.n3 = nn.LayerNorm(D, elementwise_affine=False), nn.LayerNorm(D), nn.LayerNorm(D, elementwise_affine=False)
        s.qkv, s.o = nn.Linear(D, 3 * D), nn.Linear(D, D)
        s.cq, s.ckv, s.co = nn.Linear(D, D), nn.Linear(768, 2 * D), nn.Linear(D, D)
        s.f1, s.f2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(s, x, c, t):
        b, n, _ = x.shape
        sh1, sc1, g1, sh2, sc2, g2 = s.ada(t).unsqueeze(1).chunk(6, dim=-1)
        h = s.n1(x) * (1 + sc1) + sh1
        q, k, v = s.qkv(h).view(b, n, 3, H, D // H).permute(2, 0, 3, 1, 4)
        x = x + g1 * s.o(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, D))
        q = s.cq(s.n2(x)).view(b, n, H, D // H).transpose(1, 2)
        k, v = s.ckv(c).view(b, c.shape[1], 2, H, D // H).permute(2, 0, 3, 1, 4)
        x = x + s.co(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, D))
        h = s.n3(x) * (1 + sc2) + sh2
        return x + g2 * s.f2(F.gelu(s.f1(h), approximate="tanh"))


class DiT(nn.Module):
    def __init__(s):
        super().__init__()
        s.patch = nn.Linear(C * P * P, D)
        s.temb = nn.Sequential(nn.Linear(256, D), nn.SiLU(), nn.Linear(D, D))
        s.blocks = nn.ModuleList([Block() for _ in range(L)])
        s.out = nn.Linear(D, C * P * P)

    def forward(s, z, c, t):
        b, _, hh, ww = z.shape
        x = z.view(b, C, hh // P, P, ww // P, P).permute(0, 2, 4, 1, 3, 5).reshape(b, (hh // P) * (ww // P), C * P * P)
        half = torch.exp(-math.log(10000) * torch.arange(128, device=z.device, dtype=torch.float32) / 128)
        e = t.float()[:, None] * half[None]
        te = s.temb(torch.cat([e.cos(), e.sin()], -1).to(z.dtype))
        x = s.patch(x)
        for blk in s.blocks:
            x = blk(x, c, te)
        x = s.out(x).view(b, hh // P, ww // P, C, P, P).permute(0, 3, 1, 4, 2, 5).reshape(b, C, hh, ww)
        return x


class Decoder(nn.Module):
    def __init__(s):
        super().__init__()
        s.inp = nn.Conv2d(C, 512, 3, padding=1)
        chans = [512, 512, 256, 128]
        s.ups = nn.ModuleList()
        for i in range(3):
            s.ups.append(nn.ModuleList([nn.Conv2d(chans[i], chans[i + 1], 3, padding=1), nn.GroupNorm(32, chans[i + 1]),
                                        nn.Conv2d(chans[i + 1], chans[i + 1], 3, padding=1)]))
        s.outc = nn.Conv2d(128, 3, 3, padding=1)

    def forward(s, z):
        x = s.inp(z)
        for c1, gn, c2 in s.ups:
            x = F.interpolate(x, scale_factor=2.0, mode="nearest")
            x = c1(x)
            x = x + c2(F.silu(gn(x)))
        return s.outc(F.silu(x))


dit = DiT().to(dev, dt).eval()
vae = Decoder().to(dev, dt).eval().to(memory_format=torch.channels_last)


@torch.no_grad()
def generate(steps, cfg, res):
    b = a.batch
    with rf("generation"):
        with rf("text_encoder"):
            ids = torch.randint(0, 49408, (2 * b if cfg else b, 77), device=dev)
            c = text(input_ids=ids).last_hidden_state
        z = torch.randn(b, C, res // 8, res // 8, device=dev, dtype=dt)
        sig = torch.linspace(1.0, 0.0, steps + 1, device=dev)
        with rf("denoise"):
            for i in range(steps):
                with rf(f"step_{i}"):
                    with rf("denoiser"):
                        zin = torch.cat([z, z]) if cfg else z
                        t = torch.full((zin.shape[0],), float(i), device=dev)
                        eps = dit(zin, c, t)
                    with rf("guidance"):
                        if cfg:
                            eu, ec = eps.chunk(2)
                            eps = eu + 5.0 * (ec - eu)
                        z = z + (sig[i + 1] - sig[i]) * eps
        with rf("vae_decode"):
            img = vae(z.contiguous(memory_format=torch.channels_last))
    return img


if a.nvtx:  # NVTX ranges for every op (with shapes) and every record_function range
    name, k, cfg, r = a.configs.split(",")[0].split(":")
    generate(int(k), bool(int(cfg)), int(r))
    torch.cuda.synchronize()
    with torch.autograd.profiler.emit_nvtx(record_shapes=True):
        t0 = time.perf_counter()
        generate(int(k), bool(int(cfg)), int(r))
        torch.cuda.synchronize()
    print(f"nvtx {name} ms {(time.perf_counter() - t0) * 1e3:.2f}", flush=True)
    raise SystemExit(0)

res = {}
for spec in a.configs.split(","):
    name, k, cfg, r = spec.split(":")
    k, cfg, r = int(k), bool(int(cfg)), int(r)
    generate(min(k, 3), cfg, r)  # warm-up at this size (kernels, allocator)
    torch.cuda.synchronize()
    ts = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        generate(k, cfg, r)
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e3)
    res[name] = statistics.median(ts)
    print(f"config {name} steps {k} cfg {int(cfg)} res {r} median_ms {res[name]:.2f} all {' '.join(f'{x:.1f}' for x in ts)}", flush=True)

if a.kineto:
    from torch.profiler import ProfilerActivity, profile
    name, k, cfg, r = a.configs.split(",")[0].split(":")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        t0 = time.perf_counter()
        generate(int(k), bool(int(cfg)), int(r))
        torch.cuda.synchronize()
        prof_ms = (time.perf_counter() - t0) * 1e3
    prof.export_chrome_trace(a.kineto)
    print(f"profiled {name} median_ms {prof_ms:.2f}", flush=True)
