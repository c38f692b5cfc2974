"""Per-op profiling of embedding tables: trace attribution, plots and the report.

The ``embprof`` command (:mod:`embprof.cli`) runs each step of the workflow;
:mod:`embprof.results` is the contract of the files between them.
"""

__version__ = "0.2.0"
