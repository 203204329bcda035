"""``fks demo``: the embedded default -- its benchmark, its model and its command.

Modules and packages:

* :mod:`fks.demo.benchmark` -- builds the embedded demo benchmark from the packaged
  ``fks/data/demo_source/``;
* :mod:`fks.demo.run` -- the body of ``fks demo`` (:func:`~fks.demo.run.run_demo`);
* :mod:`fks.demo.model` -- the tiny demo model fks trains itself, offline and cached;
* :mod:`fks.demo.cli` -- the ``fks demo`` command.

The demo sits above every stage (it drives :func:`fks.pipeline.run_pipeline`), so no stage
imports it. Submodules are imported on use.
"""
