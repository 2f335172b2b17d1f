"""Hub ids → a snapshot in the standard Hugging Face cache, through huggingface_hub.

:func:`fetch` downloads (with huggingface_hub's own progress bars) only what a model needs: its
``config.json``, tokenizer files and PyTorch weights at the top of the repository — safetensors when
the repository has them, else the pickled ``pytorch_model*.bin`` (which transformers then reads with
torch's weights-only loader). Nothing else (ONNX, TF, Flax, remote code) is fetched.

Everything huggingface_hub reads from the environment holds: ``HF_HOME`` / ``HF_HUB_CACHE`` (the
cache shared with every other tool), ``HF_ENDPOINT``, ``HF_TOKEN`` or a stored login (``hf auth
login``), and ``HF_HUB_OFFLINE=1`` (a cached snapshot is used as is, nothing is requested). Every
failure becomes one :class:`~headsim.errors.HeadsimError` naming the repository and what to do.
"""

from __future__ import annotations

import fnmatch
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from ..errors import HeadsimError

DEFAULT_REVISION = "main"
CONFIG = "config.json"
#: tokenizer files transformers may read (whichever the repository has)
TOKENIZER_FILES = frozenset({
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "vocab.txt",
    "vocab.json", "merges.txt", "spiece.model", "sentencepiece.bpe.model", "tokenizer.model", "source.spm",
    "target.spm",
})
#: weight files by preference: safetensors first, pickles only where a repository has nothing else
WEIGHTS = (
    ("model.safetensors", "model.safetensors.index.json", "model-*-of-*.safetensors"),
    ("pytorch_model.bin", "pytorch_model.bin.index.json", "pytorch_model-*-of-*.bin"),
)


class Snapshot(NamedTuple):
    """A hub model in the local cache: its folder, the repository, the revision asked for and the
    commit it resolved to (the folder's name)."""

    path: Path
    repo_id: str
    revision: str
    commit: str


def endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT


def offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.is_offline_mode())


def cache_dir() -> str:
    from huggingface_hub import constants

    return constants.HF_HUB_CACHE


def needed_files(names: list[str]) -> list[str]:
    """The files of a repository listing (paths) a model load reads: config, tokenizer, and the weights
    of the first kind in :data:`WEIGHTS` the repository has; only files at its top level."""
    top = [n for n in names if "/" not in n]
    wanted = [n for n in top if n == CONFIG or n in TOKENIZER_FILES]
    for patterns in WEIGHTS:
        weights = [n for n in top if any(fnmatch.fnmatchcase(n, p) for p in patterns)]
        if any(not n.endswith(".json") for n in weights):
            return wanted + weights
    return wanted


def fetch(repo_id: str, revision: str | None = None) -> Snapshot:
    """Download (or find in the cache) what :func:`headsim.model.load.load_model` reads of ``repo_id``
    at ``revision`` (a branch, tag or commit; default ``main``); one-line errors for every failure."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.utils import enable_progress_bars

    revision = revision or DEFAULT_REVISION
    if not constants.HF_HUB_DISABLE_PROGRESS_BARS:  # transformers' quiet mode switches them off for everyone
        enable_progress_bars()
    with hub_errors(repo_id, revision):
        # the config alone first: resolves the revision to a commit and caches the repository's file list
        head = Path(snapshot_download(repo_id, revision=revision, allow_patterns=[CONFIG]))
        commit = head.name
        listing = _listing(repo_id, commit)
        if listing is not None:  # None: offline, cached by another tool without a listing; the load checks it
            wanted = needed_files(listing)
            if not any(n.endswith((".safetensors", ".bin")) for n in wanted):
                raise HeadsimError(f"model {repo_id!r} (revision {revision}) has no PyTorch weights at the top of the "
                                   "repository (model.safetensors or pytorch_model.bin)",
                                   "use a repository with PyTorch weights; headsim reads no TF, Flax or ONNX files")
            snapshot_download(repo_id, revision=commit, allow_patterns=wanted)
    return Snapshot(head, repo_id, revision, commit)


def _listing(repo_id: str, commit: str) -> list[str] | None:
    """The repository's files at ``commit``: the listing the config's download cached, else asked of
    the hub; ``None`` offline without a cached listing."""
    try:
        from huggingface_hub import get_cached_repo_tree

        return [f.path for f in get_cached_repo_tree(repo_id, revision=commit)]
    except Exception:  # noqa: BLE001 - no listing cached (its error class, and the function, vary by version)
        pass
    if offline():
        return None
    from huggingface_hub import HfApi

    return list(HfApi().list_repo_files(repo_id, revision=commit))


def cached_snapshot(repo_id: str, revision: str | None) -> Path | None:
    """The cached snapshot folder of ``repo_id`` at ``revision`` (a commit, branch or tag), without any
    request; ``None`` when the cache has none."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id, revision=revision or DEFAULT_REVISION, local_files_only=True,
                                      allow_patterns=[CONFIG]))
    except Exception:  # noqa: BLE001 - not cached, or not a valid id: the caller has nothing to read
        return None


