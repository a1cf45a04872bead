"""patchq.compat.threeway: the three-way drift rules, on small parsed definitions (no release:
the rules are pure functions of the three definitions). Detection by meaning is
tests/plan/test_meaning.py's."""

from __future__ import annotations

import ast
import textwrap

import pytest

from patchq.compat import check, threeway
from patchq.vllmdist import sources
from testing.mini_series import reviewed_patch

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


def test_an_upstream_change_next_to_the_patch_is_decided_by_the_names_it_shares():
    theirs = BASE.replace("    lcm = max(sizes)\n", "    lcm = math.lcm(*sizes)\n")
    found = threeway.findings(side(BASE), side(OURS_INSERT), side(theirs, "2.0"))
    assert [f["rule"] for f in found] == ["names"]  # it reads sizes, which the patch rebinds right before
    assert found[0]["upstream"] == "vllm/m.py:6"  # the target's line, named
    assert found[0]["message"].startswith("`sizes`: upstream's change at vllm/m.py:6 (`lcm = math.lcm(*sizes)`) "
                                          "reads it at vllm/m.py:6; the patch's change writes it at "
                                          "1.0+patch vllm/m.py:6 (`sizes = sorted(sizes)`)")
    # adjacency alone is no finding (class 2 of issue 35): next to the patch, none of its names
    theirs = BASE.replace("    lcm = max(sizes)\n", "    log(groups)\n    lcm = max(sizes)\n")
    assert rules(BASE, OURS_INSERT, theirs) == []


def test_the_order_of_the_changes_decides_whether_a_value_reaches():
    ours = BASE.replace("    lcm = max(sizes)\n", "    lcm = max(sizes)\n    sizes = sorted(sizes)\n")
    # upstream reads sizes before the patch rebinds it: the patch's value never reaches it
    assert rules(BASE, ours, BASE.replace("    lcm = max(sizes)\n", "    check(sizes)\n    lcm = max(sizes)\n")) == []
    # upstream overwrites, after the patch, what the patch writes: the patch's value is lost
    ours = BASE.replace("    lcm = max(sizes)\n", "    lcm = max(sizes)\n    lcm = lcm * 2\n")
    assert rules(BASE, ours, BASE.replace("    log(sizes)\n", "    log(sizes)\n    lcm = 1\n")) == ["names"]
    # upstream removes a later write of it: the patch's value now reaches further, nothing it relies on changed
    base = BASE.replace("    log(sizes)\n", "    log(sizes)\n    lcm = 1\n")
    ours = base.replace("    lcm = max(sizes)\n", "    lcm = max(sizes)\n    lcm = lcm * 2\n")
    assert rules(base, ours, BASE) == []
    # in a loop around both, either order reaches
    loop = BASE.replace("    lcm = max(sizes)\n    log(sizes)\n", "    for g in groups:\n        lcm = max(sizes)\n"
                        "        log(sizes)\n")
    ours = loop.replace("        log(sizes)\n", "        log(sizes)\n        sizes = sizes[1:]\n")
    theirs = loop.replace("        lcm = max(sizes)\n", "        check(sizes)\n        lcm = max(sizes)\n")
    assert rules(loop, ours, theirs) == ["names"]


def test_upstream_changing_the_statement_the_patch_edits():
    ours = BASE.replace("    lcm = max(sizes)\n", "    lcm = max(sizes) * 2\n")
    theirs = BASE.replace("    lcm = max(sizes)\n", "    lcm = max(sizes) + 1\n")
    assert rules(BASE, ours, theirs) == ["same-statement"]
    inside = BASE.replace("    sizes = [g.size for g in groups]\n    lcm = max(sizes)\n",
                          "    sizes = [g.size for g in groups]\n    note(groups)\n    lcm = max(sizes)\n")
    both = BASE.replace("    sizes = [g.size for g in groups]\n    lcm = max(sizes)\n",
                        "    sizes, lcm = sized(groups)\n")
    assert "same-statement" in rules(BASE, both, inside)  # upstream inserted inside what the patch replaces


