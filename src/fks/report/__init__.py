"""The report stage: statistics, tables, figures and the HTML report (spec §12-14, §17, §20).

Modules (imported on use, so importing this package is cheap):

* :mod:`fks.report.inputs` -- read a run directory's metric files (every stage optional);
* :mod:`fks.report.statistics` -- the relation-clustered bootstrap of one run
  (``RUN/metrics/bootstrap_intervals.json``), built on :mod:`fks.metrics.stats.clustered_bootstrap`;
* :mod:`fks.report.comparison` -- ``fks compare``: paired differences (§14.2);
* :mod:`fks.report.tables` -- §12/§13/§20 tables as CSV and Markdown;
* :mod:`fks.report.plots` -- matplotlib figures as base64 PNG data URIs;
* :mod:`fks.report.build` -- ``fks report``: everything above into one self-contained HTML.
"""
