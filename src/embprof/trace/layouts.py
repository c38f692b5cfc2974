"""The range layouts the breakdown reads and the names they give backends and phases (no imports:
the command's help lists the layouts without loading the attribution)."""

LAYOUTS = ("default", "any")
BACKENDS = ("dyn", "trc", "nv")
PHASES = ("forward", "backward")
ANY_BACKEND = ANY_PHASE = "all"