def test_a_parameter_appended_that_the_patch_never_reads_is_no_finding():
    theirs = BASE.replace("def resolve(cfg, groups):", "def resolve(cfg, groups, skip=False):")
    assert rules(BASE, OURS_INSERT, theirs) == []
    # a decorator added is no rebinding of the parameters (class 1e)
    assert rules(BASE, OURS_INSERT, "\n@functools.cache" + BASE) == []
    # one the patch reads, changed or moved, is
    ours = BASE.replace("    sizes = [g.size for g in groups]\n", "    sizes = [g.size for g in groups if g]\n")
    assert rules(BASE, ours, BASE.replace("def resolve(cfg, groups):", "def resolve(cfg, first, groups):")) \
        == ["signature"]
    assert rules(BASE, ours, BASE.replace("def resolve(cfg, groups):", "def resolve(cfg, groups=()):")) \
        == ["signature"]


def test_upstream_changing_the_condition_around_the_patch():
    base = BASE.replace("    log(sizes)\n", "    if cfg.verbose:\n        log(sizes)\n")
    ours = base.replace("        log(sizes)\n", "        log(sizes)\n        trace(cfg)\n")
    theirs = base.replace("    if cfg.verbose:\n", "    if cfg.verbose and groups:\n")
    assert rules(base, ours, theirs) == ["control"]


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
    theirs = BASE.replace("    log(sizes)\n", "    log(sizes)\n    cfg.seen = sizes\n")  # state the caller sees
    assert rules(BASE, ours, theirs) == ["skipped-path"]
    theirs = BASE.replace("    lcm = max(sizes)\n", "    lcm = max(sizes) + 1\n")  # what the function returns
    assert rules(BASE, ours, theirs) == ["skipped-path"]
    # a skipped change with no effect beyond its locals is no finding (class 2c): a log line, a check
    assert rules(BASE, ours, BASE.replace("    log(sizes)\n", "    log(sizes)\n    logger.info(sizes)\n")) == []
    assert rules(BASE, ours, BASE.replace("    log(sizes)\n", "    log(sizes)\n    check(sizes)\n")) == []


def test_an_inserted_return_upstream_adds_before_the_patch():
    theirs = BASE.replace("    sizes = [g.size for g in groups]\n",
                          "    if cfg.off:\n        return None\n    sizes = [g.size for g in groups]\n")
    assert rules(BASE, OURS_INSERT, theirs) == ["skipped-path"]


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
    # next to the patch's statement but touching nothing it reads: apart (data flow, not adjacency)
    assert module_rules(MODULE, ours, MODULE.replace("WIDTH = 8", "WIDTH = 9")) == []
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
    found = threeway.findings(base, base, side(theirs, "2.0"), None, exits=[exit_])
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
    assert exit_rules(resigned) == []  # a parameter appended that the wrapper never reads (data flow)
    defaulted = TO_PARAMS.replace("def to_params(self, default_sampling_params)",
                                  "def to_params(self, default_sampling_params=None)")
    assert exit_rules(defaulted) == ["signature", "names"]  # the header binds what the wrapper reads anew
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
    found = threeway.findings(base, base, theirs, None, exits=[exit_])
    assert [f["rule"] for f in found] == ["overlap", "names"]
    assert "next to a way out of def __init__" in found[0]["message"]


CLASS_BASE = '''
class Table:
    def __init__(self, n):
        self.slots = [0] * n

    def grow(self, i, v):
        self.slots.append(v)
        return self.slots[i]
'''


def test_state_coupled_through_another_method_of_the_class():
    """Issue 35 class 6: upstream adds an attribute sized from the one the patch grows, in
    __init__, and indexes it in the patched method: IndexError on the patch's inputs."""
    theirs_text = textwrap.dedent(CLASS_BASE).lstrip("\n") \
        .replace("        self.slots = [0] * n\n",
                 "        self.slots = [0] * n\n        self.seen = [0] * len(self.slots)\n") \
        .replace("        return self.slots[i]\n", "        self.seen[i] += 1\n        return self.slots[i]\n")
    ours_text = textwrap.dedent(CLASS_BASE).lstrip("\n").replace("        self.slots.append(v)\n",
                                                                  "        self.slots.extend([v, v])\n")
    base_text = textwrap.dedent(CLASS_BASE).lstrip("\n")
    sides = []
    for version, text in (("1.0", base_text), ("1.0", ours_text), ("2.0", theirs_text)):
        node = ast.parse(text).body[0].body[1]
        sides.append(threeway.Side(version, "vllm/t.py", node, text, threeway.flatten(node)))
    assert threeway.findings(*sides) == []  # the patched method alone shares no name with upstream's change
    attrs = {"self.slots"}
    sibs = threeway.siblings(base_text, theirs_text, "Table.grow", "vllm/t.py", attrs)
    assert [s.qualname for s in sibs] == ["Table.__init__"]
    found = threeway.findings(*sides, siblings=sibs)
    assert [f["rule"] for f in found] == ["coupled"]
    assert found[0]["message"] == ("`self.slots`: the patch's change writes it at 1.0+patch vllm/t.py:6 "
                                   "(`self.slots.extend([v, v])`); upstream's change to Table.__init__ reads it at "
                                   "vllm/t.py:4 (`self.seen = [0] * len(self.slots)`)")


