"""The names in a run directory and which of them headsim owns (the one place that lists them).

Layout (:data:`LAYOUT`, recorded in the marker and in ``run.json``)::

    .headsim          marker, written before anything else: {"kind", "layout", "run_id", "created"}
    .headsim.lock     while a process writes the run: {"pid", "host", "start", "since"}
    run.json          "layout"; "spec" (:class:`~headsim.runs.spec.RunSpec`: the settings that decide
                      the numbers) and the settings shown at the top level; model, corpus (name,
                      sha256), device, package versions, git commit, timings, run_id; once finished
                      "files" (size and sha256 of every result file) and "complete": true
    stats.nc          labelled arrays (xarray Dataset, netCDF4 via h5netcdf)
    heads.parquet     one row per (layer, head), 1-based
    layers.parquet    one row per layer
    windows.parquet   one row per analysed window (:func:`headsim.windows.windows_table`)
    checkpoint/       while running: manifest.json (windows done; state and window parts with sizes
                      and sha256), state-NNNNNNNNN.npz, windows-NNNNNNNNN.parquet (removed when complete)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

RUN_JSON, STATS_NC, HEADS, LAYERS, WINDOWS = "run.json", "stats.nc", "heads.parquet", "layers.parquet", "windows.parquet"
RESULT_FILES = (STATS_NC, HEADS, LAYERS, WINDOWS)
CHECKPOINT, MANIFEST = "checkpoint", "manifest.json"
MARKER, LOCK = ".headsim", ".headsim.lock"
MARKER_KIND = "headsim run"
#: the layout this version writes and reads; a run with another (or none: older headsim) is refused
LAYOUT = "headsim.run/2"

# What headsim itself writes into a run directory (anything else is the user's): the run's files,
# the report's outputs (`headsim report RUN` writes into the run by default), the checkpoint, and the
# temporary names of atomic writes (``.NAME.tmp-XXXX``) a killed process can leave behind.
_REPORT = r"index\.html|claims\.(json|csv)|fig\d\d\w*\.(png|svg)"
_EXAMPLE = r"fig\d\d\w*\.(png|svg|csv|parquet)|similarity\.(png|svg)|tokens\.(csv|parquet)|inspect\.json"
_CHECKPOINT_FILES = r"manifest\.json|state(-\d+)?\.npz|progress\.json|windows-\d+\.parquet"
_RUN_FILES = "|".join(re.escape(name) for name in (RUN_JSON, *RESULT_FILES, MARKER, LOCK))


@dataclass(frozen=True)
class Own:
    files: re.Pattern
    dirs: tuple[tuple[re.Pattern, "Own"], ...] = ()


EXAMPLE_OWN = Own(re.compile(f"^({_EXAMPLE})$"))
REPORT_TMP_OWN = Own(re.compile(f"^({_REPORT}|{_EXAMPLE})$"), ((re.compile(r"^example$"), EXAMPLE_OWN),))
CHECKPOINT_OWN = Own(re.compile(f"^({_CHECKPOINT_FILES})$"))
RUN_OWN = Own(re.compile(f"^({_RUN_FILES}|{_REPORT})$"), (
    (re.compile(f"^{CHECKPOINT}$"), CHECKPOINT_OWN),
    (re.compile(r"^example$"), EXAMPLE_OWN),
    (re.compile(r"^\.report-\w+$"), REPORT_TMP_OWN),
))
_TEMP = re.compile(r"^\.(?P<name>.+)\.tmp-\w+$")


def estimated_bytes(stats_layout, windows: int, causal: bool) -> int:
    """About how many bytes a finished run of ``windows`` windows takes on disk: ``stats.nc``
    (:func:`headsim.stats.schema.stored_bytes`) and the tables (about 3 bytes per window token, 110
    per head, 16 KiB plus 300 per layer, a few KiB of ``run.json``)."""
    from ..stats.schema import stored_bytes

    lay = stats_layout
    tables = 3 * windows * lay.seq_len + 110 * lay.n_layers * lay.n_heads + (16 << 10) + 300 * lay.n_layers + (4 << 10)
    return stored_bytes(lay, windows, causal) + tables


def own_file(name: str, own: Own) -> bool:
    temp = _TEMP.match(name)
    return bool(own.files.match(temp["name"] if temp else name))


def foreign(directory: Path, own: Own, prefix: str = "") -> list[str]:
    """Entries under ``directory`` that headsim does not write (directories end in ``/``)."""
    found = []
    for entry in sorted(directory.iterdir()):
        name = entry.name
        if entry.is_symlink():
            found.append(prefix + name)
        elif entry.is_dir():
            sub = next((rule for pattern, rule in own.dirs if pattern.match(name)), None)
            found += [f"{prefix}{name}/"] if sub is None else foreign(entry, sub, f"{prefix}{name}/")
        elif not (entry.is_file() and own_file(name, own)):
            found.append(prefix + name)
    return found


def describe_names(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
