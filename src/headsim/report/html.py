"""HTML pages of the report and the comparison, rendered from Jinja2 templates in ``templates/``.

The pages are self-contained: inline CSS, relative links to the figures and tables next to them, no
scripts and nothing fetched from elsewhere.
"""

from __future__ import annotations

import math
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

TEMPLATES = Path(__file__).resolve().parent / "templates"

PAPER = ("Halevi, Tzach, Gross, Rosner & Kanter, \u201cSelf-attention vector output similarities reveal how machines "
         "pay attention\u201d, Physica A 686 (2026) 131363, arXiv:2512.21956")
PAPER_MODEL = "BERT-base (\u201cBERT-12\u201d: 12 layers \u00d7 12 heads, 768 dimensions)"
DEFAULT_MODEL = "all-MiniLM-L6-v2"


def _num(value, digits: int = 3) -> str:
    if value is None:
        return "\u2013"
    if isinstance(value, float):
        if math.isnan(value):
            return "\u2013"
        return f"{value:.{digits}g}"
    return str(value)


def environment() -> Environment:
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(["html", "j2"], default=True),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = _num
    env.filters["verdict_class"] = lambda v: {"holds": "holds", "does not hold": "fails"}.get(v, "na")
    return env


def render(template: str, **context) -> str:
    """Render ``templates/<template>`` with ``context`` (plus the paper's citation)."""
    return environment().get_template(template).render(paper=PAPER, paper_model=PAPER_MODEL,
                                                       default_model=DEFAULT_MODEL, **context)


def is_default_model(model: dict) -> bool:
    """Whether a run's ``model`` block describes headsim's embedded all-MiniLM-L6-v2."""
    if str(model.get("name", "")) == "default":
        return True
    source = model.get("source")
    if not source:
        return False
    try:
        from ..model.load import default_model_dir

        return Path(str(source)).resolve() == Path(default_model_dir()).resolve()
    except Exception:  # noqa: BLE001 - the embedded model package missing: not the default
        return False


def model_label(model: dict) -> str:
    """Short model name for titles: the embedded default gets its real name; a model given as an object
    with active adapters is named with them (a fine-tuned model beside its base)."""
    name = str(model.get("name", "model"))
    if name == "default":
        return f"{DEFAULT_MODEL} (embedded default)"
    name = Path(name).name if "/" in name and Path(name).exists() else name
    active = [a for a in (model.get("object") or {}).get("adapters") or [] if a.get("active")]
    return name + "".join(f" + {a.get('type', 'adapter')} {a.get('name')}" + (" (merged)" if a.get("merged") else "")
                          for a in active)


def provenance_rows(model: dict) -> list[tuple[str, str]]:
    """For a model given as an object (run.json's ``model.object``): its class and wrapper, its adapters
    (name, type, rank, alpha, target modules, active, merged) and the fingerprint of its weights."""
    obj = model.get("object")
    if not obj:
        return []
    what = ", ".join(x for x in (obj.get("class"), obj.get("wrapper") and f"through {obj['wrapper']}",
                                 obj.get("head_class") and f"its base read under {obj['head_class']}") if x)
    rows = [("model object", what + (f"; from {obj['name_or_path']}" if obj.get("name_or_path") else ""))]
    for a in obj.get("adapters") or []:
        targets = a.get("target_modules")
        rows.append((f"adapter {a.get('name')}", f"{a.get('type')}, rank {a.get('rank')}, alpha {a.get('alpha')}, on "
                     f"{', '.join(targets) if isinstance(targets, list) else targets}; "
                     f"{'active' if a.get('active') else 'inactive'}{', merged' if a.get('merged') else ''}"))
    fp = obj.get("fingerprint") or {}
    if fp:
        rows.append(("weights fingerprint", f"sha256 {fp.get('sha256', '?')[:16]}… of {fp.get('tensors', '?')} tensors"
                     + (f" ({fp['offloaded']} offloaded, by shape only)" if fp.get("offloaded") else "")))
    return rows


def layers_text(model: dict, n_layers=None, unit: str = " layers") -> str:
    """``L layers`` (``L`` followed by ``unit``); for a hybrid stack, which of the model's layers they
    are (run.json's ``model_layers``)."""
    n = model.get("n_layers", "?") if n_layers is None else n_layers
    own = model.get("model_layers")
    if not own:
        return f"{n}{unit}"
    return (f"{n} layers (the softmax-attention layers {', '.join(map(str, own))} of its {model.get('stack_layers', '?')}; "
            "the others have no attention probabilities)")