def test_a_method_the_patch_calls_removed_and_an_attribute_assigned_anew():
    base_text = textwrap.dedent(CLASS_BASE).lstrip("\n") + "\n    def ready(self):\n        return True\n"
    ours_text = base_text.replace("        self.slots.append(v)\n",
                                  "        if not self.ready() or not self.slots:\n            return None\n"
                                  "        self.slots.append(v)\n")
    gone = base_text.replace("\n    def ready(self):\n        return True\n", "")
    sides = []
    for version, text in (("1.0", base_text), ("1.0", ours_text), ("2.0", gone)):
        node = ast.parse(text).body[0].body[1]
        sides.append(threeway.Side(version, "vllm/t.py", node, text, threeway.flatten(node)))
    sibs = threeway.siblings(base_text, gone, "Table.grow", "vllm/t.py", {"self.ready", "self.slots"})
    found = threeway.findings(*sides, siblings=sibs)
    assert [f["rule"] for f in found] == ["coupled"]
    assert found[0]["message"].startswith("`self.ready`: upstream removes Table.ready at vllm/t.py (1.0 vllm/t.py:9, "
                                          "removed) (`def ready(self): ...`)")
    # an attribute the patch reads, assigned another value in __init__: its own code's flow, no finding
    other = base_text.replace("        self.slots = [0] * n\n", "        self.slots = [1] * (n + 1)\n")
    sibs = threeway.siblings(base_text, other, "Table.grow", "vllm/t.py", {"self.ready", "self.slots"})
    sides[2] = threeway.Side("2.0", "vllm/t.py", ast.parse(other).body[0].body[1], other,
                             threeway.flatten(ast.parse(other).body[0].body[1]))
    assert threeway.findings(*sides[:2], sides[2], siblings=sibs) == []


# ---------------------------------------------------------------------------
# real cases: a one-patch series authored (fingerprinted) on one real release, checked on a later one


def _check(tmp_path, pid, module, anchors, authored, where, target):
    patch = reviewed_patch(tmp_path, pid, module, anchors, authored, where)
    (row,) = check.check(sources.release_source(target), [patch])
    return row


GROW_WORKSPACES = '''
from patchq import edits
from patchq.series import patch, variant


def grow(defn, found, ctx):
    (stmt,) = found
    return edits.insert_after(defn, stmt, edits.stmts(
        "if workspace_id >= len(self._current_workspaces):\\n"
        "    self._current_workspaces.extend([None] * (workspace_id + 1 - len(self._current_workspaces)))\\n"))


PATCH = patch(id="grow-workspaces", summary="grow the workspace slots on demand", why="lanes known at run time",
              applies=">=0.30", variants=[variant(">=0.30", edits={"ensure": grow})])
'''


@pytest.mark.wheel
def test_state_sized_in_init_from_what_the_patch_grows_blocks(tmp_path, monkeypatch):
    """Issue 35 class 6, on real code: the patch grows WorkspaceManager._current_workspaces
    in _ensure_workspace_size (reviewed on 0.33.0); 0.34.0 adds self._retained, sized from
    it in __init__ and indexed in the patched method: IndexError on the patch's inputs.
    check said applies-drifted ("no upstream hunk touches it")."""
    monkeypatch.setenv("PATCHQ_VERDICT_CACHE", "0")
    row = _check(tmp_path, "grow-workspaces", GROW_WORKSPACES, '''
        [anchors.ensure]
        module = "vllm.v1.worker.workspace"
        qualname = "WorkspaceManager._ensure_workspace_size"
        node = "workspace_id = self._get_workspace_id()"
        count = 1
        ''', "0.33.0", {"ensure": ("vllm/v1/worker/workspace.py", "WorkspaceManager._ensure_workspace_size")},
                 "0.34.0")
    assert (row.status, row.blocking) == ("review", True)
    (entry,) = row.threeway
    assert [f["rule"] for f in entry["findings"]] == ["coupled"]
    assert entry["findings"][0]["upstream"] == "vllm/v1/worker/workspace.py:82"
    assert "`self._current_workspaces`: the patch's change writes it" in row.reason
    assert "upstream's change to WorkspaceManager.__init__ reads it at vllm/v1/worker/workspace.py:82" in row.reason


