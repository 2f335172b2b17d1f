"""The report's "Which heads matter" section, drawn from a study saved in ``RUN_DIR/ablation``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ..report.html import model_label
from .plots import FIGURES
from .study import ABLATION_JSON

FOLDER = "ablation"


def report_section(run_dir: Path, out: Path) -> dict | None:
    """Copy the study's figures into ``out/ablation`` and describe them; ``None`` when the run has no study."""
    src = Path(run_dir) / FOLDER
    try:
        meta = json.loads((src / ABLATION_JSON).read_text())
    except (OSError, ValueError):
        return None
    s, metric = meta["summary"], meta["primary_metric"]
    (out / FOLDER).mkdir(parents=True, exist_ok=True)
    figures = []
    for stem, title in FIGURES.items():
        if (src / f"{stem}.png").is_file():
            for ext in ("png", "svg"):
                if (src / f"{stem}.{ext}").is_file():
                    shutil.copy2(src / f"{stem}.{ext}", out / FOLDER / f"{stem}.{ext}")
            figures.append({"title": title, "png": f"{FOLDER}/{stem}.png", "svg": f"{FOLDER}/{stem}.svg"})
    full, k, n = s["full"][metric], s["group_size"], s["n_heads_total"]
    rows = [("full model", f"{full:.3f}", "")]
    rows += [(name, f"{v:.3f}", f"{v - full:+.3f}") for name, v in s["at_group_size"].items()]
    r = s["random"]
    rows.append((f"random groups ({r['draws']} draws): mean [95 % interval]",
                 f"{r['mean']:.3f} [{r['p2.5']:.3f}, {r['p97.5']:.3f}]", f"{r['mean'] - full:+.3f}"))
    return {
        "intro": (f"Head ablation of {model_label(meta['model'])} ({meta['config']['mode']} mode): the "
                  f"primary score {metric} after removing {k} of {n} heads in the order of each criterion "
                  "(single-head ablation and gradient importance: least important first; roles: most typical first). "
                  "Made by headsim ablate; tables in ablation/*.parquet, method in docs/ablation.md."),
        "columns": ["criterion", metric, "Δ vs full"], "rows": rows, "figures": figures,
    }
