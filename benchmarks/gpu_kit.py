#!/usr/bin/env python
"""Prepare ``.gpukit/`` for the one-call GPU run (the device machine reaches no package registry).

The lent GPU machines already hold torch, transformers, tokenizers, numpy, pandas, pyarrow, xarray,
h5py, einops, typer, rich, pytest and hypothesis (/work/.library/device/KINDS.md). What headsim needs
beyond those travels here, well under the 64 MiB a call may carry:

* ``tokenizer/``: the embedded model's tokenizer (BERT-base's 30,522-token uncased vocabulary), so
  the 83 MB model wheel stays home; the GPU timing uses a random-weight BERT-base anyway;
* ``minilm/``: the embedded model's weights in fp16 (about 45 MB), for what random weights cannot
  show: bf16 agreement with fp32 on a pretrained model (random BERT-base puts almost every pair
  above the threshold, so its agreement is trivially 100 %);
* ``corpus.jsonl``: the embedded default corpus (Wikipedia sample + Lee), one document per line, so
  gensim's 28 MB wheel stays home too;
* ``wheels/``: pySBD, NLTK and h5netcdf for CPython 3.12;
* ``baseline_triton_kernels.py``: ``headsim/stats/triton_kernels.py`` as of commit
  :data:`BASELINE` (the kernels the H100 run of 2026-11-23 timed, their columns kernel since moved to
  tensor cores), which ``kernel_sweep.py`` and ``kernel_resources.py`` measure beside the current ones.

    python benchmarks/gpu_kit.py          # then see benchmarks/README.md for the device command
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

WHEELS = ("pysbd", "nltk", "h5netcdf")
BASELINE = "2f5ced6"  # the last commit before the looping kernels took a runtime run length (Launch)


def main(out: str = ".gpukit") -> Path:
    from headsim.corpus import default_corpus
    from headsim.model.load import load_model

    root = Path(out)
    (root / "wheels").mkdir(parents=True, exist_ok=True)
    import torch

    loaded = load_model()
    loaded.tokenizer.save_pretrained(root / "tokenizer")
    loaded.model.to(torch.float16).save_pretrained(root / "minilm")
    loaded.tokenizer.save_pretrained(root / "minilm")
    with open(root / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for doc in default_corpus():
            fh.write(json.dumps({"text": doc.text, "id": doc.doc_id}) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp", "--platform", "manylinux_2_28_x86_64",
                    "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64",
                    "-d", str(root / "wheels"), *WHEELS], check=True)
    baseline = subprocess.run(["git", "show", f"{BASELINE}:src/headsim/stats/triton_kernels.py"], check=True,
                              capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1]).stdout
    (root / "baseline_triton_kernels.py").write_text(baseline)
    size = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
    print(f"{root}/: {size / 2**20:.1f} MiB (carry limit 64 MiB)")
    return root


if __name__ == "__main__":
    main(*sys.argv[1:])
