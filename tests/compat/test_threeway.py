"""patchq.compat.threeway: the three-way drift rules, on small parsed definitions (no release:
the rules are pure functions of the three definitions). Detection by meaning is
tests/plan/test_meaning.py's."""

from __future__ import annotations

import ast
import textwrap

from patchq.compat import threeway

BASE = '''
def resolve(cfg, groups):
    dcp = cfg.dcp
    if len(groups) <= 1:
        return cfg.block, cfg.block
    sizes = [g.size for g in groups]
    lcm = max(sizes)
    log(sizes)
    return lcm, min(sizes)
'''


def side(text: str, version: str = "1.0", qual: str = "resolve") -> threeway.Side:
    text = textwrap.dedent(text).lstrip("\n")
    node = ast.parse(text).body[0]
    return threeway.Side(version, "vllm/m.py", node, text, threeway.flatten(node))


def rules(base: str, ours: str, theirs: str, module_changes=None) -> list[str]:
    return [f["rule"] for f in threeway.findings(side(base), side(ours), side(theirs, "2.0"), module_changes)]


OURS_INSERT = BASE.replace("    sizes = [g.size for g in groups]\n",
                           "    sizes = [g.size for g in groups]\n    sizes = sorted(sizes)\n")


def test_apart_changes_have_no_findings():
    theirs = BASE.replace("    dcp = cfg.dcp\n", "    dcp = cfg.decode_cp\n")  # a name the patch does not use
    assert rules(BASE, OURS_INSERT, theirs) == []
    # upstream's new code reading what the patch rebinds is not apart
    assert rules(BASE, OURS_INSERT, BASE.replace("    log(sizes)\n", "    log('sizes', sizes)\n")) == ["names"]


def test_an_upstream_hunk_next_to_the_patch_is_an_overlap():
    theirs = BASE.replace("    lcm = max(sizes)\n", "    lcm = math.lcm(*sizes)\n")
    found = threeway.findings(side(BASE), side(OURS_INSERT), side(theirs, "2.0"))
    assert [f["rule"] for f in found] == ["overlap"]
    assert found[0]["upstream"] == "vllm/m.py:6"  # the target's line, named


def test_a_changed_signature_is_reported():
    theirs = BASE.replace("def resolve(cfg, groups):", "def resolve(cfg, groups, skip=False):")
    assert "signature" in rules(BASE, OURS_INSERT, theirs)


def test_upstream_rebinding_a_name_the_patch_reads():
    ours = BASE.replace("    lcm = max(sizes)\n", "    lcm = max(sizes)\n    lcm = lcm * cfg.dcp\n")
    theirs = BASE.replace("    dcp = cfg.dcp\n", "    dcp = cfg.dcp\n    cfg = cfg.resolved()\n")
    assert rules(BASE, ours, theirs) == ["names"]


def test_comprehension_variables_are_not_the_functions_names():
    theirs = BASE.replace("    lcm = max(sizes)\n    log(sizes)\n",
                          "    lcm = max(sizes)\n    log([g for g in sizes])\n")
    ours = BASE.replace("    dcp = cfg.dcp\n", "    dcp = cfg.dcp\n    first = [g.size for g in groups][:1]\n")
    assert rules(BASE, ours, theirs) == []


def test_an_inserted_return_skips_what_upstream_added_after_it():
    ours = BASE.replace("        return cfg.block, cfg.block\n",
                        "        return cfg.block, cfg.block\n    if dcp != 1:\n        return 0, 0\n")
    theirs = BASE.replace("    log(sizes)\n", "    log(sizes)\n    check(sizes)\n")
    assert rules(BASE, ours, theirs) == ["skipped-path"]


