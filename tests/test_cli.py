"""The command line: help, version, `inspect`, and one-line errors (exit code 2) for bad input.

Commands run in-process through :func:`headsim.cli.run_app` (what the ``headsim`` console script
calls), so the embedded model loaded by the session fixture is reused; two subprocess runs check
the installed entry point itself.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import headsim
from conftest import INSPECT_FILES
from headsim.cli import run_app

FILES = INSPECT_FILES


def _run(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = run_app([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _entry_point() -> list[str]:
    exe = shutil.which("headsim")
    return [exe] if exe else [sys.executable, "-c", "from headsim.cli import main; main()"]


def test_help_subprocess():
    proc = subprocess.run(_entry_point() + ["--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "inspect" in proc.stdout and "version" in proc.stdout


def test_usage_error_subprocess(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(_entry_point() + ["inspect", "some text", "--seq-len", "abc", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "seq-len" in proc.stderr
    assert not out.exists()


def test_help_in_process(capsys):
    code, out, _ = _run(capsys, "--help")
    assert code == 0 and "inspect" in out
    code, out, _ = _run(capsys, "inspect", "--help")
    assert code == 0 and "--layer" in out and "--text-file" in out


def test_no_arguments_shows_help(capsys):
    code, out, err = _run(capsys)
    assert code in (0, 2)
    assert "Traceback" not in err and "inspect" in out + err


def test_version(capsys):
    code, out, _ = _run(capsys, "version")
    assert code == 0
    assert f"headsim {headsim.__version__}" in out and "torch" in out and "transformers" in out


def test_inspect_example(embedded, capsys, tmp_path):
    """The Fig 9 command of the README, on a 24-token window (the figures of a full 128-token
    window take tens of seconds on two cores; the path through the code is the same)."""
    out = tmp_path / "inspect"
    code, stdout, err = _run(capsys, "inspect", "--example", "gerstenslager", "--layer", "6", "--head", "8",
                             "--seq-len", "24", "--out", out)
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == FILES
    flat = " ".join(stdout.split())
    assert "High-similarity pairs, layer 6, head 8" in flat
    assert "Token_i" in stdout and "Token_j" in stdout and "Index_i" in stdout
    assert f"wrote {len(FILES)} files" in flat
    n_pairs = int(re.search(r"(\d+) pairs\)", flat).group(1))
    pairs = pd.read_csv(out / "fig09_pairs.csv", keep_default_na=False)
    assert n_pairs == int(((pairs["layer"] == 6) & (pairs["head"] == 8)).sum())
    assert set(pairs["layer"]) <= set(range(1, 7)) and set(pairs["head"]) <= set(range(1, 13))
    tokens = pd.read_csv(out / "tokens.csv", keep_default_na=False)
    assert len(tokens) == 24 and tokens["token"].iloc[0] == "[CLS]" and tokens["token"].iloc[-1] == "[SEP]"


def test_text_file_is_read_as_utf8(tmp_path):
    from headsim.cli.options import read_text_arg

    f = tmp_path / "in.txt"
    body = "Café crème is served here.\nThe bill comes later — in €."
    f.write_bytes(body.encode("utf-8"))
    assert read_text_arg(None, f) == body
    assert read_text_arg("direct text", None) == "direct text"


# ---------------------------------------------------------------------------------------------
# Bad input: exit code 2, one line with the problem and the fix, nothing written
# ---------------------------------------------------------------------------------------------


def _binary(tmp_path: Path) -> list[str]:
    f = tmp_path / "binary.txt"
    f.write_bytes(b"some text\x00\x01\x02 more")
    return ["--text-file", str(f)]


def _latin1(tmp_path: Path) -> list[str]:
    f = tmp_path / "latin1.txt"
    f.write_bytes("café crème brûlée".encode("latin-1"))
    return ["--text-file", str(f)]


def _missing_file(tmp_path: Path) -> list[str]:
    return ["--text-file", str(tmp_path / "missing.txt")]


def _directory(tmp_path: Path) -> list[str]:
    d = tmp_path / "a-directory"
    d.mkdir()
    return ["--text-file", str(d)]


BAD = {
    "empty text": (lambda p: [""], "empty"),
    "whitespace text": (lambda p: ["   \n\t  "], "empty"),
    "no text": (lambda p: [], "no text"),
    "text and file": (lambda p: ["words", *_binary(p)], "both"),
    "binary file": (_binary, "binary"),
    "invalid utf-8": (_latin1, "UTF-8"),
    "missing file": (_missing_file, "no such file"),
    "directory as file": (_directory, "is a directory"),
    "unknown example": (lambda p: ["--example", "nope"], "unknown example"),
    "unknown model path": (lambda p: ["words", "--model", str(p / "no" / "model")], "does not exist"),
    "uncached hub id": (lambda p: ["words", "--model", "some-org/does-not-exist"], "not in the local hugging face cache"),
    "layer 0": (lambda p: ["words", "--layer", "0"], "layer 0"),
    "layer 7": (lambda p: ["words", "--layer", "7"], "layer 7"),
    "head 0": (lambda p: ["words", "--head", "0"], "head 0"),
    "head 13": (lambda p: ["words", "--head", "13"], "head 13"),
    "threshold 0": (lambda p: ["words", "--threshold", "0"], "threshold 0"),
    "threshold 1.5": (lambda p: ["words", "--threshold", "1.5"], "threshold 1.5"),
    "seq_len 4": (lambda p: ["words", "--seq-len", "4"], "seq_len 4"),
    "seq_len 10000": (lambda p: ["words", "--seq-len", "10000"], "seq_len 10000"),
    "figure layers": (lambda p: ["words", "--figure-layers", "1,x"], "figure-layers"),
    "window": (lambda p: ["words", "--window", "5"], "window 5"),
    "unknown device": (lambda p: ["words", "--device", "tpu"], "device"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_input(embedded, capsys, tmp_path, name):
    make_args, needle = BAD[name]
    out = tmp_path / "out"
    code, stdout, err = _run(capsys, "inspect", *make_args(tmp_path), "--out", out)
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error:") and " — fix: " in lines[0]
    assert needle.lower() in lines[0].lower()
    assert "Traceback" not in err + stdout
    assert not out.exists()


def test_out_is_a_file(embedded, capsys, tmp_path):
    target = tmp_path / "existing"
    target.write_text("keep")
    code, _, err = _run(capsys, "inspect", "words", "--out", target)
    assert code == 2 and "is a file" in err and "Traceback" not in err
    assert target.read_text() == "keep"


def test_unreadable_file(embedded, capsys, tmp_path, monkeypatch):
    f = tmp_path / "secret.txt"
    f.write_text("hidden")
    if os.geteuid() != 0:
        f.chmod(0)
    else:  # root reads everything: make the read fail the way a permission error does
        original = Path.read_bytes

        def refuse(self):
            if self == f:
                raise PermissionError(13, "Permission denied", str(self))
            return original(self)

        monkeypatch.setattr(Path, "read_bytes", refuse)
    out = tmp_path / "out"
    code, _, err = _run(capsys, "inspect", "--text-file", f, "--out", out)
    assert code == 2 and "cannot read" in err and "Traceback" not in err
    assert not out.exists()


def test_usage_errors_in_process(capsys, tmp_path):
    for args in (["inspect", "x", "--seq-len", "abc"], ["inspect", "x", "--no-such-option"], ["no-such-command"]):
        code, _, err = _run(capsys, *args, "--out", tmp_path / "o")
        assert code == 2 and "Traceback" not in err
    assert not (tmp_path / "o").exists()
