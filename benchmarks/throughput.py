#!/usr/bin/env python
"""Throughput of headsim's corpus statistics against the bare forward pass and a naive reference.

One process, the same windows for every contender:
  (a) bare forward: the model as loaded (SDPA attention), nothing captured;
  (b) headsim: every corpus statistic (headsim.runs.engine.Engine → headsim.stats.CorpusStats);
  (c) naive: what a careful researcher would write — Hugging Face ``output_attentions`` with the
      eager kernel, a hook for the head outputs, then per-window, per-head numpy code — on a
      subset, extrapolated per window.
Also: tokenisation/windowing throughput (one process and ``--workers`` processes), peak memory,
agreement of (b) with (c) on the subset, for bf16 the agreement of thresholded elements and head
statistics with fp32, and with ``--end-to-end N`` the wall time of ``headsim.analyze`` from text to a
written run directory for N windows (the default corpus repeated as needed).

    python benchmarks/throughput.py --device cpu --json benchmarks/results/throughput-cpu.json
    python benchmarks/throughput.py --device cuda --dtype bf16 --windows 4096 --end-to-end 20000 --json $OUT/throughput-cuda.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch

from headsim.runs.engine import Engine, mask_agreement
from headsim.corpus import default_corpus, load_corpus
from headsim.model.load import from_pretrained_objects, load_model
from headsim.stats import CorpusStats, heads_table
from headsim.tokens import punctuation_lookup
from headsim.windows import Framing
from headsim.windows import Windows, iter_windows

THRESHOLD, TOP_K = 0.3, 3


MODELS = ("embedded", "bert-base-random", "llama-random")


def build_model(device: str, dtype: str, attn: str | None = "sdpa", tokenizer: str | None = None, model: str = "embedded"):
    """The embedded MiniLM, or a BERT-base configuration with random weights (timing only).

    ``tokenizer``: for the random BERT-base, a directory saved with ``save_pretrained`` (the GPU kit
    carries MiniLM's, which has BERT-base's 30,522-token uncased vocabulary); default: the embedded
    model's. Every call with the same arguments gives the same weights (seed 0).
    """
    if model == "embedded":
        return load_model("default", device=device, dtype=dtype, attn_implementation=attn), "embedded all-MiniLM-L6-v2 (pretrained)"
    if model not in MODELS:  # a local model directory (the GPU kit carries MiniLM's weights in fp16)
        return load_model(model, device=device, dtype=dtype, attn_implementation=attn), f"{model} (pretrained)"
    from transformers import AutoTokenizer, BertConfig, BertModel

    tok = AutoTokenizer.from_pretrained(tokenizer) if tokenizer else load_model("default", device="cpu").tokenizer
    if model == "llama-random":
        return _llama_random(device, dtype, attn, tok)
    torch.manual_seed(0)
    net = BertModel(BertConfig(attn_implementation=attn), add_pooling_layer=False)
    loaded = from_pretrained_objects(net.to(device=device, dtype={"bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype, torch.float32)), tok,
                                     name="bert-base config, random weights")
    return loaded, "BERT-base configuration with random weights (timing only, not a pretrained model)"


def _llama_random(device: str, dtype: str, attn: str | None, tok):
    """A Llama-style decoder of MiniLM's size (6 layers, 12 query and 4 key/value heads, hidden 384,
    RoPE, causal) with random weights and the embedded tokenizer ([CLS] as its BOS): timing only."""
    import copy

    from transformers import LlamaConfig, LlamaModel

    tok = copy.deepcopy(tok)
    tok.bos_token = tok.cls_token
    config = LlamaConfig(vocab_size=len(tok), hidden_size=384, intermediate_size=1536, num_hidden_layers=6,
                         num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=512,
                         bos_token_id=tok.bos_token_id, pad_token_id=tok.pad_token_id)
    if attn:
        config._attn_implementation = attn
    torch.manual_seed(0)
    net = LlamaModel(config).to(device=device, dtype={"bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype, torch.float32))
    return (from_pretrained_objects(net, tok, name="llama-style config, random weights"),
            "Llama-style decoder of MiniLM's size (6 layers, 12 heads, 4 key/value heads) with random weights (timing only)")


CORPUS = "default"  # set by --corpus


def corpus_documents() -> list:
    return list(default_corpus() if CORPUS == "default" else load_corpus(CORPUS))


def make_batches(loaded, n: int, seq_len: int, batch: int, workers: int = 0,
                 sentences: str = "pysbd") -> tuple[list[Windows], float]:
    """``n`` packed windows of the corpus (cycled if needed) and windows/s of windowing."""
    texts = [d.text for d in corpus_documents()]
    out, got, t0 = [], 0, time.perf_counter()
    while got < n:
        for w in iter_windows(texts, loaded.tokenizer, seq_len, pack=True, batch_windows=batch, workers=workers,
                              token_strings=False, sentence_splitter=sentences, framing=loaded.framing):
            take = min(len(w), n - got)
            out.append(w.select(slice(0, take)) if take < len(w) else w)
            got += take
            if got >= n:
                break
    return out, n / (time.perf_counter() - t0)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _bare(loaded, w) -> None:
    """The baseline: the analysed stack called directly, as loaded, nothing captured (headsim's own
    passes all go through :mod:`headsim.model.tap`)."""
    with torch.inference_mode():
        loaded.arch.stack_of(loaded.model)(input_ids=torch.as_tensor(w.input_ids, device=loaded.device),
                                           attention_mask=torch.as_tensor(w.attention_mask, device=loaded.device))


BACKEND = "auto"  # set by --backend (or its old spellings --fused, --kernels / --no-kernels)
ROUNDS = 1  # set by --rounds


def new_stats(loaded, seq_len) -> CorpusStats:
    return CorpusStats(loaded.n_layers, loaded.n_heads, seq_len, threshold=THRESHOLD, top_k_columns=TOP_K,
                       device=loaded.device, backend=BACKEND)


def time_side_by_side(loaded, batches, device, seq_len) -> tuple[float, float, CorpusStats]:
    """Seconds of (a) the bare forward and (b) headsim over ``batches``, alternating batch by batch.

    Alternating means a slow spell of the machine hits both contenders alike, so their ratio is
    steadier than two separate loops (on the shared 2-core CI machine, same code: 0.71–0.80 as two
    loops). Each is warmed up first: on the first batch on a CPU, over every batch on a GPU (on the H100
    the first timed size ran the bare forward at 12,700 windows/s and the next sizes at 17,400, as
    clocks and allocator settled); (b) runs what ``headsim analyze`` runs
    (:meth:`headsim.runs.engine.Engine.process_safely`). ``--rounds R`` goes over the batches R times
    (a GPU run of a few thousand windows lasts well under a second per contender).
    """
    warm = Engine(loaded, new_stats(loaded, seq_len), lambda: new_stats(loaded, seq_len))
    for w in batches if device.startswith("cuda") else batches[:1]:
        _bare(loaded, w)
        warm.process_safely(w)
    engine = Engine(loaded, new_stats(loaded, seq_len), lambda: new_stats(loaded, seq_len))
    t_bare = t_head = 0.0
    for w in batches * ROUNDS:
        sync(device)
        t0 = time.perf_counter()
        _bare(loaded, w)
        sync(device)
        t1 = time.perf_counter()
        engine.process_safely(w)
        sync(device)
        t_bare, t_head = t_bare + (t1 - t0), t_head + (time.perf_counter() - t1)
    return t_bare, t_head, engine.stats


def profile(loaded, batches, device, seq_len, path: str, n: int = 3) -> None:
    """torch.profiler tables of ``n`` batches of (a) and of (b), self time per kernel/operator, to ``path``.

    Where (b) falls short of (a), this shows which of headsim's operators take the difference.
    """
    from torch.profiler import ProfilerActivity, profile as torch_profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    key = "self_cuda_time_total" if device.startswith("cuda") else "self_cpu_time_total"
    engine = Engine(loaded, new_stats(loaded, seq_len), lambda: new_stats(loaded, seq_len))
    tables = []
    for name, step in (("bare forward", lambda w: _bare(loaded, w)), ("headsim", engine.process_safely)):
        step(batches[0])
        sync(device)
        with torch_profile(activities=acts) as prof:
            for w in batches[1: n + 1]:
                step(w)
            sync(device)
        tables.append(f"## {name}, {n} batches\n" + prof.key_averages().table(sort_by=key, row_limit=40))
    Path(path).write_text("\n\n".join(tables))


def naive_stats(model, tokenizer, windows: Windows, seq_len: int, device, framing: Framing) -> dict:
    """Per-window, per-head numpy code on top of output_attentions (the naive reference); the [CLS] /
    [SEP] attention targets are the windows' opening and closing tokens (``framing``)."""
    cls_id, sep_id = framing.open, framing.close
    punct = punctuation_lookup(tokenizer)
    cfg = model.config
    L, H = cfg.num_hidden_layers, cfg.num_attention_heads
    T = seq_len
    r = {k: np.zeros((L, H), np.int64) for k in ("n_pairs", "n_repeat", "n_same_sentence", "n_repeat_same_sentence")}
    r.update(attn_sum=np.zeros((L, H, T, T)), attn_top=np.zeros((L, H, T, T)), sim_sum=np.zeros((L, H, T, T)),
             locations=np.zeros((L, H, T, T), np.int64), dist=np.zeros((L, H, T), np.int64), focus=np.zeros((L, H, 5)),
             anchor_sum=np.zeros((L, H)), anchor_windows=np.zeros((L, H), np.int64), sim_hist=np.zeros((L, H, 120), np.int64))
    captured = {}
    handles = [layer.attention.output.dense.register_forward_pre_hook(
        lambda m, inp, li=li: captured.__setitem__(li, inp[0].detach())) for li, layer in enumerate(model.encoder.layer)]
    try:
        for w in range(len(windows)):
            ids = torch.as_tensor(windows.input_ids[w: w + 1], device=device)
            mask = torch.as_tensor(windows.attention_mask[w: w + 1], device=device)
            with torch.no_grad():
                out = model(input_ids=ids, attention_mask=mask, output_attentions=True)
            n = int(windows.attention_mask[w].sum())
            tid = windows.input_ids[w, :n]
            sent = windows.sentence_ids[w, :n]
            for l in range(L):
                att = out.attentions[l][0].float().cpu().numpy()
                z = captured[l][0].float().cpu().numpy().reshape(T, H, -1)
                for h in range(H):
                    a = att[h, :n, :n]
                    r["attn_sum"][l, h, :n, :n] += a
                    top = np.argsort(-a.sum(0), kind="stable")[:TOP_K]
                    a2 = a.copy()
                    a2[:, top] = 0
                    r["attn_top"][l, h, :n, :n] += a2
                    r["focus"][l, h] += [a[:, tid == cls_id].sum(), a[:, tid == sep_id].sum(), a[:, punct[tid]].sum(),
                                         np.trace(a, -1), np.trace(a, 1)]
                    zh = z[:n, h]
                    s = zh @ zh.T
                    np.fill_diagonal(s, 0)
                    peak = s.max()
                    s = s / peak if peak > 0 else np.zeros_like(s)
                    r["sim_sum"][l, h, :n, :n] += s
                    iu = np.triu_indices(n, 1)
                    r["sim_hist"][l, h] += np.histogram(np.clip(s[iu], -0.2, 1.0 - 1e-9), bins=120, range=(-0.2, 1.0))[0]
                    keep = s[iu] > THRESHOLD
                    i, j = iu[0][keep], iu[1][keep]
                    r["n_pairs"][l, h] += len(i)
                    same = (sent[i] >= 0) & (sent[i] == sent[j])
                    rep = tid[i] == tid[j]
                    r["n_repeat"][l, h] += rep.sum()
                    r["n_same_sentence"][l, h] += same.sum()
                    r["n_repeat_same_sentence"][l, h] += (rep & same).sum()
                    r["dist"][l, h] += np.bincount(j - i, minlength=T)[:T]
                    np.add.at(r["locations"][l, h], (i, j), 1)
                    np.add.at(r["locations"][l, h], (j, i), 1)
                    if len(i):
                        counts = Counter()
                        for a_, b_ in zip(tid[i], tid[j]):
                            counts.update({a_, b_})
                        best = max(counts.values())
                        r["anchor_sum"][l, h] += best / len(i)
                        r["anchor_windows"][l, h] += 1
    finally:
        for hd in handles:
            hd.remove()
    return r


