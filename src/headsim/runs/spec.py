"""The settings of a run that decide its numbers, as one frozen value (:class:`RunSpec`).

``headsim analyze`` builds it before the first window and writes it into ``run.json``
(:meth:`RunSpec.as_meta`); ``--resume`` refuses a run whose stored spec differs in any field,
``merge`` refuses shards that differ in :data:`RunSpec.NUMBERS` (the fields that change what each
window adds), and the refusals name the ``headsim analyze`` option of every field that differs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, asdict, dataclass, fields

from ..errors import HeadsimError
from ..stats.schema import DEFAULT_RESOLUTION

#: the run.json key that holds the spec
KEY = "spec"


@dataclass(frozen=True)
class RunSpec:
    """Everything that decides the numbers of a run (engine-independent: Ray and the single process
    give the same results for the same spec)."""

    model_source: str
    corpus_sha256: str
    windows: int
    seq_len: int
    threshold: float
    top_k_columns: int
    batch_size: int
    dtype: str
    sentence_splitter: str
    first_window: int = 0  # the corpus's window the run starts at (a --shard of it; 0: from the start)
    #: windows longer than this keep position-pair statistics on this many position bins
    #: (runs written before it existed were never binned)
    resolution: int = DEFAULT_RESOLUTION
    model_commit: str | None = None  # a hub model's commit (the exact weights); runs before it was recorded: None
    #: a model given as an object: the SHA-256 fingerprint of its weights as read
    #: (:func:`headsim.model.objects.fingerprint`); ``None`` for a model loaded by name
    model_fingerprint: str | None = None

    #: fields that change what each window adds: runs must agree on them to be merged
    NUMBERS = ("model_source", "seq_len", "threshold", "top_k_columns", "dtype", "sentence_splitter", "resolution",
               "model_commit", "model_fingerprint")
    #: the analyze option that sets each field
    FLAGS = {"model_source": "--model", "corpus_sha256": "--corpus", "windows": "--windows", "seq_len": "--seq-len",
             "threshold": "--threshold", "top_k_columns": "--top-k-columns", "batch_size": "--batch-size",
             "dtype": "--dtype", "sentence_splitter": "--sentences", "first_window": "--shard",
             "resolution": "--resolution", "model_commit": "--revision",
             "model_fingerprint": "the model's weights (fingerprint)"}

    # -- run.json ----------------------------------------------------------------------------

    def as_meta(self) -> dict:
        """The spec's part of ``run.json``: the spec itself and, at the top level, the settings a
        reader shows (``windows`` there becomes the windows analysed, fewer when the corpus ran out)."""
        shown = ("windows", "seq_len", "threshold", "top_k_columns", "batch_size", "dtype", "sentence_splitter")
        return {**{name: getattr(self, name) for name in shown}, KEY: asdict(self)}

    @classmethod
    def from_meta(cls, meta: dict, where: str = "the run") -> "RunSpec":
        """The spec stored in a ``run.json``; an error naming ``where`` (its path) when it is missing or malformed."""
        stored = meta.get(KEY)
        names = [f.name for f in fields(cls)]
        required = [f.name for f in fields(cls) if f.default is MISSING]  # runs from before a field was added lack it
        if not isinstance(stored, dict) or set(required) - set(stored):
            raise HeadsimError(f"{where} holds no complete run spec",
                               "analyse the corpus again with this version of headsim (headsim analyze --overwrite …)")
        return cls(**{name: stored[name] for name in names if name in stored})

    def analyze_args(self) -> dict:
        """The spec as :func:`headsim.analyze` arguments (the corpus is not among them: its checksum
        is not a path)."""
        names = {"model_source": "model", "windows": "windows", "seq_len": "seq_len", "threshold": "threshold",
                 "top_k_columns": "top_k_columns", "batch_size": "batch_size", "dtype": "dtype",
                 "sentence_splitter": "sentence_splitter", "resolution": "resolution", "model_commit": "revision"}
        return {arg: getattr(self, key) for key, arg in names.items()}

    # -- comparing ---------------------------------------------------------------------------

    def differences(self, other: "RunSpec", names: tuple[str, ...] | None = None) -> dict[str, tuple]:
        """``{field: (self's value, other's value)}`` for every field in ``names`` (default: all)
        where the two differ."""
        names = tuple(f.name for f in fields(self)) if names is None else names
        return {n: (getattr(self, n), getattr(other, n)) for n in names if getattr(self, n) != getattr(other, n)}


def describe_changes(changed: dict[str, tuple], old: str = "run", new: str = "now") -> str:
    """``--seq-len: run 32, now 64, …`` for :meth:`RunSpec.differences`."""
    def shown(key: str, value):  # a fingerprint by its first 12 hex digits, as the report shows it
        return value[:12] if key == "model_fingerprint" and isinstance(value, str) else value

    return ", ".join(f"{RunSpec.FLAGS.get(k, k)}: {old} {shown(k, a)!r}, {new} {shown(k, b)!r}" for k, (a, b) in changed.items())


def resume_flags(changed: dict[str, tuple], meta: dict) -> str:
    """The options that give back a stored run's settings (``meta``: its run.json), as a user types them."""
    parts = []
    for key, (value, _) in changed.items():
        if key == "first_window":
            shard = meta.get("shard")
            parts.append(f"--shard {shard['index']}/{shard['count']}" if shard else "no --shard")
            continue
        if key == "model_fingerprint":
            parts.append("the model the run was made with" + (f" (weights {value[:12]})" if value else " (loaded by name)"))
            continue
        if key == "corpus_sha256":
            corpus = meta.get("corpus") or {}
            value = corpus.get("spec") or f"<the corpus {corpus.get('name')!r} the run was made from>"
        parts.append(f"{RunSpec.FLAGS.get(key, '--' + key)} {value}")
    return " ".join(parts)


def requested_backend(meta: dict | None) -> str:
    """The statistics backend a run asked for (runs written before the choice was recorded: ``"compiled"``
    where they ran with ``fused``, else ``"auto"``)."""
    meta = meta or {}
    return (meta.get("statistics_backend") or {}).get("requested") or ("compiled" if meta.get("fused") else "auto")


def resume_defaults(stored: dict, given: dict, unset: Callable[[str, object], bool] = lambda name, value: value is None) -> dict:
    """The settings of a resumed run: ``given`` (:func:`headsim.analyze` arguments by name) with each one
    the call left open (``unset(name, value)``; by default ``None``; the CLI: an option not typed)
    replaced by the stored run's own (``stored``: :meth:`headsim.runs.rundir.RunDir.settings`). The one
    rule of ``--resume``, for the API and the CLI alike."""
    return {name: stored[name] if stored.get(name) is not None and unset(name, value) else value
            for name, value in given.items()}
