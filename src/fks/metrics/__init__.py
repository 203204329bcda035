"""The metrics stage: behavioural, internal and calibration metrics, and shared statistics.

Modules: :mod:`fks.metrics.behavior` (BCS, BES, behaviour classes; spec §4-6, §16.1),
:mod:`fks.metrics.stats` (agreement statistics), :mod:`fks.metrics.bootstrap`, and the
``fks metrics RUN [--part ...]`` command in :mod:`fks.metrics.cli`. Submodules are imported on
use, so importing this package is cheap.
"""
