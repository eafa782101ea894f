# Public Hugging Face transformer workloads on one GPU, built from a config with random weights
# (no download), eager attention (attn_implementation="eager"), for cross-GPU forecasts from fp32
# traces and for precision / compile what-if pairs and profiler-overhead measurements.
# Workloads:
#   bert_large-inf-8x512      BertModel (hidden 1024, 24 layers, 16 heads, ffn 4096) forward, no grad
#   gpt2_large-inf-4x1024     GPT2LMHeadModel (n_embd 1280, 36 layers, 20 heads) forward, no grad
#   gpt2_large-train-1x1024   GPT2LMHeadModel forward + LM loss + backward + torch.optim.AdamW step,
#                             zero_grad(set_to_none=True); dropout on (model.train())
#   opt_1.3b-inf-2x2048       OPTForCausalLM (hidden 2048, 24 layers, 32 heads, ffn 8192) forward, no grad
#   llama_1b-inf-4x1024       LlamaForCausalLM (hidden 2048, 16 layers, 32 heads, 8 KV heads, ffn 8192, vocab
#                             32000, RMSNorm, rotary, SwiGLU) forward, no grad
#   llama_1b-train-1x1024     LlamaForCausalLM forward + LM loss + backward + AdamW step
#   qwen2_1.5b-inf-4x1024     Qwen2ForCausalLM (Qwen2-1.5B's shape: hidden 1536, 28 layers, 12 heads, 2 KV
#                             heads, ffn 8960, vocab 151936, q/k/v biases) forward, no grad
#   phi3_mini-inf-2x1024      Phi3ForCausalLM (Phi-3-mini's shape: hidden 3072, 32 layers, 32 heads, ffn 8192,
#                             vocab 32064; fused qkv and gate/up projections) forward, no grad
#   gemma_2b-inf-4x1024       GemmaForCausalLM (Gemma-2B's shape: hidden 2048, 18 layers, 8 heads, 1 KV head,
#                             head 256, ffn 16384, vocab 256000, GeGLU) forward, no grad
#   pythia_1.4b-inf-4x1024    GPTNeoXForCausalLM (Pythia-1.4B's shape: hidden 2048, 24 layers, 16 heads, ffn 8192,
#                             vocab 50304, rotary on a quarter of each head, parallel attention and MLP) forward
#   pythia_1.4b-train-1x1024  the same: forward + LM loss + backward + AdamW step
#   bloom_1b1-inf-4x1024      BloomForCausalLM (BLOOM-1b1's shape: hidden 1536, 24 layers, 16 heads, vocab
#                             250880, ALiBi position biases, fused qkv) forward, no grad
#   t5_large_enc-inf-8x512    T5EncoderModel (T5 v1.1 large's encoder: d_model 1024, 24 layers, 16 heads, d_ff 2816,
#                             gated tanh GELU, relative position buckets, RMS norms in fp32) forward, no grad
#   vit_large-inf-32x224      ViTForImageClassification (ViT-L/16: hidden 1024, 24 layers, 16 heads, ffn 4096,
#                             224x224 images: a 16x16 convolution, then 197 tokens) forward, no grad
#   vit_large-train-32x224    the same: forward + cross-entropy on 1,000 classes + backward + AdamW step
#   resnet50-inf-64x224       ResNetForImageClassification (ResNet-50: bottleneck blocks 3/4/6/3, 64 images
#                             224x224, cuDNN convolutions, batch norm in eval mode) forward, no grad
#   resnet50-train-32x224     the same at 32 images: forward + cross-entropy + backward + AdamW step
#   resnet50-inf-16x224       the inference at 16 images (the convolutions' smaller grids)
#   mobilenet_v2-inf-16x224   MobileNetV2ForImageClassification (the config's defaults: MobileNetV2 1.0 at 224,
#                             inverted residuals, depthwise 3x3 convolutions, batch norm, ReLU6) forward, no grad
#   regnet_y-inf-16x224       RegNetForImageClassification (the config's defaults: RegNetY, grouped 3x3
#                             convolutions of width 64, squeeze-and-excitation, batch norm) forward, no grad
#   bert_base-inf-1x128       BertModel (hidden 768, 12 layers, 12 heads, ffn 3072) forward, no grad
#   gpt2_medium-inf-4x512     GPT2LMHeadModel (n_embd 1024, 24 layers, 16 heads) forward, no grad
#   gpt2_medium-inf-1x64      the same at batch 1, 64 tokens (host-bound)
#   llama_1b-inf-1x64, opt_1.3b-inf-1x64: those models at batch 1, 64 tokens (host-bound)
#   gpt3_xl-*, opt_13-*       NeuSight's GPT-3 XL (GPT2LMHeadModel, n_embd 3072, 24 layers, 24 heads, 2048
#                             positions) and OPT-1.3B; training = forward + LM loss + backward, no optimizer
# Modes (one process may run several, --mode a,b,c; weights stay fp32 in every mode):
#   fp32            torch.backends.cuda.matmul.allow_tf32 = False, torch.backends.cudnn.allow_tf32 = False
#   tf32            both True
#   autocast-bf16   TF32 off, torch.autocast("cuda", dtype=torch.bfloat16) around forward and loss
#   compile         TF32 off, torch.compile(model) (default mode); the first call's wall time is
#                   printed as compile_s; --compile-limit-s aborts (exit 3) if it runs longer
#   compile-tf32    TF32 on, torch.compile(model) (a process's one compiled mode: the compiled model
#                   is made once a process)
#   compile-autocast  TF32 off, torch.compile(model) called under torch.autocast("cuda", dtype=torch.bfloat16)
#                   (a process's one compiled mode)
#   graph           TF32 off, inference only: the fp32 forward captured once as a CUDA graph
#                   (torch.cuda.graph, after 3 warm-up calls on a side stream) and replayed
# Timing: --warmup steps (default 5; compile: the first call + 10), then --steps steps (default 20
# inference, 10 training), each between CUDA events on the current stream with
# torch.cuda.synchronize() before and after. Prints per mode:
#   config ...; steps_ms ...; wall_steps_ms ...; median_ms X; mean/min/max; peak_mem_gib
# All modes' unprofiled timings run first; then the profiled runs (so no profiler has run in the
# process before an unprofiled timing).
# --kineto DIR: per mode, torch.profiler (CPU + CUDA, schedule wait=1 warmup=2 active=3,
#   record_shapes unless --no-shapes, Python stacks with --with-stack), each step in
#   record_function(f"step{i}"), chrome trace to DIR/<workload>.<mode>[.noshapes][.stack].kineto.json.gz; prints profiled_steps_ms (all 6 steps) and
#   profiled_median_ms (the 3 active steps). --also-noshapes MODES: for those modes also a second
#   profile without shapes (after the one with shapes).
# --nvtx: each timed step in torch.cuda.nvtx range "step{i}" (warm-ups in "warm{i}"), no Kineto, for
#   Nsight Systems; the times print as nvtx_steps_ms / profiled_median_ms.
# --sync-dir DIR --sync-n N: for several processes compiling at once: after compiling and warming
#   up, mark DIR/<workload>.ready, wait until N workloads are marked .ready or .done (the caller
#   writes .done when a process ends) or --sync-wait-s passed, then take an exclusive lock on
#   DIR/gpu.lock for the timing and profiling, so no two processes time on the GPU together and
#   no compilation runs during a timing.
# --vocab N: the model's vocabulary size instead of its config's (GPT-2's 50257 padded to 50304).
# --batch N: the workload's model and sequence at batch N (logs and traces named for it).
# --logdir DIR: also write each part's lines to DIR/<workload>.<mode>.plain.log,
#   DIR/<workload>.<mode>[.noshapes].kineto.log or DIR/<workload>.<mode>.nsys.log.
import argparse, fcntl, os, signal, statistics, sys, time

