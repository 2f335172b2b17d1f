"""Coverage sweep: every text model type of the installed transformers, read through headsim's tap.

For each model type that has a masked-LM, causal-LM or sequence-to-sequence head in transformers'
auto mappings (the text models), build a tiny random-weight base model from its config class (no
download; each type in a forked process with a time limit), and check it as ``tests/test_architectures.py`` does (:func:`headsim.model.verify.verify`):
attention against the eager ``output_attentions``, head outputs against probabilities × values in
float64, batch and padding-side invariance. Writes the table (family → exact / refused and why) to
``docs/architectures.md`` and the JSON to ``benchmarks/results/coverage.json``.

    python benchmarks/family_coverage.py
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import warnings
from datetime import datetime, timezone
from pathlib import Path

import torch
import transformers

from headsim.errors import HeadsimError
from headsim.model.resolve import arch_for
from headsim.model.verify import tiny_config, tiny_model, verify
from headsim.model.load import from_pretrained_objects

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "headsim"


def code_fingerprint() -> str:
    """A hash of the code every row depends on: the installed transformers, headsim's model package
    but for its table of tiny sizes (``model/tiny.py``, which :func:`row_fingerprint` covers row by
    row), and the sweep's own check."""
    import inspect

    h = hashlib.sha256(transformers.__version__.encode())
    for f in sorted((SRC / "model").glob("*.py")):
        if f.name != "tiny.py":
            h.update(f.name.encode() + f.read_bytes())
    for fn in (check, attention_kind):
        h.update(inspect.getsource(fn).encode())
    return h.hexdigest()[:12]


def row_fingerprint(code: str, model_type: str) -> str:
    """:func:`code_fingerprint` and the tiny config ``model_type`` is built from: a row is re-checked
    by ``--resume`` when either changed."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = repr(tiny_config(model_type).to_dict())
    except Exception as exc:  # noqa: BLE001 (the row will say why it did not build)
        config = f"{type(exc).__name__}: {exc}"
    return hashlib.sha256((code + config).encode()).hexdigest()[:12]


def text_model_types() -> list[str]:
    from transformers.models.auto import modeling_auto as auto

    heads = set()
    for name in ("MODEL_FOR_MASKED_LM_MAPPING_NAMES", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
                 "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES"):
        heads |= set(getattr(auto, name, {}))
    return sorted(heads & set(auto.MODEL_MAPPING_NAMES))


def attention_kind(model, arch) -> str:
    """The attention a model type uses, read off its config: MHA / GQA / MQA / MLA, plus ALiBi,
    relative positions, local (sliding-window) layers and cross-attention where it has them."""
    c = model.config
    modules = list(model.modules())
    if not any("attention" in type(m).__name__.lower() for m in modules):
        return "no attention"
    groups = 1  # query heads per key/value head, as the attention modules hold them
    for m in modules:
        if hasattr(m, "num_key_value_groups"):
            groups = int(m.num_key_value_groups)
            break
        if hasattr(m, "num_kv_heads") and hasattr(m, "num_heads"):
            groups = int(m.num_heads) // max(int(m.num_kv_heads), 1)
            break
    heads = getattr(c, "num_attention_heads", None) or getattr(c, "n_head", None) or getattr(c, "num_heads", None)
    if _get(c, "kv_lora_rank"):
        kind = "MLA"
    elif groups > 1:
        kind = "MQA" if heads and groups == int(heads) else "GQA"
    else:
        kind = "MHA"
    extra = []
    if getattr(c, "alibi", False) or c.model_type in ("bloom", "mpt"):
        extra.append("ALiBi")
    if (getattr(c, "relative_attention", False) or getattr(c, "relative_attention_num_buckets", None)
            or "relative" in str(getattr(c, "position_embedding_type", ""))):
        extra.append("relative")
    layer_types = [str(t) for t in (getattr(c, "layer_types", None) or [])]
    if _get(c, "sliding_window") or _get(c, "local_attention") or any("sliding" in t or "local" in t
                                                                                         for t in layer_types):
        extra.append("local/global" if not layer_types or any("full" in t or "global" in t for t in layer_types)
                     else "local")
    if arch is not None and arch.decoder is not None:
        extra.append("cross")
    return ", ".join([kind] + extra)


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
        return {"class": cls, "kind": attention_kind(model, None), "status": "refused", "reason": exc.problem}
    kind = attention_kind(model, arch)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loaded = from_pretrained_objects(model, None, model_type)  # inferred layouts: the load-time self-check
    except HeadsimError as exc:
        return {"class": cls, "kind": kind, "family": arch.family, "status": "refused", "reason": exc.problem}
    try:
        got = verify(loaded, eager)
    except Exception as exc:  # noqa: BLE001
        return {"class": cls, "kind": kind, "family": arch.family, "status": "not exact",
                "reason": f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"}
    errors = {k: float(v) for k, v in vars(got).items()}
    row = {"class": cls, "kind": kind, "family": arch.family + (" (inferred)" if arch.inferred else ""),
           "status": "exact" if got.exact_at_projection(1e-5) else "not exact", "errors": errors,
           "largest": got.worst_at_projection}
    if got.exact_at_projection(1e-5) and not got.exact(1e-5):
        row["note"] = (f"Z is what the output projection receives, after the family's own gate or norm "
                       f"(probabilities × values differ by {got.head_outputs:.1e})")
    return row


def check_isolated(model_type: str, timeout: float) -> dict:
    """:func:`check` in a forked child (transformers already imported), so that a type that hangs,
    crashes or exhausts memory costs its own row only."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=lambda: queue.put(check(model_type)), daemon=True)
    child.start()
    child.join(timeout)
    if child.is_alive():
        child.kill()
        child.join()
        return {"status": "not built", "reason": f"TimeoutError: not checked within {timeout:.0f} s on this machine"}
    try:
        return queue.get(timeout=5)
    except Exception:  # noqa: BLE001 (the child died before answering)
        return {"status": "not built", "reason": f"the check's process ended with exit code {child.exitcode}"}


