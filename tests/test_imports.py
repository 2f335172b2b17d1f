"""No import cycle between headsim's modules (imports inside functions count: they are cycles all the
same, only deferred), and the run pipeline's layers import downward."""

from __future__ import annotations

import textwrap

import import_graph as g

#: cycles that exist today outside the run pipeline, each with the change that removes it; the test
#: fails on any other cycle (a group of modules that grows, or a new one, fails it; delete a line once its cycle is gone)


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
    found = [g.cycles({a: edges[a] & tangle for a in tangle})[0] for tangle in g.tangles(edges)]
    assert not found, "import cycles: " + "; ".join(" -> ".join(c) for c in found)


def test_the_run_pipeline_imports_downward():
    """The engines never import the module that picks them, and the Ray engine never the local one."""
    edges = g.graph()
    assert not {"headsim.runs.analyze", "headsim.runs.local"} & edges["headsim.runs.ray"]
    assert "headsim.runs.analyze" not in edges["headsim.runs.local"]
    users = {a for a, targets in edges.items() if "headsim.runs.analyze" in targets}
    assert not {u for u in users if u.startswith("headsim.runs.")}, users


def test_no_module_of_the_package_is_over_600_lines():
    """Small modules with one job (the house rule of issue 45): a module that grows past 600 lines is split
    where its code shows a seam."""
    from pathlib import Path

    import headsim

    root = Path(headsim.__file__).parent
    long = {str(p.relative_to(root)): n for p in root.rglob("*.py") if (n := len(p.read_text().splitlines())) > 600}
    assert long == {}, long