import torch
import transformers
from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, OPTConfig, OPTForCausalLM
from transformers import Qwen2Config, Qwen2ForCausalLM
try:  # the held-out families of validate/reference/h100/hf_heldout
    from transformers import BloomConfig, BloomForCausalLM, GPTNeoXConfig, GPTNeoXForCausalLM, T5Config, T5EncoderModel
    from transformers import GemmaConfig, GemmaForCausalLM, Phi3Config, Phi3ForCausalLM
    from transformers import ResNetConfig, ResNetForImageClassification, ViTConfig, ViTForImageClassification
    from transformers import MobileNetV2Config, MobileNetV2ForImageClassification, RegNetConfig, RegNetForImageClassification
except ImportError:
    pass

WORKLOADS = {
    # name: (model kind, train?, batch, seq)
    "bert_large-inf-8x512": ("bert_large", False, 8, 512),
    "gpt2_large-inf-4x1024": ("gpt2_large", False, 4, 1024),
    "gpt2_large-train-1x1024": ("gpt2_large", True, 1, 1024),
    "opt_1.3b-inf-2x2048": ("opt_1.3b", False, 2, 2048),
    "llama_1b-inf-4x1024": ("llama_1b", False, 4, 1024),
    "llama_1b-train-1x1024": ("llama_1b", True, 1, 1024),
    "qwen2_1.5b-inf-4x1024": ("qwen2_1.5b", False, 4, 1024),
    "phi3_mini-inf-2x1024": ("phi3_mini", False, 2, 1024),
    "gemma_2b-inf-4x1024": ("gemma_2b", False, 4, 1024),
    "pythia_1.4b-inf-4x1024": ("pythia_1.4b", False, 4, 1024),
    "pythia_1.4b-train-1x1024": ("pythia_1.4b", True, 1, 1024),
    "bloom_1b1-inf-4x1024": ("bloom_1b1", False, 4, 1024),
    "t5_large_enc-inf-8x512": ("t5_large_enc", False, 8, 512),
    "vit_large-inf-32x224": ("vit_large", False, 32, 224),
    "vit_large-train-32x224": ("vit_large", True, 32, 224),
    "resnet50-inf-64x224": ("resnet50", False, 64, 224),
    "resnet50-train-32x224": ("resnet50", True, 32, 224),
    "resnet50-inf-16x224": ("resnet50", False, 16, 224),
    "mobilenet_v2-inf-16x224": ("mobilenet_v2", False, 16, 224),
    "regnet_y-inf-16x224": ("regnet_y", False, 16, 224),
    "bert_base-inf-1x128": ("bert_base", False, 1, 128),
    "gpt2_medium-inf-4x512": ("gpt2_medium", False, 4, 512),
    "gpt2_medium-inf-1x64": ("gpt2_medium", False, 1, 64),
    "llama_1b-inf-1x64": ("llama_1b", False, 1, 64),
    "opt_1.3b-inf-1x64": ("opt_1.3b", False, 1, 64),
    # NeuSight's whole-model workloads (its configs; training = forward + loss.backward(), no optimizer)
    "gpt3_xl-inf-2x2048": ("gpt3_xl", False, 2, 2048),
    "gpt3_xl-train-1x2048": ("gpt3_xl", True, 1, 2048),
    "opt_13-inf-2x2048": ("opt_1.3b", False, 2, 2048),
    "opt_13-train-1x2048": ("opt_1.3b", True, 1, 2048),
}
NO_OPTIMIZER = {"gpt3_xl-train-1x2048", "opt_13-train-1x2048"}
MODES = ("fp32", "tf32", "autocast-bf16", "compile", "compile-tf32", "compile-autocast", "graph")

