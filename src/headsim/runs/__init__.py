"""A run of the corpus statistics, from the options to the directory on disk.

Layers, each importing only those below it (docs/architecture.md):
:mod:`~headsim.runs.analyze` (picks the engine by name) → :mod:`~headsim.runs.local`,
:mod:`~headsim.runs.ray` (the engines) → :mod:`~headsim.runs.plan` (the one planning step),
:mod:`~headsim.runs.engine`, :mod:`~headsim.runs.progress`, :mod:`~headsim.runs.shares` →
:mod:`~headsim.runs.lifecycle` → :mod:`~headsim.runs.rundir` (writer), :mod:`~headsim.runs.run`
(reader), :mod:`~headsim.runs.lock`, :mod:`~headsim.runs.layout` → :mod:`~headsim.runs.spec`,
:mod:`~headsim.runs.options`. :mod:`~headsim.runs.merge` combines finished runs.
"""
