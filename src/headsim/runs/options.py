"""What a call of :func:`headsim.analyze` asks for, as two values checked where they are declared:
:class:`RunOptions` (every engine) and :class:`RayOptions` (the Ray engine's actors and shares).

``analyze(model, corpus, **arguments)`` builds them (:meth:`RunOptions.from_arguments`); the CLI
passes the same names. :meth:`RunOptions.check` refuses bad values before anything is loaded or
written, each in one line naming the option and its fix.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace

from ..context_similarity import check_threshold
from ..errors import HeadsimError, require
from ..sentences import check_splitter
from ..stats.backends import check_name
from ..stats.schema import DEFAULT_RESOLUTION
from ..windows import check_workers

#: the engines a run can use (:mod:`headsim.runs.analyze` picks one by name)
ENGINES = ("local", "ray")


@dataclass(frozen=True)
class RayOptions:
    """The Ray engine's options (:mod:`headsim.runs.ray`).

    Args:
        actors: Ray actors, one model copy each; ``None``: as many as the cluster's CPUs (or GPUs,
            with ``gpus_per_actor``) hold.
        cpus_per_actor, gpus_per_actor: resources each actor reserves (fractions share a device);
            a CPU actor runs ``int(cpus_per_actor)`` torch threads.
        share_windows: windows per share, rounded up to whole batches (default: about four shares per
            actor, at most 64 batches each).
        address: ``None`` starts a local cluster (or uses the one this process joined already);
            ``"auto"`` joins the cluster this node belongs to; ``"ray://HOST:10001"`` connects a client.
    """

    actors: int | None = None
    cpus_per_actor: float = 1.0
    gpus_per_actor: float = 0.0
    share_windows: int | None = None
    address: str | None = None

    #: older argument names of :func:`headsim.analyze` still accepted
    ALIASES = {"cpus_per_worker": "cpus_per_actor", "gpus_per_worker": "gpus_per_actor"}

    def check(self) -> "RayOptions":
        for name, value in (("gpus_per_actor", self.gpus_per_actor), ("cpus_per_actor", self.cpus_per_actor)):
            require(isinstance(value, (int, float)) and value >= 0, f"{name} {value!r} must be 0 or more",
                    "pass a number of CPUs/GPUs")
        require(self.gpus_per_actor > 0 or self.cpus_per_actor > 0, "a Ray actor must reserve some CPU or GPU",
                "pass --cpus-per-actor or --gpus-per-actor above 0")
        require(self.actors is None or (isinstance(self.actors, int) and self.actors >= 1),
                f"actors {self.actors!r} must be at least 1 with the Ray engine",
                "pass a positive number of Ray workers (--actors), or leave it unset for one per CPU/GPU of the cluster")
        require(self.share_windows is None or (isinstance(self.share_windows, int) and self.share_windows >= 1),
                f"share_windows {self.share_windows!r} must be at least 1", "pass a positive number of windows")
        return self

    def _needs(self) -> tuple[tuple[str, float], ...]:
        return tuple((kind, need) for kind, need in (("CPU", self.cpus_per_actor), ("GPU", self.gpus_per_actor)) if need > 0)

    def fit(self, have: dict) -> int:
        """How many actors the cluster's resources ``have`` (``ray.cluster_resources()``) hold at once."""
        return min(int(have.get(kind, 0) // need + 1e-9) for kind, need in self._needs())

    def count(self, have: dict) -> int:
        """The actors asked for, else as many as the cluster's GPUs and CPUs hold; refused in one line,
        before any actor starts, when the cluster cannot hold them all at once (an actor that can never
        be placed would wait for ever)."""
        fit = self.fit(have)
        per = ", ".join(f"{need:g} {kind}" for kind, need in self._needs())
        total = ", ".join(f"{have.get(kind, 0):g} {kind}s" for kind in ("CPU", "GPU"))
        require(fit >= 1, f"the Ray cluster has {total}: not enough for one worker of {per}",
                "add nodes to the cluster, or lower --cpus-per-actor / --gpus-per-actor")
        if self.actors is None:
            return fit
        require(self.actors <= fit, f"--actors {self.actors} asked for, but the Ray cluster has {total}: room for {fit} "
                f"worker{'s' if fit != 1 else ''} of {per}", f"pass --actors {fit} or fewer (or leave it unset), "
                "lower --cpus-per-actor / --gpus-per-actor, or add nodes to the cluster")
        return self.actors


@dataclass(frozen=True)
class RunOptions:
    """Everything an :func:`headsim.analyze` call asks for besides the model and the corpus.

    Args:
        windows: how many windows to analyse (default: the whole corpus).
        out: run directory; ``None`` keeps everything in memory (no checkpoints).
        threshold: high-similarity threshold; top_k_columns: columns zeroed for Fig 3.
        checkpoint_every: windows between checkpoints (rounded up to whole batches); ``None``: after the
            batch that ends :data:`~headsim.runs.lifecycle.CHECKPOINT_SECONDS` after the last checkpoint
            (a fast GPU run would otherwise spend its time writing accumulators); a finished run writes
            its results instead.
        resume / overwrite: continue or replace a run already in ``out``; on ``resume`` every option
            left unset (``None``) takes the stored run's own setting (:func:`headsim.runs.spec.resume_defaults`).
        allow_fewer: when ``windows`` exceeds the corpus, analyse what exists (the windowing finds the
            end, so the corpus is not tokenised twice), else stop before starting (the corpus is counted
            first, as it is without ``windows``).
        sentence_splitter: sentence ids from ``"pysbd"``, ``"punkt"`` or ``"newline"``.
        workers: windowing processes of the local engine, 0 for a thread
            (:func:`headsim.runs.local.default_workers` when ``None``); results do not depend on it.
            (Under ``engine="ray"`` the old spelling of ``ray.actors``.)
        backend: the statistics backend (:mod:`headsim.stats.backends`): ``"auto"`` (the default: Triton
            kernels on CUDA where Triton runs, eager elsewhere), ``"eager"``, ``"compiled"``
            (``torch.compile``; the first batch pays the compilation) or ``"triton"``; the same counts up
            to threshold flips from float summation order. A named backend that cannot run is refused
            before the run; one that fails mid-run stops it (``--backend eager`` runs on), while under
            ``auto`` a failure falls back to eager, recorded in run.json (``statistics_backend``).
            ``None``: ``"auto"``, or on ``resume`` the backend the run asked for.
        progress: show a progress bar (or a callback ``(done, total)``).
        engine: ``"local"`` (this process, :mod:`headsim.runs.local`) or ``"ray"`` (a Ray cluster,
            :mod:`headsim.runs.ray`, with :attr:`ray`); the same results either way.
        shard: ``(i, n)`` or ``"i/n"``: analyse only the ``i``-th of ``n`` equal, disjoint parts (1-based) of
            the windows the run would analyse (:func:`headsim.runs.plan.shard_range`); the parts' runs
            merge (:func:`headsim.runs.merge.merge_runs`) into the statistics of one run over all of them.
        resolution: windows longer than this keep every position-pair statistic on this many position
            bins (docs/statistics.md), so memory does not grow with ``seq_len``; shorter ones per position.
            ``None``: the largest of 512, 256, … 16 whose statistics fit ``max_memory`` beside the model
            (:func:`headsim.memory.choose_resolution`; the Ray engine: 512); run.json records it.
        max_memory: the memory the run may take (bytes, or e.g. ``"3GB"``; default: half of the memory
            free now, the GPU's on CUDA): the batch size (unless given) and the block of attention rows
            are chosen within it; a budget that cannot hold one window stops the run before it starts.
            run.json records the budget (``memory``) and the peak memory of the run.
        revision, device_map, device_memory, offload_folder: as for :func:`~headsim.load_model`
            (``device_map`` spreads a model too big for one device over GPUs, CPU and disk; the
            statistics are the same wherever a layer lives; run.json records the placement).
        ray: the Ray engine's options (:class:`RayOptions`).
    """

    windows: int | None = None
    out: str | os.PathLike | None = None
    seq_len: int = 128
    threshold: float = 0.3
    top_k_columns: int = 3
    batch_size: int | None = None
    checkpoint_every: int | None = None
    resume: bool = False
    overwrite: bool = False
    allow_fewer: bool = True
    device: str | None = None
    dtype: str | None = None
    text_field: str = "text"
    text_column: str = "text"
    sentence_splitter: str = "pysbd"
    workers: int | None = None
    backend: str | None = None
    progress: bool | Callable[[int, int], None] = True
    engine: str = "local"
    shard: str | tuple[int, int] | None = None
    resolution: int | None = None
    max_memory: str | int | None = None
    revision: str | None = None
    device_map: str | None = None
    device_memory: str | dict | None = None
    offload_folder: str | os.PathLike | None = None
    ray: RayOptions = field(default_factory=RayOptions)

    #: options that load the model (:func:`~headsim.load_model`), the local engine's only
    LOADING = ("revision", "device_map", "device_memory", "offload_folder")

    @classmethod
    def from_arguments(cls, **given) -> "RunOptions":
        """The options of :func:`headsim.analyze`'s keyword arguments: these fields and :class:`RayOptions`'
        (also by their older names, :attr:`RayOptions.ALIASES`; ``workers`` under ``engine="ray"`` is
        ``actors``)."""
        own = {f.name for f in fields(cls)} - {"ray"}
        ray_names = {f.name for f in fields(RayOptions)}
        ray = {}
        for name in list(given):
            key = RayOptions.ALIASES.get(name, name)
            if key in ray_names:
                ray[key] = given.pop(name)
        unknown = sorted(set(given) - own)
        if unknown:
            raise TypeError(f"analyze() got an unexpected keyword argument {unknown[0]!r}")
        if given.get("engine", "local") == "ray" and given.get("workers") is not None:
            workers = given.pop("workers")
            require(ray.get("actors") in (None, workers), f"workers {workers!r} and actors {ray.get('actors')!r} both given",
                    "pass the Ray actors once, as actors (--actors)")
            ray["actors"] = workers
        return cls(**given, ray=RayOptions(**ray))

    def loading(self) -> dict:
        """The :func:`~headsim.load_model` arguments given (revision, placement)."""
        return {name: getattr(self, name) for name in self.LOADING if getattr(self, name) is not None}

    def check(self) -> "RunOptions":
        """Refuse bad options before anything is loaded or written; the options with the threshold as a
        float and the shard as ``(i, n)``."""
        require(self.engine in ENGINES, f"unknown engine {self.engine!r}", f"use one of {', '.join(ENGINES)}")
        threshold = check_threshold(self.threshold)
        require(isinstance(self.top_k_columns, int) and self.top_k_columns >= 0,
                f"top_k_columns {self.top_k_columns!r} must be ≥ 0", "pass a small non-negative integer (e.g. 3)")
        require(self.windows is None or (isinstance(self.windows, int) and self.windows >= 1),
                f"windows {self.windows!r} must be at least 1", "pass a positive number of windows")
        require(self.checkpoint_every is None or self.checkpoint_every >= 1,
                f"checkpoint_every {self.checkpoint_every} must be at least 1",
                "pass a positive number of windows, or leave it unset to checkpoint every 30 seconds")
        require(self.batch_size is None or (isinstance(self.batch_size, int) and self.batch_size >= 1),
                f"batch_size {self.batch_size!r} must be at least 1",
                "pass a positive batch size, or leave it unset for the automatic one")
        check_splitter(self.sentence_splitter)
        if self.backend is not None:
            check_name(self.backend)
        resolution = self.resolution
        require(resolution is None or (isinstance(resolution, int) and not isinstance(resolution, bool) and resolution >= 2),
                f"resolution {self.resolution!r} must be an integer of at least 2", "pass e.g. --resolution 512, or leave it unset to choose it from --max-memory")
        if self.engine == "local":
            if self.workers is not None:
                check_workers(self.workers)
            require(self.ray.actors is None, f"--actors {self.ray.actors} works with --engine ray only",
                    "pass --engine ray with it, or --workers N for local windowing processes")
        else:
            resolution = DEFAULT_RESOLUTION if resolution is None else resolution
            given = [f"--{k.replace('_', '-')}" for k in self.loading()]
            require(not given, f"{', '.join(given)} works with --engine local only",
                    "pass a local model directory to --engine ray (every worker loads it on its node)")
            require(self.seq_len <= resolution and self.max_memory is None, f"the {self.engine} engine analyses "
                    f"windows within the resolution ({resolution}) without a memory budget",
                    "run long windows and --max-memory with --engine local")
            self.ray.check()
        return replace(self, threshold=threshold, shard=check_shard(self.shard), resolution=resolution)



def check_shard(shard: str | tuple[int, int] | None) -> tuple[int, int] | None:
    """``"i/n"`` or ``(i, n)`` with ``1 <= i <= n`` as ``(i, n)``; a clear error otherwise."""
    if shard is None:
        return None
    fix = "pass --shard I/N: part I (from 1) of N, e.g. --shard 1/4 ... --shard 4/4"
    try:
        i, n = (int(x) for x in (shard.split("/") if isinstance(shard, str) else shard))
    except (TypeError, ValueError):
        raise HeadsimError(f"--shard {shard!r} is not I/N", fix) from None
    require(1 <= i <= n, f"--shard {i}/{n} is not a part of {n}", fix)
    return i, n
