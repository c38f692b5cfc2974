"""The range layouts the breakdown reads (docs/DESIGN.md, "Range layout": how NVTX ranges nest in a
trace, ``--layout default|any``) and the names they give backends and phases (no imports: the
command's help lists the layouts without loading the attribution). ``trace/layouts.py`` before
issue 33; "layout" in embprof means this alone (a results folder's files: ``ResultsPaths``)."""

LAYOUTS = ("default", "any")
BACKENDS = ("dyn", "trc", "nv")
PHASES = ("forward", "backward")
ANY_BACKEND = ANY_PHASE = "all"
