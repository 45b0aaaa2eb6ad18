"""Stable per-call seeds, derived from a run's base seed.

Training (``pipeline``) and inference (``serving.inference``) sample with the same seed for
the same (step, stage, role, ...), so a replay reproduces a recorded rollout exactly.
"""

from __future__ import annotations

import hashlib


def derive_seed(base: int, *parts: object) -> int:
    """A stable 31-bit seed for one (step, stage, role, ...) from the run's base seed.

    >>> derive_seed(0, 3, 1, "generator") == derive_seed(0, 3, 1, "generator")
    True
    >>> derive_seed(0, 3, 1, "generator") == derive_seed(1, 3, 1, "generator")
    False
    """
    blob = "/".join(str(p) for p in (base, *parts)).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:4], "big") & 0x7FFFFFFF