def model_description(model: dict) -> str:
    """``label — class, model type, L layers × H heads, …`` of a run's ``model`` block (a hub model's
    commit, the exact weights, and a placement over several devices included)."""
    commit = ""
    if model.get("commit"):
        commit = f" at commit {model['commit']}"
        if model.get("revision") not in (None, model["commit"]):
            commit += f" (revision {model['revision']})"
    where = model.get("device", "?")
    placement = model.get("placement")
    if placement:
        where = f"{', '.join(placement.get('devices') or [])} (device map {placement.get('device_map')})"
    fp = ((model.get("object") or {}).get("fingerprint") or {}).get("sha256")
    commit += f" (given as an object, weights {fp[:12]})" if fp else ""
    return (f"{model_label(model)}{commit} \u2014 {model.get('class', '?')}, model type {model.get('model_type', '?')}, "
            f"{layers_text(model)} \u00d7 {model.get('n_heads', '?')} heads, "
            f"{model.get('d_head', '?')} dimensions per head, {model.get('dtype', '?')} on {where}")


def minilm_note(model: dict | None = None) -> str:
    """What the embedded MiniLM is, and that the paper's numbers are not expected to carry over."""
    minilm = (f"headsim's embedded default model, {DEFAULT_MODEL} (6 layers \u00d7 12 heads, distilled and fine-tuned "
              "for sentence embeddings)")
    if model is not None and is_default_model(model):
        return (f"This run used {minilm}. It is not the paper's BERT-base, so the paper's numbers are not expected to "
                "carry over; the verdicts say whether the paper's qualitative pattern appears in this model.")
    return (f"Note that {minilm} is not the paper's BERT-base, and the paper's numbers are not expected to carry over "
            "to it; for any model they carry over only as far as it resembles BERT-base.")


def model_note(model: dict) -> str:
    """The plain statement of which model produced the numbers and what that means for the paper's numbers."""
    return (f"Every number and figure on this page was produced by {model_description(model)}. The paper analysed "
            f"{PAPER_MODEL}. " + minilm_note(model))


def run_rows(run) -> list[tuple[str, str]]:
    """The settings of a finished run (:class:`~headsim.runs.run.Run`) as (label, value) rows, as the report
    and the run's notebook card show them."""
    m, c = run.model, run.meta.get("corpus", {})
    versions = run.meta.get("versions", {})
    rows = [
        ("model", f"{model_label(run.model)} — {m.get('class', '?')} ({m.get('model_type', '?')})"),
        ("model source", str(m.get("source", "?"))),
        *([("model revision", str(m.get("revision") or m.get("commit")))] if m.get("revision") or m.get("commit") else []),
        *provenance_rows(m),
        ("layers × heads", f"{layers_text(m, m.get('n_layers', run.dataset.sizes['layer']), '')} × "
                           f"{m.get('n_heads', run.dataset.sizes['head'])}, "
                           f"{m.get('d_head', '?')} dimensions per head"),
        ("dtype, device", f"{m.get('dtype', run.meta.get('dtype', '?'))}, {m.get('device', run.meta.get('device', '?'))}"),
        ("corpus", f"{c.get('name', '?')} ({c.get('documents', '?')} documents"
                   + (f", {c['tokens']:,} tokens" if isinstance(c.get("tokens"), int) else "")
                   + f"; sha256 {str(c.get('sha256', '?'))[:16]}…)"),
        ("windows analysed", f"{run.n_windows:,} windows of {run.dataset.attrs.get('seq_len', run.meta.get('seq_len', '?'))} "
                             f"tokens ({int(run.dataset['tokens'].values):,} valid tokens)" if "tokens" in run.dataset else str(run.n_windows)),
        ("threshold", f"{run.threshold:g} on S / max S (diagonal zeroed)"),
        ("columns zeroed (Fig 3)", str(run.dataset.attrs.get("top_k_columns", run.meta.get("top_k_columns", "?")))),
    ]
    if run.meta.get("sentence_splitter"):
        rows.append(("sentence splitter", str(run.meta["sentence_splitter"])))
    if versions:
        rows.append(("versions", ", ".join(f"{k} {v}" for k, v in versions.items())))
    rows.append(("git commit", str(run.meta.get("git_commit") or "unknown")))
    when = run.meta.get("created", "?") + (f", finished {run.meta['finished']}" if run.meta.get("finished") else "")
    if run.meta.get("seconds") is not None:
        when += f" ({float(run.meta['seconds']):,.0f} s)"
    rows.append(("created", when))
    rows.append(("run directory", str(run.path) if run.path is not None else "none (kept in memory)"))
    return rows
