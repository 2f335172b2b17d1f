"""Hub ids through huggingface_hub, against a loopback stand-in of the Hub (tests/hub_standin.py).

Every test gets its own HF_HOME and points HF_ENDPOINT at the stand-in; nothing reaches the network.
huggingface_hub reads its environment once, at import: :func:`hub_env` sets the variables and
reloads ``huggingface_hub.constants`` (and restores both afterwards), so each case runs in this
process exactly as a fresh process with that environment would.
"""

from __future__ import annotations

import importlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

from headsim.errors import HeadsimError
from headsim.extraction import extract
from headsim.model import load
from headsim.model.load import load_model

from hub_standin import HubStandIn, Repo

REPO, GATED, PRIVATE, PICKLE = "headsim-test/tiny-bert", "headsim-test/gated-bert", "headsim-test/private-bert", \
    "headsim-test/pickle-bert"
TOKEN = "hf_reader_token"  # has access to the gated and the private repository
OTHER = "hf_other_token"  # a valid token without access
TEXT = "The red fox jumps over the fence. A small bird sings in the garden."
HUB_VARIABLES = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_ENDPOINT", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN",
                 "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN_PATH", "XDG_CACHE_HOME")


def _model_files(tokenizer, seed: int) -> dict[str, bytes]:
    from transformers import BertConfig, BertModel

    config = BertConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                        vocab_size=len(tokenizer), max_position_embeddings=64)
    torch.manual_seed(seed)
    with tempfile.TemporaryDirectory() as d:
        BertModel(config).save_pretrained(d)
        tokenizer.save_pretrained(d)
        return {p.name: p.read_bytes() for p in Path(d).iterdir() if p.is_file()}


@pytest.fixture(scope="module")
def hub(tokenizer):
    """The stand-in with: REPO (tag v1 = one commit, main = a later one with other weights, plus files a
    load must never fetch), a gated and a private copy, and a repository whose only weights are a
    pickle that runs code."""
    v1, v2 = _model_files(tokenizer, 1), _model_files(tokenizer, 2)
    repo = Repo()
    repo.add_commit(v1, "v1")
    repo.add_commit({**v2, "pytorch_model.bin": b"never fetched", "onnx/model.onnx": b"never fetched",
                     "README.md": b"# tiny"}, "main")
    gated, private = Repo(gated=True, readers=frozenset({TOKEN})), Repo(private=True, readers=frozenset({TOKEN}))
    gated.add_commit(v2, "main")
    private.add_commit(v2, "main")
    pickled = Repo()
    pickled.add_commit({**{k: v for k, v in v2.items() if not k.endswith(".safetensors")},
                        "pytorch_model.bin": b"\x80\x04cos\nsystem\n(S'echo pwned'\ntR."}, "main")
    with HubStandIn({REPO: repo, GATED: gated, PRIVATE: private, PICKLE: pickled}, tokens=frozenset({OTHER})) as server:
        server.commits = {"v1": repo.refs["v1"], "main": repo.refs["main"]}
        yield server


class HubEnv:
    """Sets the hub variables for one test (a fresh HF_HOME) and reloads huggingface_hub's constants."""

    def __init__(self, home: Path, endpoint: str):
        self.home, self.endpoint = home, endpoint
        self.saved = {k: os.environ.get(k) for k in HUB_VARIABLES}

    def set(self, *, offline: bool = False, token: str | None = None, endpoint: str | None = None,
            **variables: str) -> "HubEnv":
        for k in HUB_VARIABLES:
            os.environ.pop(k, None)
        os.environ.update({"HF_HOME": str(self.home), "HF_ENDPOINT": endpoint or self.endpoint, **variables})
        if offline:
            os.environ["HF_HUB_OFFLINE"] = "1"
        if token is not None:
            os.environ["HF_TOKEN"] = token
        _reload_hub()
        return self

    def restore(self) -> None:
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _reload_hub()

    @property
    def cache(self) -> Path:
        return self.home / "hub"


def _reload_hub() -> None:
    import huggingface_hub.constants

    importlib.reload(huggingface_hub.constants)


@pytest.fixture
def hub_env(hub, tmp_path):
    env = HubEnv(tmp_path / "hf-home", hub.endpoint).set()
    before = set(load._LOADED)
    hub.clear()
    try:
        yield env
    finally:
        env.restore()
        for key in set(load._LOADED) - before:  # models of this test's cache: drop them
            del load._LOADED[key]


def _error(*args, **kwargs) -> HeadsimError:
    with pytest.raises(HeadsimError) as info:
        load_model(*args, device="cpu", **kwargs)
    assert info.value.problem and info.value.fix and "\n" not in str(info.value)
    return info.value


def _weights(loaded) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in loaded.model.state_dict().items()}


# ---------------------------------------------------------------------------------------------
# downloads, revisions, the cache
# ---------------------------------------------------------------------------------------------