def _has_token() -> bool:
    from huggingface_hub import get_token

    try:
        return get_token() is not None
    except Exception:  # noqa: BLE001 - an unreadable stored login counts as none
        return False


@contextmanager
def hub_errors(repo_id: str, revision: str):
    """Turn huggingface_hub's exceptions into one-line :class:`HeadsimError` s."""
    from huggingface_hub.errors import (GatedRepoError, HFValidationError, HfHubHTTPError, LocalEntryNotFoundError,
                                        OfflineModeIsEnabled, RepositoryNotFoundError, RevisionNotFoundError)

    where, page = endpoint(), f"{endpoint()}/{repo_id}"
    login = "set HF_TOKEN to a token with read access (or log in once with `hf auth login`)"
    try:
        yield
    except HeadsimError:
        raise
    except GatedRepoError as exc:
        if _has_token():
            raise HeadsimError(f"model {repo_id!r} is a gated repository and the token in use has no access to it",
                               f"accept its terms at {page} with the account of HF_TOKEN (or of your login), "
                               "then run again") from exc
        raise HeadsimError(f"model {repo_id!r} is a gated repository: its files need an account that accepted its terms",
                           f"accept them at {page}, then {login}") from exc
    except RepositoryNotFoundError as exc:
        if exc.response is not None and exc.response.status_code == 401 and _has_token() and \
                exc.response.headers.get("X-Error-Message") == "Invalid credentials in Authorization header":
            raise _bad_token(where) from exc
        who = "the token in use has no access to it" if _has_token() else "no token was given"
        raise HeadsimError(f"model {repo_id!r} does not exist on the hub at {where}, or it is private and {who}",
                           f"check the id (owner/name, as on {where}); for a private repository {login}",
                           status=404) from exc
    except RevisionNotFoundError as exc:
        raise HeadsimError(f"model {repo_id!r} has no revision {revision!r}",
                           f"pass --revision with a branch, tag or commit id of the repository (see {page})",
                           status=404) from exc
    except HFValidationError as exc:
        raise HeadsimError(f"{repo_id!r} is neither an existing directory nor a valid hub id "
                           f"({str(exc).splitlines()[0]})",
                           "pass a local model directory, or a hub id as owner/name") from exc
    except (LocalEntryNotFoundError, OfflineModeIsEnabled) as exc:
        raise _not_reachable(repo_id, revision, where, exc) from exc
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        if status == 401 and _has_token():
            raise _bad_token(where) from exc
        raise HeadsimError(f"the hub at {where} answered HTTP {status} for model {repo_id!r} (revision {revision})",
                           "try again later; to work offline, use a model already in the cache with HF_HUB_OFFLINE=1") from exc
    except OSError as exc:  # disk full, cache not writable, ...
        raise HeadsimError(f"cannot store model {repo_id!r} in the Hugging Face cache {cache_dir()!r}: "
                           f"{getattr(exc, 'strerror', None) or exc}",
                           "free disk space, or point HF_HOME (or HF_HUB_CACHE) at a writable directory") from exc
    except Exception as exc:  # noqa: BLE001 - httpx's connection and proxy errors (their module is versioned)
        if not type(exc).__module__.startswith(("httpx", "httpcore", "ssl")):
            raise
        raise _not_reachable(repo_id, revision, where, exc) from exc


def _bad_token(where: str) -> HeadsimError:
    return HeadsimError(f"the hub at {where} refused the token in use (HF_TOKEN or your stored login) as invalid",
                        "set HF_TOKEN to a valid token (or unset it to go without), or log in again with `hf auth login`")


def _not_reachable(repo_id: str, revision: str, where: str, exc: BaseException) -> HeadsimError:
    cache = cache_dir()
    if offline():
        return HeadsimError(f"model {repo_id!r} (revision {revision}) is not in the local Hugging Face cache {cache!r} "
                            "and offline mode is on (HF_HUB_OFFLINE=1)",
                            "unset HF_HUB_OFFLINE to download it, download it once on a connected machine into this "
                            "HF_HOME, or pass a local model directory", status=404)
    from huggingface_hub import errors

    what = "only partly in" if isinstance(exc, getattr(errors, "IncompleteSnapshotError", ())) else "not in"
    return HeadsimError(f"cannot reach the hub at {where} to download model {repo_id!r} (revision {revision}), and it is "
                        f"{what} the local cache {cache!r}",
                        "check the network connection (or HF_ENDPOINT); to work offline, download the model once on a "
                        "connected machine into this HF_HOME and set HF_HUB_OFFLINE=1, or pass a local model directory",
                        status=503)
