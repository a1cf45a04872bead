"""``check`` of a long series in forked shares (:mod:`patchq.compat.fanout`): the same rows as
one process, on a real release; the grouping and the "apart" rule on real series data."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from patchq import series
from patchq.compat import check, fanout
from patchq.compat.variants import effective_patches
from patchq.plan.anchors import fingerprint_ast

_PATCH = '''from patchq import edits
from patchq.series import patch, variant


def _insert(defn, found, ctx):
    return edits.prepend_to_block(defn, edits.stmts("_patchq_fan_{i} = {i}\\n"))


PATCH = patch(id="fan-{i}", summary="one statement at the top of {qual}", why="test", applies=">=0.1",
              variants=[variant("", edits={{"def": _insert}})]{relations})
'''


def spread_series(root: Path, tree: Path | None, n: int, relations: dict[int, str] | None = None,
                  modules: list[tuple[str, str, str]] | None = None) -> Path:
    """``root/series``: patch ``fan-i`` inserts one statement at the top of the first
    top-level function of the i-th module of ``tree`` (a release tree) that has one,
    fingerprint recorded on 0.23.0; or of ``modules`` [(module, qualname, fingerprint)]."""
    if modules is None:
        modules = []
        assert tree is not None
        for path in sorted((tree / "vllm").rglob("*.py")):
            body = ast.parse(path.read_text(encoding="utf-8")).body
            fn = next((s for s in body if isinstance(s, ast.FunctionDef) and s.body[0].lineno > s.lineno), None)
            if fn is not None:
                mod = path.relative_to(tree).with_suffix("").as_posix().replace("/", ".").removesuffix(".__init__")
                modules.append((mod, fn.name, fingerprint_ast(fn)))
            if len(modules) == n:
                break
    (root / "series").mkdir(parents=True)
    (root / "anchors").mkdir()
    for i, (mod, qual, fp) in enumerate(modules):
        rel = (relations or {}).get(i, "")
        (root / "series" / f"fan_{i}.py").write_text(_PATCH.format(i=i, qual=qual, relations=rel))
        (root / "anchors" / f"fan-{i}.toml").write_text(
            f'[anchors.def]\nmodule = "{mod}"\nqualname = "{qual}"\n\n[anchors.def.fingerprints]\n"0.23.0" = "{fp}"\n')
    ids = ", ".join(f'"fan-{i}"' for i in range(len(modules)))
    (root / "series" / "profiles.toml").write_text(f"[profiles.all]\npatches = [{ids}]\n")
    return root / "series"


def test_patches_that_share_a_module_or_a_relation_are_one_group(tmp_path):
    mods = [("vllm.a", "f", "0" * 16), ("vllm.b", "g", "0" * 16), ("vllm.a", "h", "0" * 16),
            ("vllm.c", "k", "0" * 16), ("vllm.d", "m", "0" * 16)]
    root = spread_series(tmp_path, None, 0, {4: ', requires=["fan-1"]'}, modules=mods)
    patches = series.load(root).patches_of("all")
    assert fanout.groups(patches) == [[0, 2], [1, 4], [3]]
    assert fanout.deal([[0, 2], [1, 4], [3]], 2) == [[0, 2, 3], [1, 4]]


def test_shares_are_apart_unless_one_reads_a_file_whose_definitions_another_changed():
    a = fanout.Share([0], changed={"vllm/a.py"}, accessed={"vllm/a.py", "vllm/x.py"})
    b = fanout.Share([1], changed={"vllm/b.py"}, accessed={"vllm/b.py", "vllm/a.py"})
    assert fanout.apart([a, b])  # b read a.py, whose definitions a's edits kept
    a.requalified = {"vllm/a.py"}  # a's patch added a definition to a.py: b's lookup there may differ
    assert not fanout.apart([a, b])
    c = fanout.Share([2], changed={"vllm/b.py"}, accessed={"vllm/b.py"})
    assert not fanout.apart([fanout.Share([0], changed={"vllm/a.py"}), b, c])  # two shares changed b.py


@pytest.mark.wheel
def test_a_long_series_checks_the_same_in_forked_shares_as_in_one_process(tmp_path, monkeypatch):
    from patchq.vllmdist import releases, sources

    try:
        root = spread_series(tmp_path, releases.release_tree("0.23.0"), 40)
        target = sources.release_source("0.26.0")
    except Exception as exc:  # offline without a cached wheel
        pytest.skip(f"vllm release not available: {exc}")
    monkeypatch.setenv("PATCHQ_VERDICT_CACHE", "0")
    patches = series.load(root).patches_of("all")
    planned, tried = effective_patches(patches, target.version)
    fanned = fanout.check(target, patches, planned, tried, None, 2)
    assert fanned is not None  # 40 modules, 40 groups: the shares were apart
    rows, shares = fanned
    assert sorted(i for s in shares for i in s.indices) == list(range(40))
    monkeypatch.setenv("PATCHQ_CHECK_WORKERS", "1")
    alone = check.check(sources.release_source("0.26.0"), patches)
    assert [r.to_dict() for r in rows] == [r.to_dict() for r in alone]
    statuses = {r.status for r in alone}
    assert {"applies", "applies-drifted", "review"} <= statuses  # 0.26.0 changed some: three-way verdicts ran
