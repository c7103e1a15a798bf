"""Every URL a renderer prints goes through :func:`servelab.report.text.url_text`, the one
redaction policy's URL (issue 38, nineteenth pass, item 1: ``bench``'s title and ``soak``'s
verdict line printed ``--url``'s password). Reads report/'s sources: an f-string that puts a
``...url`` value into text bare is a finding."""

from __future__ import annotations

import ast
from pathlib import Path

from servelab.report.text import url_text

REPORT = Path(__file__).resolve().parents[2] / "src" / "servelab" / "report"


def _named_url(node: ast.expr) -> bool:
    match node:
        case ast.Name(id=name) | ast.Attribute(attr=name):
            return name.lower().endswith("url")
        case ast.BoolOp(values=values):  # ``{label or url}``
            return any(_named_url(value) for value in values)
        case ast.IfExp(body=body, orelse=orelse):
            return _named_url(body) or _named_url(orelse)
    return False


def _bare_urls(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FormattedValue) and _named_url(node.value):
            found.append(f"{path.relative_to(REPORT)}:{node.lineno}: {ast.unparse(node.value)}")
    return found


def test_no_renderer_puts_a_url_into_text_bare() -> None:
    bare = [line for path in sorted(REPORT.rglob("*.py")) for line in _bare_urls(path)]
    assert bare == [], "route these through report.text.url_text:\n" + "\n".join(bare)


def test_the_finder_sees_a_bare_url() -> None:
    tree = ast.parse('f"bench {r.config.url} {url_text(r.url)} {router_url} {a or b.url}"')
    bare = [n for n in ast.walk(tree) if isinstance(n, ast.FormattedValue) and _named_url(n.value)]
    assert [ast.unparse(n.value) for n in bare] == ["r.config.url", "router_url", "a or b.url"]


def test_url_text_masks_a_password_and_a_secret_parameter_and_keeps_the_rest() -> None:
    assert (
        url_text("http://admin:Pz7Kq2Lm9Xw4A@127.0.0.1:8/v1") == "http://admin:***@127.0.0.1:8/v1"
    )
    assert url_text("http://h:1/x?token=abcdef123&n=2") == "http://h:1/x?token=***&n=2"
    assert url_text("http://127.0.0.1:30001") == "http://127.0.0.1:30001"