PROMPT_PADDING = '''
from patchq import edits
from patchq.series import patch, variant


def pad(defn, found, ctx):
    (stmt,) = found
    return edits.insert_after(defn, stmt, edits.stmts("self.num_prompt_padding = 0"))


PATCH = patch(id="prompt-padding", summary="a padding count", why="a plugin pads prompts", applies=">=0.15",
              variants=[variant(">=0.15", edits={"init": pad})])
'''


@pytest.mark.wheel
def test_a_parameter_appended_and_a_statement_next_to_the_patch_are_apart(tmp_path, monkeypatch):
    """Issue 35 class 2, on real code: Request.__init__ on 0.16.0 gains a last parameter
    (reasoning_ended) and `self.is_prefill_chunk = False` right after the statement the patch
    inserts after (reviewed on 0.15.1); the patch's statement shares no name with either.
    check said review (overlap, signature, 'rebinds self')."""
    monkeypatch.setenv("PATCHQ_VERDICT_CACHE", "0")
    row = _check(tmp_path, "prompt-padding", PROMPT_PADDING, '''
        [anchors.init]
        module = "vllm.v1.request"
        qualname = "Request.__init__"
        node = "self.num_cached_tokens = -1"
        count = 1
        ''', "0.15.1", {"init": ("vllm/v1/request.py", "Request.__init__")}, "0.16.0")
    assert (row.status, row.blocking) == ("applies-drifted", False)
    (entry,) = row.threeway
    assert entry["findings"] == [] and "+    self.is_prefill_chunk = False" in entry["view"]


NPU_DEVICE = '''
from patchq import edits
from patchq.series import patch, variant


def npu(defn, found, ctx):
    (stmt,) = found
    return edits.insert_before(defn, stmt, edits.stmts(
        "if self.device_config.device_type == 'npu':\\n    self._init_npu_device()\\n    return\\n"))


def cap(defn, found, ctx):
    (stmt,) = found
    return edits.insert_after(defn, stmt, edits.stmts("torch.cuda.set_per_process_memory_fraction(0.95, self.device)"))


PATCH = patch(id="npu-device", summary="npu init", why="a plugin", applies=">=0.15",
              variants=[variant(">=0.15", edits={"device": npu, "cap": cap})])
'''


@pytest.mark.wheel
def test_an_added_decorator_and_a_skipped_log_line_are_apart(tmp_path, monkeypatch):
    """Issue 35 classes 1e and 2, on real code: Worker.init_device on 0.16.0 gains
    `@instrument(span_name="Init device")` and a log line (`logger.info_once`) after the
    patch's early return (reviewed on 0.15.1). check said review: the header 'rebinds self',
    and the return skips upstream's change."""
    monkeypatch.setenv("PATCHQ_VERDICT_CACHE", "0")
    row = _check(tmp_path, "npu-device", NPU_DEVICE, '''
        [anchors.device]
        module = "vllm.v1.worker.gpu_worker"
        qualname = "Worker.init_device"
        node = "if self.device_config.device_type == 'cuda': ..."
        count = 1

        [anchors.cap]
        module = "vllm.v1.worker.gpu_worker"
        qualname = "Worker.init_device"
        node = "self.device = torch.device(...)"
        count = 1
        ''', "0.15.1", {a: ("vllm/v1/worker/gpu_worker.py", "Worker.init_device") for a in ("device", "cap")},
                 "0.16.0")
    assert (row.status, row.blocking) == ("applies-drifted", False), row.reason
    (entry,) = row.threeway
    assert "+@instrument(span_name=\"Init device\")" in entry["view"]


ENV_BASE = '''
def setup(cfg):
    level = cfg.level
    configure(level)
'''