p = argparse.ArgumentParser()
p.add_argument("--workload", required=True, choices=sorted(WORKLOADS))
p.add_argument("--mode", default="fp32", help="one or more of %s, comma separated" % ",".join(MODES))
p.add_argument("--steps", type=int, default=0, help="timed steps (default 20 inference, 10 training); 0 with --kineto-only")
p.add_argument("--warmup", type=int, default=-1, help="warm-up steps (default 5; compile 10 after the compiling call)")
p.add_argument("--kineto", default="", help="profile each mode with torch.profiler, traces into this folder")
p.add_argument("--no-shapes", action="store_true", help="Kineto without record_shapes")
p.add_argument("--with-stack", action="store_true", help="Kineto with Python stacks (with_stack=True; trace name .stack)")
p.add_argument("--also-noshapes", default="", help="modes that also get a profile without shapes")
p.add_argument("--kineto-only", action="store_true", help="skip the unprofiled timing")
p.add_argument("--nvtx", action="store_true")
p.add_argument("--logdir", default="")
p.add_argument("--vocab", type=int, default=0, help="the model's vocabulary size instead of its config's (50304: GPT-2's padded to 64)")
p.add_argument("--compile-limit-s", type=float, default=0.0)
p.add_argument("--sync-dir", default="")
p.add_argument("--sync-n", type=int, default=1)
p.add_argument("--sync-wait-s", type=float, default=300.0)
p.add_argument("--batch", type=int, default=0, help="the batch instead of the workload's (its name then says it: bert_base-inf-16x128)")
a = p.parse_args()
modes = [m for m in a.mode.split(",") if m]
for m in modes:
    if m not in MODES:
        sys.exit(f"unknown mode {m}")
