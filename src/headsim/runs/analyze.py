"""`headsim analyze`: stream a corpus through a model into the corpus statistics, resumably, on the
engine named (:data:`ENGINES`: this process, or a Ray cluster), the way xarray picks a backend by name.

:func:`analyze` builds the run's :class:`~headsim.runs.options.RunOptions` from its keyword arguments,
checks them (:meth:`~headsim.runs.options.RunOptions.check`), settles the output directory and a
resumed run's own settings (:func:`headsim.runs.plan.settle_output`), and hands the run to the engine.
Every engine plans with :func:`headsim.runs.plan.plan` and starts and finishes the run with
:mod:`headsim.runs.lifecycle`, so both write the same run directory for the same settings.
"""

from __future__ import annotations

from collections.abc import Callable

from ..corpus import Corpus
from ..model.load import LoadedModel
from .run import Run
from .local import analyze_local
from .options import RunOptions
from .plan import settle_output
from .ray import analyze_ray

Engine = Callable[[LoadedModel | str | None, Corpus | str, RunOptions], Run]

#: engine name → the function that runs ``(model, corpus, options)`` on it (the names are
#: :data:`headsim.runs.options.ENGINES`; Ray itself is imported only when a Ray run starts)
ENGINES: dict[str, Engine] = {"local": analyze_local, "ray": analyze_ray}


def analyze(model: LoadedModel | str | None | object = None, corpus: Corpus | str = "default", options: RunOptions | None = None,
            **arguments) -> Run:
    """Corpus statistics of every head (paper Figs 2, 3, 6–8, 10–13).

    Args:
        model: a loaded model, a name for :func:`~headsim.load_model` (a hub id is downloaded into
            the Hugging Face cache at ``revision``; run.json records the commit), or a model object it
            takes (transformers, PEFT, nnsight, TransformerLens; run.json records its provenance and the
            fingerprint of its weights).
        corpus: a :class:`~headsim.corpus.Corpus` or a spec for :func:`~headsim.corpus.load_corpus`
            (files, directories and URLs alike on every engine).
        options: the run's :class:`~headsim.runs.options.RunOptions`; or, as keyword ``arguments``,
            its fields (``windows``, ``out``, ``seq_len``, ``threshold``, ``resume``, ``engine`` …, documented
            there) and the Ray engine's (:class:`~headsim.runs.options.RayOptions`: ``actors``,
            ``cpus_per_actor``, ``gpus_per_actor``, ``share_windows``, ``address``).

    Returns the run (:class:`~headsim.runs.run.Run`, as :func:`~headsim.load_run` returns it, with its notebook
    display): ``meta`` (run.json), the statistics
    ``dataset`` and the ``heads`` and ``layers`` tables, and its ``path`` (``None`` in memory).
    """
    if options is None:
        options = RunOptions.from_arguments(**arguments)
    elif arguments:
        raise TypeError("analyze() takes options or keyword arguments, not both")
    options = settle_output(options.check()).check()  # a resumed run's own settings are checked too
    return ENGINES[options.engine](model, corpus, options)
