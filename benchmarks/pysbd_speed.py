#!/usr/bin/env python
"""headsim's pySBD path against pySBD as released, side by side in one process, on the same text.

    python benchmarks/pysbd_speed.py --json benchmarks/results/pysbd-speed-cpu.json

Rounds alternate the two (``headsim.sentences.pysbd_as_released``: pySBD's own ``Segmenter.segment``
and its modules' own ``re``, as headsim ran it before) and swap which goes first each round:
  (a) sentence starts (``headsim.sentences.sentence_starts``) of the default corpus's first ``--chars``
      characters, checked identical;
  (b) windowing in this process (``throughput.py``'s ``--windowing-only 0``: text → packed windows of
      ``--seq-len`` with pySBD sentences, start-up included) on ``--windows`` windows.
Windowing in worker processes cannot switch pySBD inside the workers: time it by alternating
``throughput.py --windowing-only 1`` runs of two checkouts (benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from throughput import windowing_scaling  # noqa: E402

from headsim.corpus import default_corpus  # noqa: E402
from headsim.model.load import load_model  # noqa: E402
from headsim.sentences import pysbd_as_released, sentence_starts  # noqa: E402


def first_texts(chars: int) -> list[str]:
    """The default corpus's documents until ``chars`` characters."""
    texts, total = [], 0
    for d in default_corpus():
        if total >= chars:
            break
        texts.append(d.text)
        total += len(d.text)
    return texts


def starts_seconds(texts: list[str]) -> tuple[float, list[list[int]]]:
    t0 = time.perf_counter()
    starts = [sentence_starts(t).tolist() for t in texts]
    return time.perf_counter() - t0, starts


def side_by_side(run, rounds: int) -> dict:
    """``run()`` → (value, result) for each path, alternating, the first path swapped each round."""
    values = {"released": [], "headsim": []}
    results = {}
    for r in range(rounds):
        for name in (("released", "headsim") if r % 2 == 0 else ("headsim", "released")):
            if name == "released":
                with pysbd_as_released():
                    value, results[name] = run()
            else:
                value, results[name] = run()
            values[name].append(value)
    return {"values": values, "results": results}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chars", type=int, default=400_000, help="characters of the default corpus for (a)")
    ap.add_argument("--windows", type=int, default=2_000, help="windows for (b); 0 skips it")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    texts = first_texts(args.chars)
    sentence_starts("Warm up. Both paths compile their patterns here.")
    with pysbd_as_released():
        sentence_starts("Warm up. Both paths compile their patterns here.")
    a = side_by_side(lambda: starts_seconds(texts), args.rounds)
    identical = a["results"]["released"] == a["results"]["headsim"]
    chars = sum(map(len, texts))
    sec = {k: statistics.median(v) for k, v in a["values"].items()}
    print(f"(a) sentence starts, {len(texts)} texts, {chars:,} characters: released {sec['released']:.2f} s, "
          f"headsim {sec['headsim']:.2f} s (medians of {args.rounds}): {sec['released'] / sec['headsim']:.2f} x; "
          f"identical starts: {identical}", flush=True)
    result = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "chars": chars, "texts": len(texts),
              "rounds": args.rounds, "starts_seconds": a["values"], "starts_identical": identical,
              "starts_ratio_median": sec["released"] / sec["headsim"]}
    if args.windows:
        tokenizer = load_model("default", device="cpu").tokenizer
        b = side_by_side(lambda: (windowing_scaling(tokenizer, [0], args.windows, args.seq_len, "pysbd")["runs"][0]
                                  ["windows_per_s"], None), args.rounds)
        rate = {k: statistics.median(v) for k, v in b["values"].items()}
        print(f"(b) windowing in this process, {args.windows} windows of {args.seq_len}: released {rate['released']:.0f}, "
              f"headsim {rate['headsim']:.0f} windows/s (medians): {rate['headsim'] / rate['released']:.2f} x", flush=True)
        result.update(windows=args.windows, seq_len=args.seq_len, windows_per_s=b["values"],
                      windowing_ratio_median=rate["headsim"] / rate["released"])
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if not identical:
        sys.exit("sentence starts differ between pySBD as released and headsim's path")


if __name__ == "__main__":
    main()