#: config names that say a model interleaves attention with other layer kinds
_HYBRID_NAMES = ("layers_block_type", "hybrid_override_pattern", "attn_layer_indices", "attn_layer_period",
                 "block_types", "full_attn_idxs", "linear_attn_config")
_OTHER_LAYERS = ("linear", "mamba", "conv", "recurrent", "delta", "ssm", "rwkv", "lightning")


#: model types whose tiny build fails with an empty ImportError, and the package it needs (as found)
NEEDS = {"gemma3n": "timm (its vision tower; timm needs torchvision, whose PyPI wheel for torch 2.13 is a CUDA build "
                   "that does not load with CPU torch)"}

#: recurrent models whose "attention" modules are not softmax attention (no map to read)
RECURRENT = {"rwkv"}

#: model types whose token ids are not text (the base model of a text-to-audio model reads audio codes)
NOT_TEXT = {"musicgen": "audio codebook tokens", "musicgen_melody": "audio codebook tokens"}


def text_input(model_type: str) -> str | None:
    """What the model reads, where it is not token ids (``input_features`` of a speech model ...)."""
    from transformers import CONFIG_MAPPING

    if model_type in NOT_TEXT:
        return NOT_TEXT[model_type]
    from transformers.models.auto.modeling_auto import MODEL_MAPPING

    try:
        name = getattr(MODEL_MAPPING[CONFIG_MAPPING[model_type]], "main_input_name", "input_ids")
    except Exception:  # noqa: BLE001 (no base model class: read as text)
        return None
    return None if name == "input_ids" else name


def _get(config, name: str):
    """``getattr(config, name, None)``, also where a config refuses names that vary per layer."""
    try:
        return getattr(config, name, None)
    except Exception:  # noqa: BLE001 (a per-layer attribute read globally)
        return None


def _attends(kind: str) -> bool:
    return "attention" in kind and not any(o in kind for o in _OTHER_LAYERS) or kind == "hybrid"


def hybrid_layers(model_type: str) -> str | None:
    """The other layer kinds of a model whose config says only some layers attend, or ``None``."""
    from headsim.model.verify import _defaults

    config = _defaults(model_type)
    if config is None:
        return None
    config = _get(config, "text_config") or config  # a composite model: its language model's layers
    kinds = {str(k).lower() for k in (_get(config, "layer_types") or [])}
    others = sorted(k for k in kinds if not _attends(k))
    if others and any(_attends(k) for k in kinds):
        return ", ".join(others)
    named = [n for n in _HYBRID_NAMES if _get(config, n) not in (None, [], "")]
    return f"layers named by {named[0]}" if named and _get(config, "num_attention_heads") else None


