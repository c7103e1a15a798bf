"""The pair layer's fields as checks keep them (issue 38's seventh pass): compared on what the
engines reported, each side then kept with a token in it masked (pure)."""

from __future__ import annotations

from servelab.core.knobs.serverinfo import EngineReport
from servelab.core.verify.pair import FieldVerdict, pair_fields, pair_values

P, D = "ghp_PPPPplanted0123456789abcdef", "ghp_DDDDplanted0123456789abcdef"


def _model(prefill: str, decode: str) -> tuple[FieldVerdict, str | None, str | None]:
    p = pair_values("sglang", EngineReport({"served_model_name": prefill}))
    d = pair_values("sglang", EngineReport({"served_model_name": decode}))
    model = next(f for f in pair_fields("sglang", p, d) if f.name == "model")
    return model.verdict, model.prefill.value, model.decode.value


def test_two_names_that_differ_only_in_a_token_are_a_mismatch_shown_masked() -> None:
    assert _model(f"m {P}", f"m {D}") == (FieldVerdict.MISMATCH, "m ***", "m ***")


def test_the_same_name_with_a_token_is_a_match_shown_masked() -> None:
    assert _model(f"m {P}", f"m {P}") == (FieldVerdict.MATCH, "m ***", "m ***")


def test_an_ordinary_name_is_kept_as_reported() -> None:
    assert _model("deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V3") == (
        FieldVerdict.MATCH, "deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V3")  # fmt: skip
