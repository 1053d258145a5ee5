"""How long after `textDocument/didChange` the language server publishes diagnostics.

Starts `torchlint server` (over stdio, as an editor would), opens a generated PyTorch file of
about 1,000 lines that several rules fire on, then makes one small edit at a time and waits
for the diagnostics of that version: the time from sending the edit to receiving them is the
latency an editor sees (debounce included). Target: a median of 100 ms at 1,250 lines.

    python bench/lsp_latency.py [--lines 1000] [--edits 40] [--debounce-ms 30] [--edit-kind code]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

BLOCK = """

class Net{i}(nn.Module):
    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
        self.dropout = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.dropout(self.layers[0](x))
        return self.layers[2](torch.relu(h))


def train_{i}(model, loader, optimizer, scheduler, device="cuda"):
    model.train()
    total = 0.0
    for step, (x, y) in enumerate(loader):
        x, y = x.to(device), y.to(device)
        logits = model(x)
        loss = F.cross_entropy(F.softmax(logits, dim=1), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        total += loss.item()
        if step % 100 == 0:
            print(f"step {{step}}: {{total / (step + 1):.4f}}")
    return total


@torch.no_grad()
def evaluate_{i}(model, loader):
    model.eval()
    correct = 0
    for x, y in loader:
        probs = torch.sigmoid(model(x))
        correct += (probs.argmax(dim=1) == y).sum().item()
    bce = nn.BCEWithLogitsLoss()(probs, torch.ones_like(probs))
    return correct, bce
"""


def make_source(lines: int) -> str:
    parts = ["import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"]
    i = 0
    while sum(p.count("\n") for p in parts) < lines:
        parts.append(BLOCK.format(i=i))
        i += 1
    return "".join(parts)


def engine_time(source: str, runs: int = 5) -> tuple[float, float, float]:
    """Median wall and CPU milliseconds of `lint_source` on `source` (default rules), and of a
    bare `libcst.parse_module`, in this process: what the server cannot go below."""
    import libcst

    from torchlint.engine import lint_source
    from torchlint.server.settings import settings_for

    enabled = settings_for(None, Path.cwd()).enabled
    wall, cpu, parse = [], [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        lint_source(source, "bench.py", enabled)
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
        start_cpu = time.process_time()
        libcst.parse_module(source)
        parse.append((time.process_time() - start_cpu) * 1000)
    return statistics.median(wall), statistics.median(cpu), statistics.median(parse)


def edited(lines: list[str], edit: int, kind: str = "comment") -> tuple[int, int, str]:
    """The `edit`-th edit, as a person would type it: a comment at the end of a line somewhere
    (`comment`: the findings can be carried over), or a digit added to a number literal
    (`code`: `total = 0.0` becomes `total = 0.01`, so the rules run again).
    Returns (line, column, text typed)."""
    if kind == "code":
        numbers = [i for i, text in enumerate(lines) if text.lstrip().startswith("total = 0.0")]
        line = numbers[(edit * 7) % len(numbers)]
        return line, len(lines[line]), "1"
    line = (edit * 37) % len(lines)
    return line, len(lines[line]), f"  # edit {edit}"


def server_path_time(source: str, edits: int, kind: str) -> tuple[float, float]:
    """Median CPU milliseconds of the server's lint of an edited buffer (`lint_document`, in
    this process), re-parsing by the edit as the server does, and parsing everything."""
    from torchlint.server.app import lint_document
    from torchlint.server.reparse import ParsedText

    lines = source.splitlines()
    previous = lint_document(None, "bench.py", source, Path.cwd(), "utf-16").parsed
    incremental, full = [], []
    for edit in range(edits):
        line, _, typed = edited(lines, edit, kind)
        lines[line] += typed
        text = "\n".join(lines) + "\n"
        start = time.process_time()
        linted = lint_document(None, "bench.py", text, Path.cwd(), "utf-16", previous)
        incremental.append((time.process_time() - start) * 1000)
        start = time.process_time()
        lint_document(None, "bench.py", text, Path.cwd(), "utf-16")
        full.append((time.process_time() - start) * 1000)
        assert isinstance(linted.parsed, ParsedText)
        previous = linted.parsed
    return statistics.median(incremental), statistics.median(full)


def cpu_seconds(pid: int) -> float:
    """User and system CPU time a process has used so far (Linux), or 0 elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Client(LanguageClient):
    def __init__(self) -> None:
        super().__init__("torchlint-bench", "1")
        self.received: dict[int, tuple[float, int]] = {}
        self.arrived = asyncio.Event()


