"""The metrics stage: behavioural, internal and calibration metrics, and shared statistics.

Modules and packages:

* :mod:`fks.metrics.behavior` -- BCS, BES, behaviour classes (spec §4-6, §16.1);
* :mod:`fks.metrics.internal` -- ISS, KTS and the §18 sanity checks (spec §7-11, §16.2-16.4, §18);
* :mod:`fks.metrics.calibration` -- calibration and uncertainty, with ``fks calibrate``;
* :mod:`fks.metrics.stats` -- agreement statistics, the bootstraps, paired comparison;
* :mod:`fks.metrics.cli` -- the ``fks metrics RUN [--part ...]`` command.

Submodules are imported on use, so importing this package is cheap.
"""
