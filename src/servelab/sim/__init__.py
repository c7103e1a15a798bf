"""The simulated SGLang-compatible PD engine.

Modules: ``profile`` (pure performance model), ``text`` (deterministic output, word tokenizer),
``protocol`` (request parsing, response rendering), ``faults`` (fault switches), ``settings``
(start-up configuration), ``metrics`` (Prometheus text), ``scheduler`` (the absolute
schedule, continuous-batching decode), ``prefillscheduler`` (prefill batches), ``bootstrap``
(KV-transfer rooms), ``worker`` (engine state), ``app`` (aiohttp workers), ``respond``
(a generation answered, for both engines), ``proxy`` (the faulty reverse proxy). Nothing is
imported here: importing ``servelab.sim`` has no side effects.
"""

__all__: list[str] = []