def test_download_into_the_standard_cache(hub, hub_env):
    loaded = load_model(REPO, device="cpu")
    assert (loaded.name, loaded.source, loaded.revision) == (REPO, REPO, "main")
    assert loaded.commit == hub.commits["main"]
    snapshot = hub_env.cache / "models--headsim-test--tiny-bert" / "snapshots" / loaded.commit
    assert (snapshot / "model.safetensors").is_file() and (snapshot / "config.json").is_file()
    assert (hub_env.cache / "models--headsim-test--tiny-bert" / "refs" / "main").read_text() == loaded.commit
    # safetensors preferred: the pickle, the ONNX file and the README are never fetched
    assert sorted(hub.fetched()) == sorted(p for p in hub.repos[REPO].commits[loaded.commit]
                                           if p.endswith((".json", ".txt", ".safetensors")))
    # the weights are the served ones, and the model runs
    from safetensors.torch import load as st_load

    served = st_load(hub.repos[REPO].commits[loaded.commit]["model.safetensors"])
    for name, tensor in served.items():
        torch.testing.assert_close(loaded.model.state_dict()[name], tensor, rtol=0, atol=0)
    assert extract(TEXT, loaded, seq_len=16).head_outputs.shape[1:3] == (2, 2)
    assert loaded.describe()["commit"] == loaded.commit


def test_revision_tag_branch_and_commit(hub, hub_env):
    main, v1 = load_model(REPO, device="cpu"), load_model(REPO, device="cpu", revision="v1")
    assert v1.commit == hub.commits["v1"] != main.commit and v1.revision == "v1"
    assert not torch.equal(_weights(v1)["embeddings.word_embeddings.weight"], _weights(main)["embeddings.word_embeddings.weight"])
    by_commit = load_model(REPO, device="cpu", revision=hub.commits["v1"])
    assert by_commit is v1  # the same snapshot: the same loaded object
    err = _error(REPO, revision="v9")
    assert "'v9'" in err.problem and REPO in err.problem and "--revision" in err.fix


def test_hf_hub_cache_is_respected(hub, hub_env, tmp_path):
    hub_env.set(HF_HUB_CACHE=str(tmp_path / "elsewhere"))
    loaded = load_model(REPO, device="cpu", revision="v1")
    assert (tmp_path / "elsewhere" / "models--headsim-test--tiny-bert" / "snapshots" / loaded.commit / "config.json").is_file()
    assert not hub_env.cache.exists()


def test_warm_cache_works_offline_without_a_request(hub, hub_env, monkeypatch):
    online = load_model(REPO, device="cpu", revision="v1")
    weights = _weights(online)
    monkeypatch.setattr(load, "_LOADED", {})  # a fresh process (the session's models stay loaded)
    hub_env.set(offline=True)
    hub.clear()
    for revision in ("v1", hub.commits["v1"]):
        offline = load_model(REPO, device="cpu", revision=revision)
        assert offline.commit == online.commit
        for k, v in _weights(offline).items():
            assert torch.equal(v, weights[k])
    assert hub.requests == []
    # an unreachable hub falls back to the cache the same way
    monkeypatch.setattr(load, "_LOADED", {})
    hub_env.set(endpoint="http://127.0.0.1:9")
    assert load_model(REPO, device="cpu", revision="v1").commit == online.commit


def test_offline_and_not_cached_is_one_line(hub, hub_env):
    hub_env.set(offline=True)
    err = _error(REPO)
    assert REPO in err.problem and "offline mode" in err.problem and "HF_HUB_OFFLINE=1" in err.problem
    assert "HF_HUB_OFFLINE" in err.fix and hub.requests == []


def test_unreachable_hub_says_how_to_work_offline(hub_env):
    hub_env.set(endpoint="http://127.0.0.1:9")  # the discard port: nothing listens
    err = _error(REPO)
    assert "cannot reach the hub at http://127.0.0.1:9" in err.problem and REPO in err.problem
    assert "HF_HUB_OFFLINE=1" in err.fix


def test_unknown_repository_is_named(hub, hub_env):
    err = _error("headsim-test/no-such-model")
    assert "'headsim-test/no-such-model' does not exist on the hub" in err.problem and "no token" in err.problem
    assert "HF_TOKEN" in err.fix


def test_private_repository_needs_its_token(hub, hub_env):
    assert "private" in _error(PRIVATE).problem
    hub_env.set(token=OTHER)
    assert "the token in use has no access" in _error(PRIVATE).problem
    hub_env.set(token=TOKEN)
    assert load_model(PRIVATE, device="cpu").commit == hub.repos[PRIVATE].refs["main"]
    assert {tok for _, path, tok in hub.requests if "private" in path} >= {TOKEN}


