"""``headsim models``: the families headsim reads and what is verified for each."""

from __future__ import annotations

from rich.table import Table

from .app import app, console

VERIFIED = ("tests/test_architectures.py on a tiny random model: attention = eager output_attentions, "
            "Z = probabilities × values (float64), batch and padding-side invariance")


@app.command()
def models() -> None:
    """List the supported model families: kind, where attention is read, window framing, sinks."""
    from ..model.arch import ARCHS

    table = Table(title="Supported families (every one: " + VERIFIED + ")")
    for col in ("family", "model_type", "kind", "attention read from", "window", "separator / sink role"):
        table.add_column(col, overflow="fold")
    framing = {"cls_sep": "[CLS] … [SEP]", "bos": "BOS …", "eos": "… EOS", "none": "text only",
               "auto": "as its tokenizer frames (BOS … where it has one)"}
    for a in ARCHS:
        kind = ("encoder-decoder: encoder self, decoder self, decoder cross" if a.decoder is not None
                else "decoder (causal)" if a.causal else "encoder")
        source = ("headsim's own softmax (plain; equal to eager)" if a.plain
                  else "eager attention function" if a.interface else "its attention module (eager path)")
        table.add_row(a.family, ", ".join(a.model_types), kind + (", shared layers" if a.shared_layers else ""),
                      source, framing[a.framing], a.sinks)
    console.print(table)
    console.print("Hybrid stacks (Jamba, Bamba, Nemotron-H, Zamba, Qwen3-Next, Qwen3.5, MiniMax, LFM3, RecurrentGemma …, "
                  "read off their modules): headsim analyses their softmax-attention layers only; loading one says "
                  "\"analysing N of M layers (the softmax-attention ones: …)\" and run.json records their numbers "
                  "(model.model_layers). See docs/models.md.")