def no_attention(model_type: str, row: dict) -> bool:
    """A state-space, recurrent or Fourier-mixing model: no attention module was built, and its config
    names no attention heads (nor any layer kind that attends)."""
    from headsim.model.verify import _defaults

    if model_type in RECURRENT:
        return True
    config = _defaults(model_type)
    kinds = {str(k).lower() for k in (_get(config, "layer_types") or [])}
    heads = any(_get(config, n) for n in ("num_attention_heads", "n_head", "attention_heads"))
    return (row.get("kind") == "no attention" and not heads) or bool(kinds and not any(_attends(k) for k in kinds))


def category(model_type: str, row: dict) -> tuple[bool, str]:
    """Whether a row counts (the model has a text self-attention stack) and its group in the table."""
    if row["status"] == "exact":
        return True, "exact"
    reads = text_input(model_type)
    if reads is not None:
        return False, f"not counted: reads `{reads}`, not text (speech, vision or structure)"
    if "from several modules" in row.get("reason", ""):
        return True, ("refused: its layers call the attention function from several modules (another attention, "
                      "such as one over earlier layers' outputs, besides the tokens')")
    hybrid = hybrid_layers(model_type)
    if hybrid is not None:
        return True, ("refused, hybrid: attention at some layers only, between other kinds, and its "
                      "softmax-attention layers not read exactly (the row says why)")
    if no_attention(model_type, row):
        return False, "not counted: no attention layers (state-space, recurrent or Fourier mixing)"
    reason = row.get("reason", "")
    if model_type in NEEDS:
        return True, f"not built: needs {NEEDS[model_type]}, which is not installed here"
    if row["status"] == "not built":
        return True, "not built on this machine (the exception is named)"
    if "does not reproduce" in reason:
        return True, "refused: the layout read off its modules is not exact (attention or Z differ)"
    if "does not run" in reason:
        return True, "refused: the layout read off its modules does not run"
    if "not supported:" in reason and "(model_type " in reason and "no architecture entry" not in reason:
        return True, "refused by name: attention or head outputs the tap cannot read exactly (the row says why)"
    if "could not be read" in reason:
        return True, "refused: no entry and no layout headsim can read off its modules"
    return True, f"{row['status']}: other"


