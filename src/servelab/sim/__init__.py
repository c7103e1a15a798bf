"""The simulated SGLang-compatible PD engine.

Modules: ``profile`` (pure performance model), ``text`` (deterministic output, word tokenizer),
``protocol`` (request parsing, response rendering), ``faults`` (fault switches), ``settings``
(start-up configuration), ``metrics`` (Prometheus text), ``scheduler`` (prefill batches and
continuous-batching decode on an absolute schedule), ``bootstrap`` (KV-transfer rooms),
``worker`` (engine state), ``app`` (aiohttp workers), ``proxy`` (the faulty reverse proxy).
Nothing is imported here: importing ``servelab.sim`` has no side effects.
"""

__all__: list[str] = []
