"""servelab: the operations lab for prefill/decode disaggregated LLM serving."""

from __future__ import annotations

from servelab.errors import ServelabError

__all__ = ["ServelabError", "__version__"]

__version__ = "0.1.0"
