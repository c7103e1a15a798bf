"""The words of verify's answer probes (:class:`~servelab.core.verify.answers.AnswerProbes`):
what the probes answered against the references, and where a changed answer went wrong."""

from __future__ import annotations

from servelab.core.answers.transfer import AnswerSite
from servelab.core.verify.answers import AnswerProbes, ProbeOutcome
from servelab.core.verify.checks import CheckCode

__all__ = ["describe_probes"]

_C = CheckCode

_SITES = {
    AnswerSite.KV_TRANSFER: (
        "localized to the KV hand-off: in every changed answer the prefill's first token agrees "
        "and the decode's differ from its first on (the decode continues from KV that is not "
        "the prompt's; see the pair layer for a layout the two sides disagree on)"
    ),
    AnswerSite.LATER: "not the hand-off's signature: differences start later in the answers",
    AnswerSite.UNKNOWN: "where: unknown (no log-probabilities to read the positions from)",
}


def _refs(data: AnswerProbes) -> str:
    if data.references_id is None:
        return "no references"
    return f"references #{data.references_id} (state {(data.references_state or '?')[:12]})"


def _outcome(o: ProbeOutcome) -> str:
    why = [str(f) for f in o.failures]
    if o.recalled is False:
        why.append("pass key not recalled")
    if o.at is not None:
        why.append(f"differs from token {o.at}")
    shown = f"{o.text!r}" + (f" (reference {o.reference!r})" if o.reference else "")
    return f"probe {o.probe} ({o.kind}): {', '.join(why) or 'changed'}: {shown}"


def describe_probes(code: CheckCode, data: AnswerProbes) -> str:
    """One line: how many probes, against what, and (changed) which and where."""
    n = len(data.outcomes)
    head = f"{n} greedy probe(s) at C1 in {data.total_s:.2f} s"
    if code is _C.E2E_ANSWERS_SAME:
        return f"{head}: answers as {_refs(data)}"
    if code is _C.E2E_ANSWERS_REFERENCES_TAKEN:
        return f"{head}: no structural failure, keys recalled; stored as {_refs(data)}"
    if code is _C.E2E_ANSWERS_UNREFERENCED:
        return f"{head}: no structural failure, keys recalled; no ledger, so no references"
    wrong = [o for o in data.outcomes if o.wrong]
    site = f"; {_SITES[data.site]}" if data.site is not None else ""
    first = _outcome(wrong[0]) if wrong else ""
    return f"{head}: {len(wrong)} of {n} wrong against {_refs(data)}{site}; {first}"
