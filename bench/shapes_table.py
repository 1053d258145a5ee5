"""Benchmark: `torchlint shapes` on a GPT-2-small-sized model, worker start included.

Run: `python bench/shapes_table.py [RUNS]`. Writes two model files to a temporary folder and
times the whole command (`python -m torchlint shapes FILE::Class`, a fresh worker each time:
Python start, torch import, loading the file through the slicing loader, the shape check,
and the table's symbolic run) RUNS times (default 3):

* `GPT`: a nanoGPT-style GPT-2 small written in plain torch (12 layers, 768 wide, 124M
  parameters), the table's target figure (<= 2 s on an unloaded machine);
* `HFGPT2`: `transformers`' GPT2LMHeadModel built from `GPT2Config()` (GPT-2 small), which
  also pays for importing transformers (skipped when it is not installed).

Reported per model: wall time (median and best), CPU time of the command and its worker
(user + system; on a busy machine the wall time mostly measures waiting for a CPU), the time
the worker spent on the table itself, the number of rows and the parameter count.
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

GPT = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head
        self.n_embd = n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight

    def forward(self, idx):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))
"""

HF = """
import torch.nn as nn
from transformers import GPT2Config, GPT2LMHeadModel


class HFGPT2(nn.Module):
    def __init__(self):
        super().__init__()
        self.lm = GPT2LMHeadModel(GPT2Config())

    def forward(self, input_ids):
        return self.lm(input_ids, use_cache=False).logits
"""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bench(path: str, name: str, runs: int) -> dict[str, object]:
    walls, cpus = [], []
    payload: dict = {}
    for _ in range(runs):
        before = _children_cpu()
        started = time.perf_counter()
        command = ["-m", "torchlint", "shapes", f"{path}::{name}", "--output-format=json"]
        done = subprocess.run(
            [sys.executable, *command],
            capture_output=True,
            text=True,
            check=False,
        )
        walls.append(time.perf_counter() - started)
        cpus.append(_children_cpu() - before)
        if done.returncode not in (0, 1):
            raise SystemExit(f"torchlint shapes failed:\n{done.stderr}")
        payload = json.loads(done.stdout)
    (table,) = payload["models"]
    return {
        "model": name,
        "wall_median_s": round(statistics.median(walls), 2),
        "wall_best_s": round(min(walls), 2),
        "cpu_median_s": round(statistics.median(cpus), 2),
        "table_s": table.get("seconds"),
        "rows": len(table.get("rows") or []),
        "params": table.get("params"),
        "status": table.get("status"),
    }


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as folder:
        models = [("gpt_small.py", GPT, "GPT")]
        if importlib.util.find_spec("transformers") is not None:
            models.append(("hf_gpt2.py", HF, "HFGPT2"))
        for filename, source, name in models:
            path = os.path.join(folder, filename)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(source)
            print(json.dumps(bench(path, name, runs)))


if __name__ == "__main__":
    main()