def test_module_names_the_added_code_reads():
    ours = BASE.replace("    log(sizes)\n", "    log(sizes)\n    helper(sizes)\n")
    theirs = BASE.replace("    return lcm, min(sizes)\n", "    return lcm, min(sizes)  # same\n")
    assert rules(BASE, ours, theirs, {"helper": "vllm/m.py:40"}) == ["module-name"]
    changed = threeway.module_changes("def helper(a):\n    pass\n", "def helper(a, b):\n    pass\n", "vllm/m.py",
                                      ["helper"])
    assert changed == {"helper": "vllm/m.py:1"}
    assert threeway.module_changes("def helper(a):\n    pass\n", "def helper(a):\n    return 1\n", "vllm/m.py",
                                   ["helper"]) == {}  # a body change is not the signature


def test_view_holds_both_diffs():
    theirs = side(BASE.replace("    lcm = max(sizes)\n", "    lcm = math.lcm(*sizes)\n"), "2.0")
    text = threeway.view(side(BASE), side(OURS_INSERT), theirs, "resolve")
    assert "== the patch's change (base -> ours)" in text and "+    sizes = sorted(sizes)" in text
    assert "== upstream's change (base -> theirs)" in text and "+    lcm = math.lcm(*sizes)" in text


# ---------------------------------------------------------------------------
def test_upstream_merging_the_same_name_in_another_form_is_not_apart():
    base = BASE.replace("    sizes = [g.size for g in groups]\n",
                        "    sizes = [g.size for g in groups]\n    stop = cfg.stop\n")
    ours = base.replace("    stop = cfg.stop\n",
                        "    stop = cfg.stop\n    stop = list(set(stop) | set(cfg.defaults))\n")
    theirs = base.replace("    log(sizes)\n",
                          "    log(sizes)\n    stop = list(dict.fromkeys([*stop, *cfg.defaults]))\n")
    assert rules(base, ours, theirs) == ["names"]  # the dict.fromkeys merge of the issue: blocking


def test_a_local_renamed_away_from_the_patch_keeps_the_meaning():
    ours = BASE.replace("    lcm = max(sizes)\n", "    lcm = max(sizes)\n    lcm = lcm * dcp\n")
    theirs = BASE.replace("    sizes = [g.size for g in groups]\n", "    per_group = [g.size for g in groups]\n") \
        .replace("    lcm = max(sizes)\n", "    lcm = max(per_group)\n")
    # the rename rewrites `lcm = max(...)` (which the patch's lcm reads) next to nothing else
    found = rules(BASE, ours, theirs)
    assert "names" not in found


MODULE = """import os

LIMIT = 4
WIDTH = 8


def helper(x):
    return x * LIMIT
"""


def module_rules(base: str, ours: str, theirs: str) -> list[str]:
    sides = [threeway._module_side(v, "vllm/m.py", t) for v, t in (("1.0", base), ("1.0", ours), ("2.0", theirs))]
    return [f["rule"] for f in threeway.findings(*sides)]


def test_a_module_level_anchor_is_compared_by_the_modules_own_statements():
    ours = MODULE.replace("LIMIT = 4\n", "LIMIT = 4\nLIMIT = max(LIMIT, 2)\n")
    # a definition's body, an import far from the patch: not the module's own statements near it
    theirs = MODULE.replace("return x * LIMIT", "return x + LIMIT").replace("WIDTH = 8\n", "WIDTH = 8\nimport re\n")
    assert module_rules(MODULE, ours, theirs) == []
    assert module_rules(MODULE, ours, MODULE.replace("WIDTH = 8", "WIDTH = 9")) == ["overlap"]
    assert module_rules(MODULE, ours, MODULE.replace("import os\n", "import os\nLIMIT = 1\n")) == ["names"]
    side = threeway._module_side("2.0", "vllm/m.py", MODULE)
    assert side.line == 1 and side.text == "import os\n\nLIMIT = 4\nWIDTH = 8\n\n\ndef helper(x):\n    ...\n"


