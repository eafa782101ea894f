# A validation workload for model-mode replay (not one of $BNECK_EXTRA_TRACES/traces): a 4-layer MLP training
# step (batch 4096, width 4096, GELU, AdamW), fp32 or bf16 autocast, NVTX step ranges with op shapes.
# Usage: python3 mlp.py fp32|bf16
import sys, torch
prec = sys.argv[1]
torch.backends.cuda.matmul.allow_tf32 = False
torch.manual_seed(0)
N, D = 4096, 4096
m = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(D, D), torch.nn.GELU()) for _ in range(4)]).cuda()
opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
x = torch.randn(N, D, device="cuda")
def step():
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=(prec == "bf16")):
        loss = m(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
for _ in range(3):
    step()
torch.cuda.synchronize()
with torch.autograd.profiler.emit_nvtx(record_shapes=True):
    for i in range(5):
        torch.cuda.nvtx.range_push(f"step{i}")
        step()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
print("mlp", prec, "done")
