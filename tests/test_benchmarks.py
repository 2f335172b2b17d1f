"""benchmarks/throughput.py (a README command) on a tiny random model: the JSON the performance issue
asks for, with ratios that follow from its own rates and statistics that agree with the naive
reference. Plumbing only: no timing is asserted."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "throughput.py"
REQUIRED = ("device", "model", "windows", "bare_windows_per_s", "headsim_windows_per_s", "naive_windows_per_s",
            "ratio_vs_bare", "speedup_vs_naive", "peak_memory_bytes")


def _run(args: list[str], out: Path) -> dict:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", *args, "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.slow
def test_throughput_json_has_every_field_and_consistent_ratios(tiny_bert_dir, tmp_path):
    res = _run(["--model", str(tiny_bert_dir), "--windows", "6", "--naive-windows", "2", "--batch-size", "3",
                "--seq-len", "32", "--sentences", "punkt"], tmp_path / "tp.json")
    for key in REQUIRED:
        assert key in res, key
    assert res["device"].startswith("cpu") and res["windows"] == 6 and res["naive_windows_measured"] == 2
    assert math.isclose(res["ratio_vs_bare"], res["headsim_windows_per_s"] / res["bare_windows_per_s"])
    assert math.isclose(res["speedup_vs_naive"], res["headsim_windows_per_s"] / res["naive_windows_per_s"])
    assert res["peak_memory_bytes"]["cpu_rss"] > 0 and res["peak_memory_bytes"]["gpu_max_allocated"] is None
    agree = res["agreement_vs_naive"]  # headsim's statistics against the naive per-head numpy loops
    assert agree["attn_sum_max_abs_diff"] < 1e-4 and agree["sim_sum_max_abs_diff"] < 1e-4
    assert agree["pair_counts_max_rel_diff"] < 0.02  # equal here; room for a rare flip at the threshold elsewhere
    assert res["code"]["headsim"] and (res["code"]["commit"] is None or isinstance(res["code"]["commit"], str))


@pytest.mark.slow
@pytest.mark.parametrize("around", [False, True])
def test_end_to_end_timing_analyses_the_windows_asked_for(tiny_bert_dir, tmp_path, around):
    extra = ["--around-model"] if around else []
    res = _run(["--model", str(tiny_bert_dir), "--seq-len", "32", "--sentences", "punkt", "--batch-size", "4",
                "--end-to-end", "10", "--end-to-end-only", *extra], tmp_path / "e2e.json")
    e2e = res["end_to_end"]
    assert e2e["windows"] == 10 and e2e["seconds"] > 0
    assert e2e["model_step"] == ("skipped" if around else "run")
    assert math.isclose(e2e["windows_per_s"], 10 / e2e["seconds"])


def test_sass_loop_reads_the_largest_loop_of_a_listing(monkeypatch):
    """kernel_resources.sass_loop on a cuobjdump-style listing with a short and a long backward branch."""
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    pytest.importorskip("triton")
    from kernel_resources import sass_loop

    lines = ["MOV R1, c[0x0][0x28]", "IMAD R2, R3, R4, R5",  # 0x00, 0x10: before the loop
             "LDG.E R6, desc[UR4][R2.64]", "VOTE.ANY R7, PT, P0", "@P1 LOP3.LUT R8, R7, R9, RZ, 0xc0, !PT",  # 0x20–0x40
             "POPC R10, R8", "@!P2 BRA 0x40", "IADD3 R11, R10, 0x1, RZ", "BRA 0x20", "EXIT"]  # 0x60: inner, 0x80: outer
    sass = "\n".join(f"        /*{16 * i:04x}*/                   {text} ;" for i, text in enumerate(lines))
    loop = sass_loop(sass)
    assert loop["instructions"] == 7  # 0x20 … 0x80, the outer loop
    assert loop["opcodes"] == {"LDG": 1, "VOTE": 1, "LOP3": 1, "POPC": 1, "BRA": 2, "IADD3": 1}
    assert sass_loop("\n".join(f"        /*{16 * i:04x}*/  {t} ;" for i, t in enumerate(["MOV R1, R2", "EXIT"]))) is None


def test_layer_ab_runs_two_checkouts_in_one_process_and_compares_their_statistics(tmp_path):
    """``benchmarks/layer_ab.py`` with this checkout as its own base: both sides run, their statistics equal
    (the script stops on differing counts), the JSON's times per window and layer follow from its seconds."""
    src = Path(__file__).resolve().parents[1] / "src"
    out = tmp_path / "ab.json"
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "layer_ab.py"
    proc = subprocess.run([sys.executable, str(script), "--base", str(src), "--seq-len", "16", "--windows", "3",
                           "--layers", "1", "--repeats", "2", "--threads", "1", "--json", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    row = json.loads(out.read_text())
    assert set(row["ms_per_window_layer"]) == {"headsim", "headsim_base"}
    for name, seconds in row["seconds"].items():
        assert len(seconds) == 2
        assert math.isclose(row["ms_per_window_layer"][name], min(seconds) / 3 * 1e3)
    assert row["sums_max_relative_difference"] == {}  # the same code: every statistic identical