if sum(m.startswith("compile") for m in modes) > 1:  # the compiled model is made once a process
    sys.exit("one compiled mode a process: " + ",".join(m for m in modes if m.startswith("compile")))
kind, train, B, S = WORKLOADS[a.workload]
if a.batch > 0:  # another batch of the workload's model and sequence: named for it
    B = a.batch
    a.workload = f"{a.workload.rsplit('-', 1)[0]}-{B}x{S}"
# BERT-base: SDPA attention (eager attention builds its mask from a host scalar, which a CUDA graph
# cannot capture); every other workload eager attention.
ATTN = "sdpa" if kind == "bert_base" else "eager"
steps = a.steps or (10 if train else 20)
dev = torch.device("cuda")
torch.manual_seed(0)

_logs = {}


def out(part, line):
    """print, and append to the part's log (part = (mode, kind))."""
    print(line, flush=True)
    if a.logdir:
        mode, k = part
        path = os.path.join(a.logdir, f"{a.workload}.{mode}.{k}.log")
        f = _logs.get(path)
        if f is None:
            f = _logs[path] = open(path, "a")
        f.write(line + "\n")
        f.flush()


def set_tf32(on):
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


def precision_state():
    try:
        return f"matmul.fp32_precision={torch.backends.cuda.matmul.fp32_precision} cudnn.fp32_precision={torch.backends.cudnn.fp32_precision}"
    except Exception:  # older torch
        return f"matmul.allow_tf32={torch.backends.cuda.matmul.allow_tf32} cudnn.allow_tf32={torch.backends.cudnn.allow_tf32}"


