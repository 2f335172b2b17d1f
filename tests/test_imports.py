"""No import cycle between headsim's modules (imports inside functions count: they are cycles all the
same, only deferred), and the run pipeline's layers import downward."""

from __future__ import annotations

import textwrap

import import_graph as g

#: cycles that exist today outside the run pipeline, each with the change that removes it; the test
#: fails on any other cycle (a group of modules that grows, or a new one, fails it; delete a line once its cycle is gone)
KNOWN_CYCLES = {
    # corpus.py reads URLs through corpus_uri, which takes the file readers back from corpus.py:
    # goes away when the readers and the remote reading become corpus/{readers,remote}.py
    frozenset({"headsim.corpus", "headsim.corpus_uri"}),
    # a run's notebook card (runs.run -> views.html.summaries) draws from the report's tables
    # (report.build), which read runs and show the ablation section, whose card is in summaries again:
    # goes away when the cards take their numbers from stats/tables.py and figures/, not report/
    frozenset({"headsim.ablation.report", "headsim.ablation.study", "headsim.views.html.summaries",
               "headsim.report.build", "headsim.report.window_lengths", "headsim.report.window_section",
               "headsim.runs.run", "headsim.runs.rundir"}),
}


def _write(root, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_the_graph_sees_imports_inside_functions_and_names_the_cycle(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from . import b\n",
        "pkg/b.py": "def f():\n    from .sub.c import g\n    return g\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/c.py": "import os\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import x\n"
                        "def g():\n    from .. import a\n",
        "pkg/d.py": "from pkg.sub import c\nimport pkg.a\n",
    })
    edges = g.graph(tmp_path, "pkg")
    assert edges["pkg.a"] == {"pkg.b"} and edges["pkg.b"] == {"pkg.sub.c"} and edges["pkg.sub.c"] == {"pkg.a"}
    assert edges["pkg.d"] == {"pkg.sub.c", "pkg.a"}
    assert g.cycles(edges) == [["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"]]
    assert g.tangles(edges) == [{"pkg.a", "pkg.b", "pkg.sub.c"}]
    del edges["pkg.sub.c"]
    assert g.cycles(edges) == []


def test_no_import_cycle_in_the_package():
    edges = g.graph()
    found = [g.cycles({a: edges[a] & tangle for a in tangle})[0] for tangle in g.tangles(edges)
             if frozenset(tangle) not in KNOWN_CYCLES]
    assert not found, "import cycles: " + "; ".join(" -> ".join(c) for c in found)


def test_the_run_pipeline_imports_downward():
    """The engines never import the module that picks them, and the Ray engine never the local one."""
    edges = g.graph()
    assert not {"headsim.runs.analyze", "headsim.runs.local"} & edges["headsim.runs.ray"]
    assert "headsim.runs.analyze" not in edges["headsim.runs.local"]
    users = {a for a, targets in edges.items() if "headsim.runs.analyze" in targets}
    assert not {u for u in users if u.startswith("headsim.runs.")}, users
