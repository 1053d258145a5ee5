"""Benchmark: shape-check real `transformers` models built from small configs (no weights).

Run: `python bench/shapes_transformers.py [--llama7b] [NAME ...]`. Each model is built on the
meta device from a config object (nothing is downloaded) and checked by the same code the
worker runs for a user's file, in a forked child like the worker does. The models are
correct, so every TL601-TL605 finding is a false positive. Reported: how each model was
checked (fx graph or the hooks fallback), skipped models and why, time per model, peak RSS.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import sys
import time
from typing import Any

TEXT = {"vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}
TEXT_FFN = {**TEXT, "intermediate_size": 128}
DECODER = {**TEXT_FFN, "num_key_value_heads": 2, "max_position_embeddings": 256}
VISION = {
    "image_size": 32,
    "patch_size": 8,
    "num_channels": 3,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 128,
}

#: (model class, config class, config arguments)
MODELS: list[tuple[str, str, dict[str, Any]]] = [
    ("BertModel", "BertConfig", TEXT_FFN),
    ("RobertaModel", "RobertaConfig", TEXT_FFN),
    ("XLMRobertaModel", "XLMRobertaConfig", TEXT_FFN),
    ("CamembertModel", "CamembertConfig", TEXT_FFN),
    ("ElectraModel", "ElectraConfig", {**TEXT_FFN, "embedding_size": 32}),
    ("AlbertModel", "AlbertConfig", {**TEXT_FFN, "embedding_size": 32}),
    (
        "DistilBertModel",
        "DistilBertConfig",
        {"vocab_size": 1000, "dim": 64, "n_layers": 2, "n_heads": 4, "hidden_dim": 128},
    ),
    ("DebertaModel", "DebertaConfig", TEXT_FFN),
    ("DebertaV2Model", "DebertaV2Config", TEXT_FFN),
    ("MPNetModel", "MPNetConfig", TEXT_FFN),
    ("ConvBertModel", "ConvBertConfig", {**TEXT_FFN, "embedding_size": 64}),
    ("GPT2Model", "GPT2Config", {"vocab_size": 1000, "n_embd": 64, "n_layer": 2, "n_head": 4}),
    (
        "GPTNeoModel",
        "GPTNeoConfig",
        {
            "vocab_size": 1000,
            "hidden_size": 64,
            "num_layers": 2,
            "num_heads": 4,
            "attention_types": [[["global", "local"], 1]],
        },
    ),
    (
        "GPTJModel",
        "GPTJConfig",
        {"vocab_size": 1000, "n_embd": 64, "n_layer": 2, "n_head": 4, "rotary_dim": 8},
    ),
    ("GPTNeoXModel", "GPTNeoXConfig", TEXT_FFN),
    (
        "CodeGenModel",
        "CodeGenConfig",
        {"vocab_size": 1000, "n_embd": 64, "n_layer": 2, "n_head": 4, "rotary_dim": 8},
    ),
    (
        "OPTModel",
        "OPTConfig",
        {
            "vocab_size": 1000,
            "hidden_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "ffn_dim": 128,
            "word_embed_proj_dim": 64,
        },
    ),
    (
        "BloomModel",
        "BloomConfig",
        {"vocab_size": 1000, "hidden_size": 64, "n_layer": 2, "n_head": 4},
    ),
    ("LlamaModel", "LlamaConfig", DECODER),
    ("MistralModel", "MistralConfig", DECODER),
    ("Qwen2Model", "Qwen2Config", DECODER),
    ("GemmaModel", "GemmaConfig", {**DECODER, "head_dim": 16}),
    ("Gemma2Model", "Gemma2Config", {**DECODER, "head_dim": 16}),
    ("PhiModel", "PhiConfig", TEXT_FFN),
    ("Phi3Model", "Phi3Config", {**DECODER, "pad_token_id": 0}),
    ("StableLmModel", "StableLmConfig", DECODER),
    ("Starcoder2Model", "Starcoder2Config", DECODER),
    ("OlmoModel", "OlmoConfig", DECODER),
    ("FalconModel", "FalconConfig", TEXT),
    (
        "MixtralModel",
        "MixtralConfig",
        {**DECODER, "num_local_experts": 4, "experts_implementation": "eager"},
    ),
    (
        "BartModel",
        "BartConfig",
        {
            "vocab_size": 1000,
            "d_model": 64,
            "encoder_layers": 2,
            "decoder_layers": 2,
            "encoder_attention_heads": 4,
            "decoder_attention_heads": 4,
            "encoder_ffn_dim": 128,
            "decoder_ffn_dim": 128,
        },
    ),
    (
        "T5EncoderModel",
        "T5Config",
        {
            "vocab_size": 1000,
            "d_model": 64,
            "d_ff": 128,
            "num_layers": 2,
            "num_heads": 4,
            "d_kv": 16,
        },
    ),
    ("ViTModel", "ViTConfig", VISION),
    ("DeiTModel", "DeiTConfig", VISION),
    ("BeitModel", "BeitConfig", VISION),
    ("Dinov2Model", "Dinov2Config", VISION),
    ("CLIPVisionModel", "CLIPVisionConfig", VISION),
    (
        "ConvNextModel",
        "ConvNextConfig",
        {"hidden_sizes": [16, 32, 64, 128], "depths": [1, 1, 1, 1], "num_channels": 3},
    ),
    (
        "ResNetModel",
        "ResNetConfig",
        {"embedding_size": 16, "hidden_sizes": [16, 32, 64, 128], "depths": [1, 1, 1, 1]},
    ),
    (
        "SwinModel",
        "SwinConfig",
        {
            "image_size": 32,
            "patch_size": 2,
            "embed_dim": 16,
            "depths": [1, 1],
            "num_heads": [2, 2],
            "window_size": 4,
        },
    ),
    (
        "SegformerModel",
        "SegformerConfig",
        {"hidden_sizes": [16, 32, 64, 128], "depths": [1, 1, 1, 1], "decoder_hidden_size": 64},
    ),
    (
        "Wav2Vec2Model",
        "Wav2Vec2Config",
        {
            **TEXT_FFN,
            "conv_dim": (32, 32),
            "conv_stride": (5, 2),
            "conv_kernel": (10, 3),
            "num_conv_pos_embeddings": 16,
            "num_conv_pos_embedding_groups": 4,
        },
    ),
]


def check_model(model_name: str, config_name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Build one model on meta and check it (runs in a forked child)."""
    import torch
    import transformers

    from torchlint.shapes.check import FileChecker
    from torchlint.shapes.loader import Project

    started = time.perf_counter()
    cpu_started = time.process_time()
    config = getattr(transformers, config_name)(**kwargs)
    with torch.device("meta"):
        model = getattr(transformers, model_name)(config)
    model.eval()
    built = time.perf_counter()
    cpu_built = time.process_time()
    project = Project([], {}, meta_context=lambda: torch.device("meta"))
    checker = FileChecker(project, {})
    checker.check_model(model, model_name, ("<bench>", 1), {"evidence": []}, {})
    done = time.perf_counter()
    record = checker.stats.models[0]
    return {
        "model": model_name,
        "path": record["path"],
        "result": record["result"],
        "findings": [f"{f['code']} {f['message']}" for f in checker.findings],
        "build_s": built - started,
        "check_s": done - built,
        "build_cpu_s": cpu_built - cpu_started,
        "check_cpu_s": time.process_time() - cpu_built,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def in_child(function: Any, *args: Any) -> dict[str, Any]:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            result = function(*args)
        except BaseException as exc:
            result = {"model": args[0], "error": f"{type(exc).__name__}: {exc}"[:300]}
        with os.fdopen(write_end, "w") as out:
            json.dump(result, out, default=str)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as handle:
        data = handle.read()
    os.waitpid(pid, 0)
    return json.loads(data) if data else {"model": args[0], "error": "child crashed"}


def llama_7b() -> dict[str, Any]:
    """The full Llama-2-7B configuration (defaults of LlamaConfig), built and checked."""
    return check_model("LlamaForCausalLM", "LlamaConfig", {})


def main() -> None:
    started = time.perf_counter()
    from torchlint.shapes import worker

    worker._quiet()
    worker.warm()
    import transformers

    wanted = [a for a in sys.argv[1:] if not a.startswith("--")]
    selected = [m for m in MODELS if not wanted or m[0] in wanted]
    # Import the modeling files before forking, so each check times only the check.
    loaded = [getattr(transformers, name) for spec in selected for name in spec[:2]]
    loaded.append(transformers.LlamaForCausalLM)
    gc.collect()
    gc.freeze()
    print(f"setup (torch, transformers, warm-up): {time.perf_counter() - started:.1f} s")
    rows = [in_child(check_model, *spec) for spec in selected]
    if "--llama7b" in sys.argv or not wanted:
        row = in_child(llama_7b)
        row["model"] = "LlamaForCausalLM (7B config)"
        rows.append(row)
    print("times in seconds, wall (CPU); the machine may be shared, CPU time is steadier")
    header = f"{'model':34} {'path':9} {'result':8} {'build':>12} {'check':>12} {'rss MB':>7}"
    print(header)
    for row in rows:
        if "error" in row:
            print(f"{row['model']:34} ERROR {row['error']}")
            continue
        build = f"{row['build_s']:.2f} ({row['build_cpu_s']:.2f})"
        check = f"{row['check_s']:.2f} ({row['check_cpu_s']:.2f})"
        print(
            f"{row['model']:34} {row['path']:9} {row['result']:8} {build:>12} {check:>12}"
            f" {row['rss_mb']:7.0f}"
        )
        for finding in row["findings"]:
            print(f"    {finding}")
    good = [r for r in rows if "error" not in r]
    counts: dict[str, int] = {}
    for row in good:
        key = "skipped" if row["result"] == "skipped" else row["path"]
        counts[key] = counts.get(key, 0) + 1
    false_positives = sum(
        1
        for r in good
        for f in r["findings"]
        if f[:5] in ("TL601", "TL602", "TL603", "TL604", "TL605")
    )
    print(
        f"\n{len(rows)} models: {counts.get('fx', 0)} checked by fx, "
        f"{counts.get('fallback', 0)} by the fallback, {counts.get('skipped', 0)} skipped, "
        f"{len(rows) - len(good)} errors; TL601-TL605 findings (false positives): {false_positives}"
    )
    for key, label in (("check_s", "wall"), ("check_cpu_s", "CPU")):
        times = sorted(r[key] for r in good)
        if times:
            middle = times[len(times) // 2]
            print(f"check time per model ({label}): median {middle:.2f} s, max {times[-1]:.2f} s")
    print(f"peak RSS of any check: {max((r['rss_mb'] for r in good), default=0):.0f} MB")


if __name__ == "__main__":
    main()
