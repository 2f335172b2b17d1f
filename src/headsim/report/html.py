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
        from ..models import default_model_dir

        return Path(str(source)).resolve() == Path(default_model_dir()).resolve()
    except Exception:  # noqa: BLE001 - the embedded model package missing: not the default
        return False


def model_label(model: dict) -> str:
    """Short model name for titles: the embedded default gets its real name."""
    name = str(model.get("name", "model"))
    if name == "default":
        return f"{DEFAULT_MODEL} (embedded default)"
    return Path(name).name if "/" in name and Path(name).exists() else name


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
    return (f"{model_label(model)}{commit} \u2014 {model.get('class', '?')}, model type {model.get('model_type', '?')}, "
            f"{model.get('n_layers', '?')} layers \u00d7 {model.get('n_heads', '?')} heads, "
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
