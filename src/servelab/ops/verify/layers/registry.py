"""Every knob layer's reader, in the order their checks are listed within a verify layer.

A new layer (a container's environment, say) is one module in this folder defining a
:class:`~servelab.ops.verify.layers.reader.LayerReader` and one line here; its checks' data and
codes go in ``core/verify/`` and their words in ``report/verify.py`` (docs/architecture.md, "Knob
layers").
"""

from __future__ import annotations

from servelab.ops.verify.layers.engine import ENGINE
from servelab.ops.verify.layers.file import FILE
from servelab.ops.verify.layers.launch import LAUNCH
from servelab.ops.verify.layers.pair import PAIR
from servelab.ops.verify.layers.process import PROCESS
from servelab.ops.verify.layers.reader import LayerReader
from servelab.ops.verify.layers.reads import READS
from servelab.ops.verify.layers.unit import UNIT

__all__ = ["READERS"]

#: The registry: file -> service manager -> process -> engine (what it runs with, what it
#: reads) -> a router's launch settings -> the P/D pair.
READERS: tuple[LayerReader, ...] = (FILE, UNIT, PROCESS, ENGINE, READS, LAUNCH, PAIR)