def write_doc(rows: dict[str, dict], path: Path, fingerprints: dict[str, str]) -> None:
    cats = {t: category(t, r) for t, r in rows.items()}
    counted = [t for t, (c, _) in cats.items() if c]
    exact = sum(rows[t]["status"] == "exact" for t in counted)
    groups: dict[str, list[str]] = {}
    for t, (_, g) in cats.items():
        groups.setdefault(g, []).append(t)
    lines = [
        "# Model coverage",
        "",
        f"Written by `python benchmarks/family_coverage.py` on {datetime.now(timezone.utc).date()} with transformers "
        f"{transformers.__version__}. Every text model type (a masked-LM, causal-LM or seq2seq head in "
        "transformers' auto mappings) is built as a tiny random-weight model (sizes of `headsim/model/tiny.py`: "
        "small defaults, sizes for what the family's own config class has, such as latent attention or experts, "
        "and per-family overrides; a composite model gets a tiny text stack of its own family and scaled-down "
        "vision or audio towers, and its text stack is read) and read through headsim's tap, each type in its own "
        "process. `exact` means, all within 1e-5: attention = the eager model's `output_attentions`; the head "
        "outputs Z = what the eager model's attention output projection receives, and = probabilities × values "
        "(float64) unless the row notes a gate or norm the family applies in between; a window's numbers do not "
        "depend on its batch or padding side; causal maps are triangular. Encoder-decoders are checked at all "
        "three stacks (encoder self, decoder self, decoder cross); an inferred encoder-decoder whose decoder is "
        "not laid out like BART's is read at its encoder alone (no `cross` in its attention column).",
        "",
        f"**Exact / counted types: {exact} / {len(counted)} = {100 * exact / max(len(counted), 1):.0f} %** "
        f"({len(rows)} text model types; counted: those with a text self-attention stack, i.e. all but the "
        f"{len(rows) - len(counted)} without attention layers or that do not read text).",
        "",
        "| group | types |",
        "|---|---|",
        *[f"| {g} | {len(ts)}: {', '.join(ts)} |" for g, ts in sorted(groups.items(), key=lambda kv: -len(kv[1]))
          if g != "exact"],
        f"| exact | {len(groups.get('exact', []))} |",
        "",
        "Families marked *(inferred)* have no entry in `headsim/model/arch.py`: their layout is read off their "
        "modules, and every load runs the same checks on a few random tokens of the real weights before anything "
        "is analysed (a refusal names the family and the reason). `not built` rows did not build or run at the "
        "sweep's tiny sizes within its memory cap (4 GiB) and time limit; such a model is still checked when "
        "loaded. The attention column is read off the built model: MHA / GQA / MQA (query heads per key/value "
        "head) / MLA (latent key/value compression), ALiBi, relative positions, local/global (sliding-window "
        "layers), cross (an encoder-decoder's cross-attention); `no attention` for state-space, recurrent and "
        "Fourier-mixing models.",
        "",
        "| model_type | class | family | attention | status | reason / note / largest error |",
        "|---|---|---|---|---|---|",
    ]
    stale = [t for t, r in rows.items() if r.get("code") != fingerprints.get(t)]
    if stale:
        lines[-2:-2] = [f"*{len(stale)} rows (status marked †) are from an earlier sweep, not yet re-run with "
                        f"transformers {transformers.__version__} and the current headsim; `python "
                        "benchmarks/family_coverage.py --resume` re-checks them.*", ""]
    for t, r in rows.items():
        largest = r.get("largest", max(r["errors"].values()) if "errors" in r else None)
        why = r.get("reason") or (f"{r['note']}; {largest:.1e}" if r.get("note") else f"{largest:.1e}")
        status = r["status"] if cats[t][0] else "not counted"
        if status != "exact" and cats[t][1].startswith(("refused, hybrid", "not counted", "not built: needs")):
            why = f"{cats[t][1]}; {why}"
        if t in stale:
            status += " †"
        lines.append(f"| {t} | {r.get('class', '')} | {r.get('family', '')} | {r.get('kind', '')} | {status} | "
                     f"{why.replace('|', '/')} |")
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
    ap.add_argument("--update", action="store_true",
                    help="keep the rows of an earlier --json and re-check the given types (default: all), those "
                         "an earlier sweep did not find exact first; the table is rewritten after every row")
    ap.add_argument("--resume", action="store_true",
                    help="keep the rows of an earlier --json and check only the types not yet checked with this "
                         "code and transformers version (an interrupted sweep goes on where it stopped)")
    ap.add_argument("--doc-only", action="store_true", help="rewrite the table from --json without checking anything")
    ap.add_argument("--memory-gib", type=int, default=4, help="address-space cap for the sweep (default 4 GiB)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per model type (default 120)")
    args = ap.parse_args(argv)
    transformers.utils.logging.set_verbosity_error()
    torch.set_num_threads(1)  # tiny models on a shared machine: threads only wait for each other
    # some configs' defaults build models of several GB: past this cap allocation fails (and the row
    # says so) instead of the machine running out of memory
    cap = args.memory_gib << 30
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    types = args.types.split(",") if args.types else text_model_types()
    path = Path(args.json)
    rows = merge_rows(path, {}) if (args.update or args.resume or args.doc_only) else {}
    code = code_fingerprint()
    fingerprints = {t: row_fingerprint(code, t) for t in sorted(set(types) | set(rows))}
    if args.doc_only:
        write_doc(rows, Path(args.doc), fingerprints)
        return rows
    if args.resume:
        types = [t for t in types if rows.get(t, {}).get("code") != fingerprints[t]]
    if not args.types:  # the unsettled first (stable: alphabetical within)
        types.sort(key=lambda t: rows.get(t, {}).get("status") == "exact")
    for t in types:
        rows[t] = dict(check_isolated(t, args.timeout), transformers=transformers.__version__, code=fingerprints[t])
        print(f"{t:<28}{rows[t]['status']:<10}{rows[t].get('reason', '')}", flush=True)
        rows = dict(sorted(rows.items()))
        write_doc(rows, Path(args.doc), fingerprints)
        path.write_text(json.dumps({"transformers": transformers.__version__, "rows": rows}, indent=1))
    exact = sum(r["status"] == "exact" for r in rows.values())
    print(f"{exact} of {len(rows)} text model types exact")
    return rows


if __name__ == "__main__":
    main()