def make_config():
    if kind == "bert_large":
        return BertModel, BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096)
    if kind == "gpt2_large":
        return GPT2LMHeadModel, GPT2Config(n_embd=1280, n_layer=36, n_head=20)
    if kind == "gpt3_xl":
        return GPT2LMHeadModel, GPT2Config(n_embd=3072, n_layer=24, n_head=24, n_positions=2048, n_ctx=2048, activation_function="gelu_new")
    if kind == "bert_base":
        return BertModel, BertConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
    if kind == "gpt2_medium":
        return GPT2LMHeadModel, GPT2Config(n_embd=1024, n_layer=24, n_head=16)
    if kind == "qwen2_1.5b":
        return Qwen2ForCausalLM, Qwen2Config(hidden_size=1536, num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2,
                                             intermediate_size=8960, vocab_size=151936, max_position_embeddings=2048,
                                             tie_word_embeddings=True)
    if kind == "phi3_mini":
        return Phi3ForCausalLM, Phi3Config(hidden_size=3072, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32,
                                           intermediate_size=8192, vocab_size=32064, max_position_embeddings=4096)
    if kind == "gemma_2b":
        return GemmaForCausalLM, GemmaConfig(hidden_size=2048, num_hidden_layers=18, num_attention_heads=8, num_key_value_heads=1,
                                             head_dim=256, intermediate_size=16384, vocab_size=256000, max_position_embeddings=2048)
    if kind == "pythia_1.4b":
        return GPTNeoXForCausalLM, GPTNeoXConfig(hidden_size=2048, num_hidden_layers=24, num_attention_heads=16, intermediate_size=8192,
                                                 vocab_size=50304, rotary_pct=0.25, use_parallel_residual=True,
                                                 max_position_embeddings=2048)
    if kind == "bloom_1b1":
        return BloomForCausalLM, BloomConfig(hidden_size=1536, n_layer=24, n_head=16, vocab_size=250880)
    if kind == "t5_large_enc":
        return T5EncoderModel, T5Config(d_model=1024, num_layers=24, num_heads=16, d_kv=64, d_ff=2816, feed_forward_proj="gated-gelu",
                                        vocab_size=32128)
    if kind == "vit_large":
        return ViTForImageClassification, ViTConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096,
                                                    image_size=224, patch_size=16, num_labels=1000)
    if kind == "resnet50":
        return ResNetForImageClassification, ResNetConfig(num_labels=1000)  # the defaults are ResNet-50's
    if kind == "mobilenet_v2":
        return MobileNetV2ForImageClassification, MobileNetV2Config(num_labels=1000)  # MobileNetV2 1.0 at 224
    if kind == "regnet_y":
        return RegNetForImageClassification, RegNetConfig(num_labels=1000)  # the defaults: RegNetY
    if kind == "llama_1b":
        return LlamaForCausalLM, LlamaConfig(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                                             intermediate_size=8192, vocab_size=32000, max_position_embeddings=2048)
    return OPTForCausalLM, OPTConfig(hidden_size=2048, num_hidden_layers=24, num_attention_heads=32, ffn_dim=8192,
                                     max_position_embeddings=2048, word_embed_proj_dim=2048, do_layer_norm_before=True)


def build():
    cls, cfg = make_config()
    if a.vocab > 0:
        cfg.vocab_size = a.vocab
    try:
        cfg._attn_implementation = ATTN
    except Exception:
        pass
    errs = []
    for attempt in ("from_config_cuda", "ctor_cuda", "ctor_cpu"):
        try:
            if attempt == "from_config_cuda":
                with torch.device(dev):
                    m = cls._from_config(cfg, attn_implementation=ATTN)
            elif attempt == "ctor_cuda":
                with torch.device(dev):
                    m = cls(cfg)
            else:
                m = cls(cfg)
            m = m.to(dev, torch.float32)
            return m, attempt, errs
        except Exception as e:  # report and try the next way
            errs.append(f"{attempt}: {type(e).__name__}: {e}"[:300])
    raise RuntimeError("could not build model: " + " | ".join(errs))


t0 = time.perf_counter()
model, how, build_errs = build()
build_s = time.perf_counter() - t0
attn = getattr(model.config, "_attn_implementation", "?")
nparams = sum(p.numel() for p in model.parameters())
VISION = kind in ("vit_large", "resnet50", "mobilenet_v2", "regnet_y")
vocab = getattr(model.config, "vocab_size", 0) if not VISION else 0
g = torch.Generator(device=dev).manual_seed(0)
if VISION:  # S is the image side; labels are 1,000 classes
    ids = torch.randn((B, 3, S, S), device=dev, generator=g)
    labels = torch.randint(0, 1000, (B,), device=dev, generator=g)
    inputs = {"pixel_values": ids}
else:
    ids = torch.randint(0, vocab, (B, S), device=dev, generator=g)
    labels = ids
    inputs = {"input_ids": ids}
model.train(train)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4) if train and a.workload not in NO_OPTIMIZER else None
extra = {} if kind.startswith("bert") or kind.startswith("t5") or VISION else {"use_cache": False}