def test_gated_repository(hub, hub_env):
    err = _error(GATED)
    assert "gated" in err.problem and GATED in err.problem
    assert f"{hub.endpoint}/{GATED}" in err.fix and "HF_TOKEN" in err.fix
    hub_env.set(token=OTHER)
    err = _error(GATED)
    assert "gated" in err.problem and "the token in use has no access" in err.problem and "accept its terms" in err.fix
    hub_env.set(token="hf_not_a_token")
    assert "refused the token" in _error(GATED).problem
    hub_env.set(token=TOKEN)  # HF_TOKEN is what huggingface_hub sends
    loaded = load_model(GATED, device="cpu")
    assert loaded.commit == hub.repos[GATED].refs["main"]


def test_stored_login_is_used(hub, hub_env):
    """A token stored by `hf auth login` (HF_HOME/token) is used when HF_TOKEN is not set."""
    hub_env.home.mkdir(parents=True, exist_ok=True)
    (hub_env.home / "token").write_text(TOKEN)
    hub_env.set()
    assert load_model(GATED, device="cpu").commit == hub.repos[GATED].refs["main"]


def test_pickle_only_weights_keep_their_protection(hub, hub_env):
    err = _error(PICKLE)
    assert "pickle that is not plain tensors" in err.problem
    assert "pytorch_model.bin" in hub.fetched()


def test_a_local_path_takes_no_revision(tiny_bert_dir, hub_env):
    assert "not a hub id" in _error(tiny_bert_dir, revision="v1").problem


# ---------------------------------------------------------------------------------------------
# run.json, the report, the CLI
# ---------------------------------------------------------------------------------------------


def test_cli_analyze_records_the_commit_and_resumes_at_it(hub, hub_env, tmp_path, capsys):
    from headsim.cli import run_app
    from headsim.report.build import load_report_run
    from headsim.report.html import model_description

    corpus = tmp_path / "corpus.txt"
    corpus.write_text((TEXT + " ") * 20)
    out = tmp_path / "run"
    code = run_app(["analyze", "--model", REPO, "--revision", "v1", "--corpus", str(corpus), "--windows", "2",
                    "--seq-len", "16", "--out", str(out), "--device", "cpu"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert hub.commits["v1"] in captured.out
    meta = json.loads((out / "run.json").read_text())
    assert meta["model"]["commit"] == hub.commits["v1"] and meta["model"]["revision"] == "v1"
    assert meta["spec"]["model_commit"] == hub.commits["v1"]
    assert hub.commits["v1"] in model_description(meta["model"])
    # the report's tokenizer comes from the cache at the recorded commit, without a request
    hub.clear()
    hub_env.set(offline=True)
    assert load_report_run(out).shares["punct"] is not None and hub.requests == []  # punctuation: counted with it
    # the explorer serves the run's own commit (not main) and shows it for the model and the run
    from fastapi.testclient import TestClient

    from headsim.explorer.app import create_app

    info = TestClient(create_app(REPO, out)).get("/api/info").json()
    assert info["model"]["commit"] == info["run"]["commit"] == hub.commits["v1"] and not info["run"]["warnings"]
    assert hub.requests == []
    # --resume loads the run's commit from the cache (main was never downloaded: loading it would fail offline)
    assert run_app(["analyze", "--out", str(out), "--resume", "--corpus", str(corpus), "--device", "cpu"]) == 0
    assert "already holds this run" in capsys.readouterr().err and hub.requests == []
    # an offline CLI error is one line, exit 2
    code = run_app(["analyze", "--model", "headsim-test/not-cached", "--corpus", str(corpus), "--windows", "2",
                    "--out", str(tmp_path / "other"), "--device", "cpu"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "offline mode" in err


def test_run_spec_without_a_commit_still_reads():
    """Runs written before the commit was recorded keep their spec (model_commit None)."""
    from headsim.runs.spec import RunSpec

    spec = RunSpec("m", "abc", 4, 16, 0.3, 3, 2, "float32", "pysbd", model_commit="c0ffee")
    stored = spec.as_meta()
    del stored["spec"]["model_commit"]
    old = RunSpec.from_meta(stored)
    assert old.model_commit is None and old.differences(spec) == {"model_commit": (None, "c0ffee")}


def test_same_statistics_from_the_hub_and_from_a_directory(hub, hub_env, tmp_path):
    """The hub snapshot and the same files in a local directory give bit-identical head outputs."""
    loaded = load_model(REPO, device="cpu", revision="v1")
    local = tmp_path / "v1"
    local.mkdir()
    for name, data in hub.repos[REPO].commits[hub.commits["v1"]].items():
        (local / name).write_bytes(data)
    a, b = extract(TEXT, loaded, seq_len=16), extract(TEXT, load_model(local, device="cpu"), seq_len=16)
    np.testing.assert_array_equal(a.head_outputs, b.head_outputs)


def test_embedded_default_needs_no_network_and_no_cache(hub_env, monkeypatch):
    hub_env.set(endpoint="http://127.0.0.1:9")  # nothing listens: any request would fail
    monkeypatch.setattr(load, "_LOADED", {})  # a fresh process
    loaded = load_model(device="cpu")
    assert loaded.name == "default" and loaded.commit is None and "commit" not in loaded.describe()
    assert not hub_env.home.exists()  # no cache written
