"""patchq.plan.forward: an edit whose added statements the release already has in another
form is upstream there, by meaning (a one-patch series and source trees written here)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from patchq import series
from patchq.plan import engine
from patchq.vllmdist import sources
from testing.mini_series import mini_series

PATCH = '''
from patchq import edits
from patchq.series import patch, variant


def grow(defn, found, ctx):
    (stmt,) = found
    return edits.insert_after(defn, stmt, edits.stmts("total += n"))


PATCH = patch(id="grow-total", summary="grow", why="test", applies=">=0.1",
              variants=[variant(">=0.1", edits={"total": grow})])
'''

ANCHORS = '''
[anchors.total]
module = "vllm.m"
qualname = "grow"
node = "total = sum(...)"
count = 1
'''

MODULE = '''
def grow(sizes, n):
    total = sum(sizes)
    return total
'''


def _result(tmp_path: Path, module: str) -> engine.PatchResult:
    patch = series.load(mini_series(tmp_path / "repo", "grow-total", PATCH, ANCHORS)).patch("grow-total")
    tree = tmp_path / "tree"
    (tree / "vllm").mkdir(parents=True)
    (tree / "vllm" / "__init__.py").write_text("")
    (tree / "vllm" / "m.py").write_text(textwrap.dedent(module).lstrip())
    plan = engine.plan(sources.source_tree(tree, version="0.2.0"), [patch])
    return plan.results[0], plan.changes.get("grow-total") or []


def test_the_same_statement_in_another_form_is_upstream_by_meaning(tmp_path):
    result, changes = _result(tmp_path,
                              MODULE.replace("    return total\n", "    total = total + n\n    return total\n"))
    assert result.status == engine.UPSTREAMED
    (ch,) = changes
    assert ch.meaning and ch.meaning[-1] == "`total += n` as `total = total + n` (vllm/m.py:3)"


def test_a_likeness_is_not_upstream(tmp_path):
    result, changes = _result(tmp_path,
                              MODULE.replace("    return total\n", "    total = total + n + 1\n    return total\n"))
    assert result.status == engine.OK
    assert not any(ch.meaning for ch in changes)
