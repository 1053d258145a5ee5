"""Benchmark: shape-check worker start and per-file time on typical model files.

Run: `python bench/shapes_perf.py [COPIES]`. Writes COPIES (default 20) small model files
(a CNN, a ResNet-style net, an LSTM classifier, a small transformer; each file a different
mix) to a temporary directory, checks them in one worker, and reports the worker's start
time (import torch, warm-up, `gc.freeze()`), the time per file, and the worker's CPU time.
"""

from __future__ import annotations

import os
import resource
import statistics
import sys
import tempfile
import time

from torchlint.shapes import discover, evidence, worker_job
from torchlint.shapes.client import run_worker

MODELS = [
    """
class CNN{i}(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(64 * 8 * 8, 256)
        self.fc2 = nn.Linear(256, classes)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        return self.fc2(F.relu(self.fc1(x)))
""",
    """
class Block{i}(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        return F.relu(x + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


class ResNet{i}(nn.Module):
    def __init__(self, classes=100):
        super().__init__()
        self.stem = nn.Conv2d(3, 64, 7, stride=2, padding=3)
        self.layers = nn.Sequential(*[Block{i}(64) for _ in range(4)])
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        return self.fc(self.pool(self.layers(self.stem(x))).flatten(1))
""",
    """
class LSTM{i}(nn.Module):
    def __init__(self, vocab=10000, dim=128, hidden=256):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, hidden, batch_first=True, num_layers=2)
        self.fc = nn.Linear(hidden, 2)

    def forward(self, tokens):
        out, _ = self.lstm(self.embed(tokens))
        return self.fc(out[:, -1])
""",
    """
class Transformer{i}(nn.Module):
    def __init__(self, vocab=1000, dim=128):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        layer = nn.TransformerEncoderLayer(dim, 4, 256, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)))
""",
]
HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def main() -> None:
    copies = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    directory = tempfile.mkdtemp(prefix="torchlint_perf_")
    files = []
    for i in range(copies):
        body = MODELS[i % len(MODELS)] + (MODELS[(i + 1) % len(MODELS)] if i % 3 == 0 else "")
        path = os.path.join(directory, f"model_{i}.py")
        text = HEADER + body.replace("{i}", str(i))
        with open(path, "w") as handle:
            handle.write(text)
        files.append((path, text))
    infos = discover.scan(files)
    facts = evidence.collect(infos, files, None)
    jobs = [worker_job(info, facts) for info in infos]
    request = {
        "jobs": jobs,
        "texts": dict(files),
        "roots": [directory],
        "timeout": 20.0,
    }
    started = time.perf_counter()
    results, worker = run_worker(request, 20.0)
    total = time.perf_counter() - started
    seconds = sorted(r["seconds"] for r in results.values())
    codes: dict[str, int] = {}
    for result in results.values():
        for finding in result.get("findings", []):
            codes[finding["code"]] = codes.get(finding["code"], 0) + 1
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"files: {len(files)}; findings by code: {codes} (TL606 is information, not a bug)")
    ready = worker.get("ready", float("nan"))
    print(f"worker start (import torch, warm-up, freeze): {ready:.2f} s")
    print(
        f"per file: median {statistics.median(seconds):.3f} s, "
        f"max {seconds[-1]:.3f} s, mean {statistics.mean(seconds):.3f} s"
    )
    plain = sorted(r["seconds"] for r in results.values() if not r.get("findings"))
    sized = sorted(r["seconds"] for r in results.values() if r.get("findings"))
    if plain and sized:
        print(
            f"  files whose models pass at the first guess: median {statistics.median(plain):.3f} s"
            f"; files with a TL606 size analysis: median {statistics.median(sized):.3f} s"
        )
    print(
        f"total wall {total:.2f} s; worker CPU (user+sys, with children) "
        f"{usage.ru_utime + usage.ru_stime:.2f} s; peak RSS {usage.ru_maxrss / 1024:.0f} MB"
    )


if __name__ == "__main__":
    main()
