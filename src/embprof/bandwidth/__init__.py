"""Per-op achieved memory bandwidth against the device's peak.

``config/bandwidth.yaml`` says how many bytes each op must move
(:mod:`.table`, evaluated by the safe arithmetic of :mod:`.expr`);
:mod:`.achieved` divides them by the per-op CSV's time; :mod:`.peak` measures
or looks up the device's peak and caches it.
"""
