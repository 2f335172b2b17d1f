"""Coverage sweep: every text model type of the installed transformers, read through headsim's tap.

For each model type that has a masked-LM, causal-LM or sequence-to-sequence head in transformers'
auto mappings (the text models), build a tiny random-weight base model from its config class (no
download), and check it as ``tests/test_architectures.py`` does (:func:`headsim.model.verify.verify`):
attention against the eager ``output_attentions``, head outputs against probabilities × values in
float64, batch and padding-side invariance. Writes the table (family → exact / refused and why) to
``docs/architectures.md`` and the JSON to ``benchmarks/results/coverage.json``.

    python benchmarks/coverage.py
"""

from __future__ import annotations

import argparse
import json
import resource
import warnings
from datetime import datetime, timezone
from pathlib import Path

import transformers

from headsim.errors import HeadsimError
from headsim.model.arch import arch_for
from headsim.model.verify import tiny_model, verify
from headsim.models import from_pretrained_objects

ROOT = Path(__file__).resolve().parents[1]


def text_model_types() -> list[str]:
    from transformers.models.auto import modeling_auto as auto

    heads = set()
    for name in ("MODEL_FOR_MASKED_LM_MAPPING_NAMES", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
                 "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES"):
        heads |= set(getattr(auto, name, {}))
    return sorted(heads & set(auto.MODEL_MAPPING_NAMES))


def check(model_type: str) -> dict:
    """One row: status ``exact``, ``not exact``, ``refused`` (no entry / headsim's refusal) or
    ``not built`` (the tiny config did not build here), with the reason or the errors."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model, eager = tiny_model(model_type)
    except Exception as exc:  # noqa: BLE001 (a config that needs sizes the sweep does not guess)
        return {"status": "not built", "reason": f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"}
    cls = type(model).__name__
    try:
        arch = arch_for(model)
    except HeadsimError as exc:
        return {"class": cls, "status": "refused", "reason": exc.problem}
    try:
        loaded = from_pretrained_objects(model, None, model_type)  # inferred layouts: the load-time self-check
    except HeadsimError as exc:
        return {"class": cls, "family": arch.family, "status": "refused", "reason": exc.problem}
    try:
        got = verify(loaded, eager)
    except Exception as exc:  # noqa: BLE001
        return {"class": cls, "family": arch.family, "status": "not exact",
                "reason": f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"}
    errors = {k: float(v) for k, v in vars(got).items()}
    return {"class": cls, "family": arch.family + (" (inferred)" if arch.inferred else ""),
            "status": "exact" if got.exact(1e-5) else "not exact", "errors": errors}


def write_doc(rows: dict[str, dict], path: Path) -> None:
    exact = sum(r["status"] == "exact" for r in rows.values())
    lines = [
        "# Model coverage",
        "",
        f"Written by `python benchmarks/coverage.py` on {datetime.now(timezone.utc).date()} with transformers "
        f"{transformers.__version__}. Every text model type (a masked-LM, causal-LM or seq2seq head in "
        "transformers' auto mappings) is built as a tiny random-weight model and read through headsim's tap; "
        "`exact` means attention = eager `output_attentions`, head outputs = probabilities × values (float64) and "
        "batch / padding-side invariance, all within 1e-5.",
        "",
        f"**{exact} of {len(rows)} text model types exact**; the others are refused with the reason shown "
        "(no entry and no layout headsim can read, or an inferred layout that the load-time self-check "
        "finds inexact), or `not built`: the sweep's generic tiny sizes do not make a valid config of that "
        "type here (such a model is still checked when loaded). Families marked *(inferred)* have no entry in "
        "`headsim/model/arch.py`: their layout is read off their modules, and every load runs the same "
        "checks on a few random tokens of the real weights before anything is analysed.",
        "",
        "| model_type | class | family | status | reason / largest error |",
        "|---|---|---|---|---|",
    ]
    for t, r in rows.items():
        why = r.get("reason") or f"{max(r['errors'].values()):.1e}"
        lines.append(f"| {t} | {r.get('class', '')} | {r.get('family', '')} | {r['status']} | {why.replace('|', '/')} |")
    path.write_text("\n".join(lines) + "\n")


def merge_rows(path: Path, rows: dict[str, dict]) -> dict[str, dict]:
    """Earlier rows of ``path`` (a previous sweep's JSON) updated with ``rows``."""
    old = json.loads(path.read_text())["rows"] if path.exists() else {}
    old.update(rows)
    return dict(sorted(old.items()))


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--types", default=None, help="comma-separated model types (default: every text model type)")
    ap.add_argument("--doc", default=str(ROOT / "docs" / "architectures.md"))
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "coverage.json"))
    ap.add_argument("--update", action="store_true", help="with --types: update those rows of an earlier --json")
    ap.add_argument("--memory-gib", type=int, default=12, help="address-space cap for the sweep (default 12 GiB)")
    args = ap.parse_args(argv)
    transformers.utils.logging.set_verbosity_error()
    # some configs' defaults build models of several GB: past this cap allocation fails (and the row
    # says so) instead of the machine running out of memory
    cap = args.memory_gib << 30
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    types = args.types.split(",") if args.types else text_model_types()
    rows = {}
    for t in types:
        rows[t] = check(t)
        print(f"{t:<28}{rows[t]['status']:<10}{rows[t].get('reason', '')}", flush=True)
    if args.update:
        rows = merge_rows(Path(args.json), rows)
    exact = sum(r["status"] == "exact" for r in rows.values())
    print(f"{exact} of {len(rows)} text model types exact")
    write_doc(rows, Path(args.doc))
    Path(args.json).write_text(json.dumps({"transformers": transformers.__version__, "rows": rows}, indent=1))
    return rows


if __name__ == "__main__":
    main()