async def measure(args: argparse.Namespace) -> int:
    client = Client()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def published(ls: Client, params: types.PublishDiagnosticsParams) -> None:
        if params.version is not None:
            ls.received[params.version] = (time.perf_counter(), len(params.diagnostics))
            ls.arrived.set()

    @client.feature(types.WINDOW_LOG_MESSAGE)
    def logged(ls: Client, params: types.LogMessageParams) -> None:
        print(f"server log: {params.message}", file=sys.stderr)

    await client.start_io(*args.server)
    root = Path.cwd()
    await client.initialize_async(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            root_uri=root.as_uri(),
            initialization_options={"debounceMs": args.debounce_ms, "shapes": False},
        )
    )
    client.initialized(types.InitializedParams())

    source = make_source(args.lines)
    uri = (root / "bench_lsp_latency_buffer.py").as_uri()  # never written: buffer text only
    version = 1
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id="python", version=version, text=source
            )
        )
    )

    async def wait_for(version: int) -> tuple[float, int]:
        while version not in client.received:
            client.arrived.clear()
            await asyncio.wait_for(client.arrived.wait(), 30)
        return client.received[version]

    await wait_for(version)
    lines = source.splitlines()
    latencies = []
    findings = 0
    pid = client._server.pid if client._server is not None else 0
    cpu = 0.0
    for edit in range(args.edits):
        line, column, typed = edited(lines, edit, args.edit_kind)
        version += 1
        change = types.TextDocumentContentChangePartial(
            range=types.Range(
                start=types.Position(line=line, character=column),
                end=types.Position(line=line, character=column),
            ),
            text=typed,
        )
        lines[line] += typed
        cpu -= cpu_seconds(pid)
        sent = time.perf_counter()
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[change],
            )
        )
        received, findings = await wait_for(version)
        latencies.append((received - sent) * 1000)
        cpu += cpu_seconds(pid)
        await asyncio.sleep(0.05)

    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()

    latencies.sort()
    p95 = latencies[max(0, round(len(latencies) * 0.95) - 1)]
    print(
        f"{len(lines)} lines, {findings} diagnostics, {len(latencies)} {args.edit_kind} edits,"
        f" debounce {args.debounce_ms} ms: didChange -> publishDiagnostics"
        f" median {statistics.median(latencies):.0f} ms, p95 {p95:.0f} ms,"
        f" max {latencies[-1]:.0f} ms; server CPU {cpu * 1000 / args.edits:.0f} ms per edit (mean)"
    )
    incremental, full = server_path_time(source, min(args.edits, 20), args.edit_kind)
    print(
        f"the server's lint of an edited buffer (in this process, CPU, median):"
        f" {incremental:.0f} ms re-parsing by the edit, {full:.0f} ms parsing everything"
    )
    wall, cpu, parse = engine_time(source)
    print(
        f"the engine alone (lint_source, in this process, same text): median {wall:.0f} ms wall,"
        f" {cpu:.0f} ms CPU (of which a bare libcst parse: {parse:.0f} ms CPU);"
        f" server overhead incl. debounce ~{statistics.median(latencies) - wall:.0f} ms"
    )
    load, cpus = os.getloadavg()[0], os.cpu_count() or 1
    if load > cpus:
        print(f"note: a load average of {load:.1f} on {cpus} CPUs inflates the wall times")
    return 0 if statistics.median(latencies) <= args.target_ms else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1000)
    parser.add_argument("--edits", type=int, default=40)
    parser.add_argument("--debounce-ms", type=int, default=30)
    parser.add_argument("--target-ms", type=float, default=100.0)
    parser.add_argument(
        "--edit-kind",
        choices=["comment", "code"],
        default="comment",
        help="what each edit types: a comment (findings carried over) or a digit in a number",
    )
    parser.add_argument(
        "--server",
        nargs="+",
        default=[sys.executable, "-m", "torchlint", "server"],
        help="the server command (default: this Python's torchlint server)",
    )
    return asyncio.run(measure(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
