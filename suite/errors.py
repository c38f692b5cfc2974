"""The suite's failures, one type per kind (docs/DESIGN.md, "Names"): the suite is code the workflow
measures, not embprof, so its errors live in the suite.

The modules the workflow loads by path (``configs.py``, ``embedding_collection/family.py``:
:mod:`embprof.workflow.checkout`) import nothing of the suite by name, so ``family.py`` keeps its
own ``FamilyError``.
"""

from __future__ import annotations


class BaselineRequired(RuntimeError):
    """Correctness mode needs a backend beside dyn, and none can run this config."""


class ECConfigError(ValueError):
    """An EmbeddingCollection run's flags, or the torchrun world it finds, that cannot run; the
    message is shown as one line (``ConfigError`` in ``embedding_collection/config.py`` before
    issue 33, a name embprof's config failure has)."""