def repeated_corpus(n: int, seq_len: int):
    """The benchmark corpus repeated (documents renamed) until it gives about 1.1 × ``n`` windows."""
    from dataclasses import replace

    from headsim.corpus import Corpus

    docs = corpus_documents()
    chars = sum(len(d.text) for d in docs)
    repeat = min(64, max(1, -(-int(n * 1.1 * (seq_len - 2) * 4.2) // chars)))  # ≈ 4.2 characters per token
    return Corpus(f"{CORPUS} corpus × {repeat}", [replace(d, doc_id=f"{d.doc_id}#{r}") for r in range(repeat) for d in docs])


@contextmanager
def model_step_skipped(skip: bool):
    """With ``skip``, :meth:`headsim.runs.engine.Engine.process` only builds each batch on the device (no
    forward, no statistics), so a run times what it costs around the model: counting and windowing the
    corpus, moving batches, checkpoints and the run directory."""
    from headsim.runs.engine import Engine

    original = Engine.process
    if skip:
        Engine.process = lambda self, w, stats=None: self.batch_info(w)
    try:
        yield
    finally:
        Engine.process = original


def end_to_end(loaded, n: int, seq_len: int, batch: int | None, workers: int, sentences: str = "pysbd",
               around_model: bool = False) -> dict:
    """Wall time of headsim.analyze, text in → run directory written, for ``n`` windows (``batch``
    None: analyze's automatic batch size); with ``around_model`` the model step is skipped
    (:func:`model_step_skipped`).

    A first, separately timed analyze of one small batch (``warmup_*``) pays the process's one-time
    costs: Triton compiling its kernels (cached on disk afterwards), CUDA and library start-up. The
    timed run still starts its own windowing processes and writes its own run directory."""
    from headsim.runs.analyze import analyze

    corpus = repeated_corpus(n, seq_len)
    small = min(n, 64)
    with tempfile.TemporaryDirectory() as tmp, model_step_skipped(around_model):
        t0 = time.perf_counter()
        analyze(loaded, corpus, windows=small, out=f"{tmp}/warmup", seq_len=seq_len, batch_size=batch or small,
                workers=0, sentence_splitter=sentences, backend=BACKEND, progress=False)
        warm = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = analyze(loaded, corpus, windows=n, out=f"{tmp}/run", seq_len=seq_len, batch_size=batch,
                      workers=workers, sentence_splitter=sentences, backend=BACKEND, progress=False)
        wall = time.perf_counter() - t0
    return {"windows": res.meta["windows"], "batch_size": res.meta["batch_size"], "seconds": wall, "windows_per_s": res.meta["windows"] / wall,
            "analysis_seconds": res.meta["seconds"], "workers": workers, "sentences": sentences, "corpus": corpus.name,
            "warmup_windows": small, "warmup_seconds": warm, "model_step": "skipped" if around_model else "run"}


def windowing_scaling(tokenizer, counts: list[int], n: int, seq_len: int, sentences: str) -> dict:
    """Windowing alone (text → packed windows, as headsim analyze makes them) with each number of
    worker processes: windows/s over ``n`` windows, start-up included, and the time to the first batch."""
    from headsim.workpool import available_cpus

    texts = [d.text for d in repeated_corpus(n, seq_len)]
    rows = []
    for k in counts:
        t0, got, first = time.perf_counter(), 0, None
        for w in iter_windows(texts, tokenizer, seq_len, pack=True, batch_windows=256, workers=k,
                              token_strings=False, sentence_splitter=sentences):
            got += len(w)
            first = time.perf_counter() - t0 if first is None else first
            if got >= n:
                break
        wall = time.perf_counter() - t0
        rows.append({"workers": k, "windows": got, "seconds": wall, "windows_per_s": got / wall, "first_batch_s": first})
        print(f"windowing ({sentences}), {k:>2} worker processes: {got / wall:8.0f} windows/s over {got} windows "
              f"(first batch after {first:.2f} s)", flush=True)
    return {"sentences": sentences, "available_cpus": available_cpus(), "os_cpu_count": os.cpu_count(), "runs": rows}


def agreement_naive(stats: CorpusStats, ref: dict) -> dict:
    """Max differences between headsim's accumulators and the naive reference on the same windows."""
    ds = stats.to_dataset()
    acc = {k: ds[k].values for k in ds.data_vars}
    # the naive reference runs the eager kernel, headsim the SDPA one: values near the threshold may flip
    counts = ("n_pairs", "n_repeat", "n_same_sentence", "n_repeat_same_sentence")
    return {
        "pair_counts_equal": bool(all(np.array_equal(acc[k], ref[k]) for k in counts)),
        "pair_counts_max_rel_diff": float(max(np.abs(acc[k] - ref[k]).max() / max(ref[k].max(), 1) for k in counts)),
        "distance_hist_equal": bool(np.array_equal(acc["distance_hist"], ref["dist"])),
        "locations_equal": bool(np.array_equal(acc["location_counts"], ref["locations"])),
        "attn_sum_max_abs_diff": float(np.abs(acc["attn_sum"] - ref["attn_sum"]).max()),
        "sim_sum_max_abs_diff": float(np.abs(acc["sim_sum"] - ref["sim_sum"]).max()),
        "anchor_fraction_sum_max_abs_diff": float(np.abs(acc["anchor_fraction_sum"] - ref["anchor_sum"]).max()),
    }


def agreement_dtype(loaded_low, loaded_fp32, batches, seq_len) -> dict:
    """bf16/fp16 against fp32: identical thresholded elements and head-statistic differences."""
    s_low, s_32 = new_stats(loaded_low, seq_len), new_stats(loaded_fp32, seq_len)
    e_low = Engine(loaded_low, s_low, lambda: new_stats(loaded_low, seq_len))
    e_32 = Engine(loaded_fp32, s_32, lambda: new_stats(loaded_fp32, seq_len))
    for w in batches:
        e_low.process(w)
        e_32.process(w)
    h_low, h_32 = heads_table(s_low.to_dataset()), heads_table(s_32.to_dataset())
    cols = ["p_repeat", "p_same_sentence", "p_repeat_same_sentence", "anchor_fraction_mean"]
    return {"identical_thresholded_elements": mask_agreement(loaded_low, loaded_fp32, Windows.concat(batches), THRESHOLD),
            "max_abs_diff_head_stats": {c: float(np.nanmax(np.abs(h_low[c] - h_32[c]))) for c in cols}}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--model", default=None,
                    help="'embedded' MiniLM (default on CPU), 'bert-base-random' (default on CUDA; timing only) or a local model directory")
    ap.add_argument("--dtype", default=None, help="fp32 (default on CPU) or bf16 (default on CUDA)")
    ap.add_argument("--windows", type=int, default=None, help="windows for (a) and (b) (default: 256 on CPU, 4096 on CUDA)")
    ap.add_argument("--naive-windows", type=int, default=None, help="subset for (c) (default: 4 on CPU, 16 on CUDA)")
    ap.add_argument("--batch-size", default=None,
                    help="windows per batch (default 32 on CPU, 256 on CUDA); a comma list times (a) and (b) at each "
                         "size on the same windows (JSON batch_sweep), the first size for everything else")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--workers", type=int, default=None, help="windowing processes, 0 = in-process (default: as headsim analyze)")
    ap.add_argument("--corpus", default="default", help="corpus spec as for headsim analyze (default: the embedded one)")
    ap.add_argument("--tokenizer", default=None, help="CUDA mode: tokenizer directory (default: the embedded model's)")
    ap.add_argument("--backend", default="auto", choices=["auto", "eager", "numba", "compiled", "triton"],
                    help="headsim's statistics backend (default auto: Triton kernels on CUDA where Triton runs, else eager)")
    ap.add_argument("--fused", action="store_true", help="old spelling of --backend compiled")
    ap.add_argument("--kernels", action=argparse.BooleanOptionalAction, default=None,
                    help="old spelling of --backend triton (--no-kernels: --backend eager)")
    ap.add_argument("--rounds", type=int, default=None, help="passes over the windows for (a) and (b) (default: 1 on CPU, 3 on CUDA)")
    ap.add_argument("--sentences", default="pysbd", help="sentence splitter for windowing: pysbd, punkt or newline")
    ap.add_argument("--end-to-end", type=int, default=0, metavar="N", help="also time headsim.analyze on N windows")
    ap.add_argument("--end-to-end-only", action="store_true", help="time only headsim.analyze (--end-to-end N windows)")
    ap.add_argument("--around-model", action="store_true",
                    help="with --end-to-end: skip the model step (forward and statistics) to time what the run costs around it")
    ap.add_argument("--windowing-only", default=None, metavar="K,K,…",
                    help="time only windowing (--windows N windows, --sentences) with each listed number of worker processes")
    ap.add_argument("--launch", action="append", default=[], metavar="PASS=ROWS,WARPS,STAGES[,TILES]",
                    help="Triton launch of a pass (attention or pairs), e.g. pairs=16,8,2 or pairs=32,4,2,triangle; or a kernel_sweep.py JSON "
                         "whose best launches to use (default: headsim's ATTENTION_LAUNCH and PAIRS_LAUNCH)")
    ap.add_argument("--json", default=None, help="write the result here")
    ap.add_argument("--profile", default=None, metavar="PATH", help="also write torch.profiler tables of (a) and (b) here")
    args = ap.parse_args(argv)
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        sys.exit("error: --device cuda but CUDA is not available — run on a GPU machine or use --device cpu")
    dtype = args.dtype or ("bf16" if cuda else "fp32")
    n = args.windows or (4096 if cuda else 256)
    n_naive = args.naive_windows or (16 if cuda else 4)
    sizes = [int(x) for x in str(args.batch_size).split(",")] if args.batch_size else [256 if cuda else 32]
    bs = sizes[0]
    global CORPUS, BACKEND, ROUNDS
    BACKEND = "compiled" if args.fused else {True: "triton", False: "eager"}.get(args.kernels, args.backend)
    CORPUS, ROUNDS = args.corpus, args.rounds or (3 if cuda else 1)
    which = args.model or ("bert-base-random" if cuda else "embedded")
    launches = set_launches(args.launch)
    loaded, model_note = build_model(args.device, dtype, tokenizer=args.tokenizer, model=which)
    from headsim.runs.local import default_workers

    workers = default_workers(loaded, max(n, args.end_to_end)) if args.workers is None else args.workers

    def timed_end_to_end() -> dict:  # analyze's own batch size unless --batch-size was given
        return end_to_end(loaded, args.end_to_end, args.seq_len, bs if args.batch_size else None, workers, args.sentences,
                          args.around_model)

    if args.end_to_end_only or args.windowing_only:
        result = {"device": torch.cuda.get_device_name() if cuda else "cpu", "model": model_note, "dtype": dtype,
                  "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "kernel_launch": launches}
        if args.windowing_only:
            counts = [int(k) for k in args.windowing_only.split(",")]
            result["windowing_scaling"] = windowing_scaling(loaded.tokenizer, counts, n, args.seq_len, args.sentences)
        if args.end_to_end:
            result["end_to_end"] = timed_end_to_end()
            print("end to end (text → run directory):", json.dumps(result["end_to_end"]))
        return write_result(result, args.json)
    batches, first_rate = make_batches(loaded, n, args.seq_len, bs)
    # windowing rates over enough windows that start-up (first texts, worker processes) does not dominate
    n_win = max(n, 2048)
    windowing_rate = (first_rate if n >= 2048 and args.sentences == "pysbd"
                      else make_batches(loaded, n_win, args.seq_len, bs, 0, args.sentences)[1])
    parallel_rate = make_batches(loaded, n_win, args.seq_len, bs, workers, args.sentences)[1] if workers >= 1 else windowing_rate
    print(f"{model_note}; {n} windows × {args.seq_len} tokens, batch {bs}, {dtype} on {args.device}", flush=True)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    t_bare, t_head, stats = time_side_by_side(loaded, batches, args.device, args.seq_len)
    t_bare, t_head = t_bare / ROUNDS, t_head / ROUNDS
    print(f"bare {n / t_bare:.1f} windows/s, headsim {n / t_head:.1f} windows/s: ratio {t_bare / t_head:.3f} "
          f"(statistics backend {stats.backend_record()})", flush=True)
    sweep = {}
    every = Windows.concat(batches) if sizes[1:] else None
    for size in sizes[1:]:
        resized = [every.select(slice(i, i + size)) for i in range(0, len(every), size)]
        tb, th, _ = time_side_by_side(loaded, resized, args.device, args.seq_len)
        sweep[size] = {"bare_windows_per_s": n * ROUNDS / tb, "headsim_windows_per_s": n * ROUNDS / th, "ratio_vs_bare": tb / th}
        print(f"batch {size}: bare {n * ROUNDS / tb:.1f} windows/s, headsim {n * ROUNDS / th:.1f}: ratio {tb / th:.3f}", flush=True)
    if args.profile:
        profile(loaded, batches, args.device, args.seq_len, args.profile)
    # the naive reference reads BERT's module layout; other families are timed without it
    if loaded.arch.layers != "encoder.layer" or not loaded.arch.plain:
        n_naive = 0
    t_naive, ref = float("nan"), None
    if n_naive:
        naive_model, _ = build_model(args.device, dtype, attn="eager", tokenizer=args.tokenizer, model=which)
        if which != "embedded":  # same random weights (seeded anyway; made explicit)
            naive_model.model.load_state_dict(loaded.model.state_dict())
        subset = Windows.concat(batches).select(slice(0, n_naive))
        t0 = time.perf_counter()
        ref = naive_stats(naive_model.model, loaded.tokenizer, subset, args.seq_len, loaded.device, loaded.framing)
        t_naive = (time.perf_counter() - t0) / n_naive
        sub_engine = Engine(loaded, new_stats(loaded, args.seq_len), lambda: new_stats(loaded, args.seq_len))
        sub_engine.process(subset)
    result = {
        "device": torch.cuda.get_device_name() if cuda else f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)",
        "model": model_note, "corpus": args.corpus, "statistics_backend": stats.backend_record(), "rounds": ROUNDS, "dtype": dtype, "windows": n, "seq_len": args.seq_len, "batch_size": bs,
        "bare_windows_per_s": n / t_bare, "headsim_windows_per_s": n / t_head, "naive_windows_per_s": 1.0 / t_naive if n_naive else None,
        "naive_windows_measured": n_naive, "windowing_windows_per_s": windowing_rate,
        "windowing_windows_measured": n_win, "sentences": args.sentences, "windowing_workers": workers, "windowing_parallel_windows_per_s": parallel_rate,
        "peak_memory_bytes": {"cpu_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                              "gpu_max_allocated": torch.cuda.max_memory_allocated() if cuda else None},
        "agreement_vs_naive": agreement_naive(sub_engine.stats, ref) if n_naive else None,
        "family": loaded.arch.family, "attention": Engine(loaded, stats, lambda: stats).attention_source(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__, "kernel_launch": launches,
    }
    result["ratio_vs_bare"] = result["headsim_windows_per_s"] / result["bare_windows_per_s"]
    if sweep:
        result["batch_sweep"] = {str(k): v for k, v in sweep.items()}
    result["speedup_vs_naive"] = result["headsim_windows_per_s"] / result["naive_windows_per_s"] if n_naive else None
    if dtype != "fp32":
        fp32, _ = build_model(args.device, "fp32", tokenizer=args.tokenizer, model=which)
        if which != "embedded":
            fp32.model.load_state_dict({k: v.float() for k, v in loaded.model.state_dict().items()})
        result["agreement_vs_fp32"] = agreement_dtype(loaded, fp32, batches[:2], args.seq_len)
    if args.end_to_end:
        result["end_to_end"] = timed_end_to_end()
    print(f"{'contender':<12}{'windows/s':>12}")
    for name in ("bare", "headsim", "naive")[: 3 if n_naive else 2]:
        print(f"{name:<12}{result[name + '_windows_per_s']:>12.2f}")
    print(f"headsim / bare = {result['ratio_vs_bare']:.3f}   headsim / naive = {result['speedup_vs_naive'] or float('nan'):.1f}×   "
          f"windowing {windowing_rate:.0f} windows/s   peak RSS {result['peak_memory_bytes']['cpu_rss'] / 2**30:.2f} GiB")
    print(f"windowing over {n_win} windows: in-process {windowing_rate:.0f} windows/s, {workers} worker processes {parallel_rate:.0f} windows/s")
    print("agreement with naive reference:", json.dumps(result["agreement_vs_naive"]))
    if "end_to_end" in result:
        print("end to end (text → run directory):", json.dumps(result["end_to_end"]))
    if "agreement_vs_fp32" in result:
        print("agreement with fp32:", json.dumps(result["agreement_vs_fp32"]))
    return write_result(result, args.json)


def set_launches(specs: list[str]) -> dict:
    """Apply ``--launch`` values to headsim's Triton passes; returns the launches in effect."""
    from headsim.stats import triton_kernels as tk

    chosen = {}
    for spec in specs:
        if "=" not in spec and Path(spec).is_file():  # a kernel_sweep.py result: its fastest agreeing launches
            chosen.update({name: tk.Launch(**best["launch"]) for name, best in json.loads(Path(spec).read_text())["best"].items()})
            continue
        name, _, numbers = spec.partition("=")
        try:
            chosen[name] = tk.Launch.parse(numbers)
        except (TypeError, ValueError) as exc:
            sys.exit(f"error: --launch {spec!r}: {exc} — fix: PASS=ROWS,WARPS,STAGES[,TILES] (e.g. pairs=16,8,2 or "
                     f"pairs=32,4,2,triangle) or a kernel_sweep.py JSON")
    if chosen.get("attention", tk.ATTENTION_LAUNCH).tiles != "rows":
        sys.exit("error: --launch attention=…,triangle — fix: the attention pass has row tiles only")
    unknown = set(chosen) - {"attention", "pairs"}
    if unknown:
        sys.exit(f"error: --launch names {sorted(unknown)} — fix: the passes are 'attention' and 'pairs'")
    tk.ATTENTION_LAUNCH = chosen.get("attention", tk.ATTENTION_LAUNCH)
    tk.PAIRS_LAUNCH = chosen.get("pairs", tk.PAIRS_LAUNCH)
    return {"attention": vars(tk.ATTENTION_LAUNCH), "pairs": vars(tk.PAIRS_LAUNCH)}


def code_version() -> dict:
    """The measured code: the imported headsim's version and, where it comes from a git checkout, that
    checkout's commit (``dirty`` with uncommitted changes to tracked files); None without ``.git``."""
    import headsim

    here = Path(headsim.__file__).resolve().parent  # the code measured, also when PYTHONPATH picks another checkout
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True,
                                check=True, timeout=10).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                                    capture_output=True, text=True, check=True, timeout=10).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        commit, dirty = None, None
    return {"headsim": headsim.__version__, "commit": commit, "dirty": dirty}


def write_result(result: dict, path: str | None) -> dict:
    """Add :func:`code_version` to ``result``, write it as JSON to ``path`` (its folder created) when
    one is given; returns it."""
    result.setdefault("code", code_version())
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