def test_a_key_both_changes_use_is_shared_state_no_name_shows():
    # the patch vendors a fix behind an environment variable; upstream merged it, reading
    # the same variable in other code: no name is shared, the key is (genesis PN362, 0.24.0)
    ours = ENV_BASE.replace("    configure(level)\n",
                            "    configure(level)\n    if os.environ.get('VLLM_FORCE_FIRST', '0') == '1':\n"
                            "        install_mine()\n")
    theirs = ENV_BASE.replace("    level = cfg.level\n",
                              "    level = cfg.level\n    if os.getenv('VLLM_FORCE_FIRST'):\n"
                              "        install_upstream()\n")
    found = threeway.findings(side(ENV_BASE, qual="setup"), side(ours, qual="setup"), side(theirs, "2.0", "setup"))
    assert [f["rule"] for f in found] == ["keys"] and found[0]["upstream"] == "vllm/m.py:3-4"
    assert found[0]["message"].startswith("`VLLM_FORCE_FIRST`: upstream's change at vllm/m.py:3-4")
    # a string that is no key (a message), or an attribute spelt as a string, is no finding
    for a, b in (("log('VLLM_FORCE_FIRST')", "warn('VLLM_FORCE_FIRST')"),
                 ("getattr(cfg, 'force_first')", "setattr(cfg, 'force_first', 1)")):
        mine = ENV_BASE.replace("    configure(level)\n", f"    configure(level)\n    {a}\n")
        upstream = ENV_BASE.replace("    level = cfg.level\n", f"    level = cfg.level\n    {b}\n")
        assert rules(ENV_BASE, mine, upstream) == [], (a, b)


def test_a_key_new_anywhere_in_the_target_package_is_a_finding(tmp_path):
    # upstream took the patch's environment variable up in another module (vllm/envs.py):
    # the key is nowhere in the base release and is in the target's package
    def tree(name: str, files: dict[str, str]):
        for rel, text in {"vllm/__init__.py": "", **files}.items():
            (tmp_path / name / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name / rel).write_text(text)
        return sources.source_tree(tmp_path / name, version="1.0" if name == "a" else "2.0")

    base = tree("a", {"vllm/envs.py": "X = 1\n"})
    target = tree("b", {"vllm/envs.py": "X = 1\n\nVLLM_FORCE_FIRST: bool = False\n"})
    assert threeway.new_key_sites(base, target, ["VLLM_FORCE_FIRST", "max_model_len"]) == \
        {"VLLM_FORCE_FIRST": "vllm/envs.py:3"}
    assert threeway.new_key_sites(target, target, ["VLLM_FORCE_FIRST"]) == {}  # there on both: not new
    ours = ENV_BASE.replace("    configure(level)\n",
                            "    configure(level)\n    if os.environ.get('VLLM_FORCE_FIRST'):\n"
                            "        install_mine()\n")
    theirs = ENV_BASE.replace("    configure(level)\n", "    configure(level, 2)\n")
    found = threeway.findings(side(ENV_BASE, qual="setup"), side(ours, qual="setup"), side(theirs, "2.0", "setup"),
                              new_keys={"VLLM_FORCE_FIRST": "vllm/envs.py:3"})
    assert [(f["rule"], f["upstream"]) for f in found] == [("keys", "vllm/envs.py:3")]
    assert "is new in vllm 2.0 at vllm/envs.py:3 and nowhere in reviewed vllm 1.0" in found[0]["message"]


def test_a_local_the_patch_sets_up_before_reading_it_is_not_reached_by_upstream():
    # the patch's block assigns `hf` and reads only its own value; upstream's new `hf = ...`
    # elsewhere in the definition never reaches those reads (vllm-ascend's dspark-post-init)
    base = "def post(self):\n    x = self.a\n    hf = self.cfg\n    return x\n"
    ours = base.replace("    return x\n", "    if self.dspark:\n        hf = self.draft.hf\n"
                                         "        if hf.tok is None:\n            hf.tok = hf.mask\n    return x\n")
    theirs = base.replace("    x = self.a\n", "    x = self.a\n    hf = self.other\n")
    assert [f["rule"] for f in threeway.findings(side(base, qual="post"), side(ours, qual="post"),
                                                 side(theirs, "2.0", "post"))] == []
    # a read before the patch's own assignment is reached: the finding stays
    read_first = base.replace("    return x\n", "    if hf.tok is None:\n        hf = self.draft.hf\n    return x\n")
    assert [f["rule"] for f in threeway.findings(side(base, qual="post"), side(read_first, qual="post"),
                                                 side(theirs, "2.0", "post"))] == ["names"]