#: prime-rl's harmony wrapper as a result wrapper of to_sampling_params: it reads the result's
#: stop_token_ids and the server defaults (issue 37 item 2)
TO_PARAMS = '''
def to_params(self, default_sampling_params):
    if self.beam:
        return beam(self)
    return SamplingParams.from_optional(n=self.n, stop_token_ids=self.stop_token_ids)
'''
MERGE = {"op": "result", "name": "sp", "new": "ids = default_sampling_params.get('stop_token_ids')\n"
                                              "if ids:\n    sp.stop_token_ids = list(ids)\nreturn sp\n"}


def exit_rules(theirs: str) -> list[str]:
    base = side(TO_PARAMS, qual="to_params")
    exit_ = threeway.Exit.of(MERGE, base.node)
    assert exit_ is not None
    found = threeway.findings(base, base, side(theirs, "2.0"), None, [exit_])
    return [f["rule"] for f in found]


def test_a_result_wrapper_survives_upstream_changing_what_is_returned():
    """Upstream passes another argument in the returned call and adds an early return
    (0.17.0 against 0.24.0): apart from a wrapper that reads only stop_token_ids."""
    assert exit_rules(TO_PARAMS.replace("(n=self.n,", "(n=self.n, seed=self.seed,").replace(
        "    if self.beam:", "    if self.cached:\n        return self.cached\n    if self.beam:")) == []


def test_a_result_wrapper_blocks_where_upstream_changes_what_it_reads():
    """0.25.0 merges the server's stop ids itself: the returned stop_token_ids changed."""
    merged = TO_PARAMS.replace("    return SamplingParams",
                               "    stop_token_ids = merge(self, default_sampling_params)\n    return SamplingParams")
    merged = merged.replace("stop_token_ids=self.stop_token_ids", "stop_token_ids=stop_token_ids")
    assert exit_rules(merged) == ["overlap", "names"]  # a statement right before the return, too
    # only the returned call's stop_token_ids argument changed: the wrapper reads that attribute
    assert exit_rules(TO_PARAMS.replace("stop_token_ids=self.stop_token_ids",
                                        "stop_token_ids=merge(self.stop_token_ids)")) == ["names"]
    resigned = TO_PARAMS.replace("def to_params(self, default_sampling_params)",
                                 "def to_params(self, default_sampling_params, extra)")
    assert exit_rules(resigned) == ["signature", "names"]  # the new header binds the parameters anew
    assert exit_rules(TO_PARAMS.replace("    if self.beam:", "    default_sampling_params = {}\n    if self.beam:")) \
        == ["names"]


def test_the_view_shows_a_result_wrapper_as_such():
    base = side(TO_PARAMS, qual="to_params")
    exit_ = threeway.Exit.of(MERGE, base.node)
    text = threeway.view(base, base, side(TO_PARAMS, "2.0"), "C.to_params", [exit_])
    assert "== the patch wraps the result of C.to_params: on every exit, `sp = <the value returned>`, then:\n" \
           "    ids = default_sampling_params.get('stop_token_ids')\n" in text


def test_upstream_code_next_to_a_way_out_is_next_to_the_result_wrapper():
    """prime-rl's fp32 router logits run after DeepseekV2MoE.__init__; 0.17.0 ends __init__ with
    `self.gate.set_out_dtype(...)`, which makes the wrapper's `if self.gate.out_dtype is None` dead:
    code upstream adds at the end runs right before the wrapper's and is not provably apart."""
    base = side("def __init__(self, config):\n    self.gate = Gate(config)\n    self.experts = build(config)\n",
                qual="__init__")
    theirs = side("def __init__(self, config):\n    self.gate = Gate(config)\n    self.experts = build(config)\n"
                  "    self.gate.set_out_dtype(config.dtype)\n", "2.0")
    exit_ = threeway.Exit.of({"op": "result", "name": "result",
                              "new": "if self.gate.out_dtype is None:\n    self.gate.set_out_dtype(fp32)\n"}, base.node)
    found = threeway.findings(base, base, theirs, None, [exit_])
    assert [f["rule"] for f in found] == ["overlap"] and "next to a way out of def __init__" in found[0]["message"]