def graph_step(m):
    """The no-grad forward captured once as a CUDA graph; the step replays it."""
    if train:
        sys.exit("mode graph: inference workloads only")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(side):
        for _ in range(3):
            m(**inputs, **extra)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(g):
        m(**inputs, **extra)
    torch.cuda.synchronize()
    return g.replay


def make_step(mode, m):
    if mode == "graph":
        return graph_step(m)
    ac = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if mode in ("autocast-bf16", "compile-autocast") else None
    if train:
        def step():
            if ac:
                with ac():
                    loss = m(**inputs, labels=labels, **extra).loss
            else:
                loss = m(**inputs, labels=labels, **extra).loss
            loss.backward()
            if opt is not None:
                opt.step()
                opt.zero_grad(set_to_none=True)
            else:
                m.zero_grad(set_to_none=True)
    else:
        def step():
            with torch.no_grad():
                if ac:
                    with ac():
                        m(**inputs, **extra)
                else:
                    m(**inputs, **extra)
    return step


def timed(step, nvtx_name=None, rf_name=None):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    w0 = time.perf_counter()
    if nvtx_name:
        torch.cuda.nvtx.range_push(nvtx_name)
    if rf_name:
        with torch.profiler.record_function(rf_name):
            s.record(); step(); e.record()
    else:
        s.record(); step(); e.record()
    if nvtx_name:
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    return s.elapsed_time(e), (time.perf_counter() - w0) * 1e3


def fmt(xs):
    return " ".join(f"{x:.3f}" for x in xs)


compiled = {}


def model_for(mode, part):
    if not mode.startswith("compile"):
        return model
    if "m" not in compiled:
        compiled["m"] = torch.compile(model)
        step = make_step(mode, compiled["m"])
        if a.compile_limit_s > 0:
            def on_alarm(*_):
                out(part, f"compile_aborted limit_s {a.compile_limit_s:g} (first call still compiling)")
                os._exit(3)
            signal.signal(signal.SIGALRM, on_alarm)
            signal.alarm(int(a.compile_limit_s))
        torch.cuda.synchronize()
        t = time.perf_counter()
        step()
        torch.cuda.synchronize()
        compiled["s"] = time.perf_counter() - t
        signal.alarm(0)
    return compiled["m"]


_sync = {}


