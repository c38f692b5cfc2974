"""HTML pages of figures and their legend tables, shared by the figure steps and the report.

Kept apart from :mod:`embprof.report` so that editing the report page re-renders
no sunburst: the figure steps depend on this package, not on the report's.
"""
