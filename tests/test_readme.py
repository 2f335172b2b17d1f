"""The README's promises: its Python quick start runs as written, every ``headsim.NAME`` it shows is
public API, every ``headsim COMMAND`` it shows exists, and every local link points at a file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_every_name_the_readme_shows_is_exported():
    import headsim

    shown = set(re.findall(r"\bheadsim\.([A-Za-z_]\w*)\b(?!\.\w)", "\n".join(_blocks("python"))))
    assert shown, "the README shows no headsim.NAME"
    for name in sorted(shown):
        assert name in headsim.__all__, f"README shows headsim.{name}, not in headsim.__all__"
        assert getattr(headsim, name) is not None


def test_every_command_the_readme_shows_exists():
    from typer.main import get_command

    from headsim.cli import app

    commands = set(get_command(app).commands)
    shown = set(re.findall(r"^headsim ([a-z-]+)", "\n".join(_blocks("bash")), flags=re.M))
    assert shown and shown <= commands, sorted(shown - commands)


def test_local_links_point_at_files():
    links = re.findall(r"\]\(((?!https?:|#)[^)#\s]+)", README)
    assert links
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, missing


def test_first_screen_is_for_users():
    """The two fresh-machine commands come first, then what headsim does; no performance history."""
    head = README.splitlines()[:30]
    assert head[3].startswith("make demo") and head[4].startswith("make test")
    assert not re.search(r"SASS|not yet timed|next GPU session", README)


@pytest.mark.slow
def test_python_quick_start_runs_as_written(tmp_path, monkeypatch):
    from headsim.inspection import example_text

    code = _blocks("python")[0]  # the quick start (the notebook section after it needs a model of your own)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "article.txt").write_text(example_text(), encoding="utf-8")
    scope: dict = {}
    exec(compile(code.replace("windows=200", "windows=8"), "README.md", "exec"), scope)
    run = scope["run"]
    assert run.heads.shape[0] == scope["model"].n_layers * scope["model"].n_heads
    assert (tmp_path / "runs" / "minilm-small" / "run.json").is_file() and (tmp_path / "my-text").is_dir()
