"""Every HTML page but the report's own: the figure steps' files (:mod:`.figure_pages`: a sunburst,
the latency plot, the bandwidth chart, each as a PNG and an HTML page, and the shared plotly.js),
and what the report's page shares with them (the page template and its macros, legend tables,
table cells).

Owns pages; :mod:`embprof.plots` owns figures (plotly objects, their static export). The import goes
one way: pages import plots, plots import no page (before issue 33 the figure steps' writer was
``embprof.plots.pages``, and the two packages imported each other). Kept apart from
:mod:`embprof.report` so that editing the report page re-renders no sunburst: the figure steps
depend on this package, not on the report's.
"""