def sync_point(part):
    if not a.sync_dir or "fd" in _sync:
        return
    open(os.path.join(a.sync_dir, a.workload + ".ready"), "w").close()
    t = time.perf_counter()
    while True:
        names = {f.rsplit(".", 1)[0] for f in os.listdir(a.sync_dir) if f.endswith((".ready", ".done"))}
        if len(names) >= a.sync_n or time.perf_counter() - t > a.sync_wait_s:
            break
        time.sleep(0.25)
    t1 = time.perf_counter()
    fd = os.open(os.path.join(a.sync_dir, "gpu.lock"), os.O_CREAT | os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    _sync["fd"] = fd
    out(part, f"sync ready_workloads {len(names)} of {a.sync_n} barrier_wait_s {t1 - t:.1f} lock_wait_s {time.perf_counter() - t1:.1f}")


def header(mode, part, what):
    set_tf32(mode in ("tf32", "compile-tf32"))
    out(part, f"config workload {a.workload} model {kind} {'train' if train else 'inference'} batch {B} seq {S} mode {mode} "
              f"part {what} params {nparams} vocab {vocab} attn {attn} build {how} build_s {build_s:.1f} "
              f"{precision_state()} autocast {'bf16' if mode in ('autocast-bf16', 'compile-autocast') else 'none'} compiled {mode.startswith('compile')} "
              f"optimizer {'AdamW(lr=1e-4, defaults)' if opt is not None else 'none'} torch {torch.__version__} "
              f"transformers {transformers.__version__} gpu {torch.cuda.get_device_name()}")
    if build_errs:
        out(part, "build_fallbacks " + " | ".join(build_errs))


def plain(mode, nvtx=False):
    part = (mode, "nsys" if nvtx else "plain")
    header(mode, part, "nvtx" if nvtx else "plain")
    m = model_for(mode, part)
    if mode.startswith("compile"):
        out(part, f"compile_s {compiled['s']:.2f}")
    step = make_step(mode, m)
    nw = a.warmup if a.warmup >= 0 else (10 if mode.startswith("compile") else 5)
    for i in range(nw):
        timed(step, nvtx_name=f"warm{i}" if nvtx else None)
    if a.sync_dir:  # one more warm-up once the GPU is this process's alone
        sync_point(part)
        timed(step, nvtx_name="warm_last" if nvtx else None)
        nw += 1
    torch.cuda.reset_peak_memory_stats()
    ts, ws = [], []
    for i in range(steps):
        t, w = timed(step, nvtx_name=f"step{i}" if nvtx else None)
        ts.append(t); ws.append(w)
    med = statistics.median(ts)
    out(part, f"warmup {nw} steps {steps}")
    out(part, f"{'nvtx_' if nvtx else ''}steps_ms {fmt(ts)}")
    out(part, f"wall_steps_ms {fmt(ws)}")
    out(part, f"{'profiled_median_ms' if nvtx else 'median_ms'} {med:.3f}")
    out(part, f"mean_ms {statistics.mean(ts):.3f} min_ms {min(ts):.3f} max_ms {max(ts):.3f} wall_median_ms {statistics.median(ws):.3f}")
    out(part, f"peak_mem_gib {torch.cuda.max_memory_allocated() / 2**30:.2f}")


def kineto(mode, shapes):
    tag = ("" if shapes else ".noshapes") + (".stack" if a.with_stack else "")
    part = (mode, ("noshapes." if not shapes else "") + ("stack." if a.with_stack else "") + "kineto")
    header(mode, part, "kineto" + ("" if shapes else "-noshapes"))
    m = model_for(mode, part)
    step = make_step(mode, m)
    # already warm when the unprofiled timing ran in this process; otherwise warm up fully
    nw = 2 if not a.kineto_only else (a.warmup if a.warmup >= 0 else (10 if mode.startswith("compile") else 5))
    for i in range(nw):
        timed(step)
    sync_point(part)
    os.makedirs(a.kineto, exist_ok=True)
    path = os.path.join(a.kineto, f"{a.workload}.{mode}{tag}.kineto.json.gz")
    exp = {}

    def ready(prof):
        t = time.perf_counter()
        prof.export_chrome_trace(path)
        exp["s"] = time.perf_counter() - t

    WAIT, WARM, ACTIVE = 1, 2, 3
    ts, ws = [], []
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
                                schedule=torch.profiler.schedule(wait=WAIT, warmup=WARM, active=ACTIVE, repeat=1),
                                record_shapes=shapes, with_stack=a.with_stack, on_trace_ready=ready) as prof:
        for i in range(WAIT + WARM + ACTIVE):
            t, w = timed(step, rf_name=f"step{i}")
            ts.append(t); ws.append(w)
            prof.step()
    act = ts[WAIT + WARM:]
    out(part, f"kineto schedule wait {WAIT} warmup {WARM} active {ACTIVE} record_shapes {shapes} with_stack {a.with_stack} pre_warmup {nw}")
    out(part, f"profiled_steps_ms {fmt(ts)}")
    out(part, f"profiled_wall_steps_ms {fmt(ws)}")
    out(part, f"profiled_median_ms {statistics.median(act):.3f}")
    out(part, f"kineto_trace {path} bytes {os.path.getsize(path) if os.path.exists(path) else -1} export_s {exp.get('s', -1):.1f}")


if a.nvtx:
    for mode in modes:
        plain(mode, nvtx=True)
else:
    if not a.kineto_only:
        for mode in modes:
            plain(mode)
    if a.kineto:
        noshape_modes = [m for m in a.also_noshapes.split(",") if m]
        for mode in modes:
            kineto(mode, shapes=not a.no_shapes)
            if mode in noshape_modes and not a.no_shapes:
                kineto(mode, shapes=False)
for f in _logs.values():
    f.close()
