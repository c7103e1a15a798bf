"""The fuzz tier's settings: a fixed number of examples per property and no per-example deadline
(a loaded machine must not turn a slow example into a failure), no example database written into
the working tree. ``SERVELAB_FUZZ_EXAMPLES`` raises the count for a longer hunt."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "servelab",
    max_examples=int(os.environ.get("SERVELAB_FUZZ_EXAMPLES", "60")),
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.load_profile("servelab")
