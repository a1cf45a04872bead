"""New series repos and new patches: the files ``patchq init`` and ``patchq new`` write.

Every write of ``series/`` and ``anchors/`` here goes through :func:`write_new` (never
overwrites) or :func:`add_to_profile` (a text edit of ``profiles.toml`` that keeps its
comments and layout), both atomic and verified (:mod:`patchq.authoring.repowrite`), or
staged in one of its transactions.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from patchq import tomlsafe
from patchq.errors import SeriesError, UsageError

if TYPE_CHECKING:
    from patchq.authoring.repowrite import Transaction


_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_PROFILE_RE = re.compile(r"^[A-Za-z0-9_-]+$")


def check_id(patch_id: str) -> None:
    """Raise UsageError unless ``patch_id`` is kebab-case."""
    if not _ID_RE.match(patch_id):
        raise UsageError(f"patch id {patch_id!r}: use kebab-case (a-z, 0-9, -)")


def check_profile(profile: str) -> None:
    """Raise UsageError unless ``profile`` is a valid profile name."""
    if not _PROFILE_RE.match(profile):
        raise UsageError(f"profile name {profile!r}: use letters, digits, - and _")


def write_new(path: Path, text: str, written: list[str], txn: Transaction | None = None) -> None:
    """Write ``text`` to a file that must not exist yet (atomically, verified:
    :mod:`patchq.authoring.repowrite`; staged in ``txn`` when given).

    Raises:
        UsageError: it exists. RepoWriteError: the environment refused the write.
    """
    from patchq.authoring import repowrite

    if os.path.lexists(path) or (txn is not None and txn.staged(path) is not None):
        raise UsageError(f"{path} exists; refusing to overwrite it")
    if txn is not None:
        txn.write(path, text)
    else:
        repowrite.write_file(path, text)
    written.append(str(path))


def _append_to_profile(text: str, profiles_toml: Path, profile: str, patch_id: str) -> str:
    """``text`` (profiles.toml) with ``patch_id`` appended to the existing
    ``[profiles.<profile>] patches`` array (or such a line added to the table).

    Raises:
        SeriesError: the table's header is not found as written.
    """
    head = re.search(rf"^\[profiles\.{re.escape(profile)}\]\s*$", text, re.M)
    if head is None:
        raise SeriesError(f"{profiles_toml}: cannot find the [profiles.{profile}] header to edit "
                          f"(add {patch_id!r} to it by hand)")
    nxt = re.search(r"^\[", text[head.end():], re.M)
    end = head.end() + (nxt.start() if nxt else len(text) - head.end())
    body = text[head.end():end]
    arr = re.search(r"^patches\s*=\s*\[(.*?)\]", body, re.M | re.S)
    if arr is None:
        body = body.rstrip("\n") + f'\npatches = ["{patch_id}"]\n' + ("\n" if nxt else "")
    else:
        body = body[:arr.start(1)] + _appended(arr.group(1), patch_id) + body[arr.end(1):]
    return text[:head.end()] + body + text[end:]


def _appended(inner: str, patch_id: str) -> str:
    """The inside of a TOML array of ids with ``patch_id`` appended, in its style (one id
    per line, or inline)."""
    stripped = inner.rstrip()
    if not stripped.strip():
        return f'"{patch_id}"'
    sep = "" if stripped.endswith(",") else ","
    if "\n" in inner:  # one id per line: keep that style
        indent = re.search(r"\n([ \t]*)\S", inner)
        pad = indent.group(1) if indent else "  "
        return f'{stripped}{sep}\n{pad}"{patch_id}",\n'
    return f'{stripped}{sep} "{patch_id}"'


def add_to_profile(profiles_toml: Path, profile: str, patch_id: str, description: str = "",
                   txn: Transaction | None = None) -> bool:
    """Append ``patch_id`` to ``[profiles.<profile>] patches`` (creating the profile at the
    end of the file). Comments and layout are kept. Returns False when it was already there.
    The file is rewritten atomically (:mod:`patchq.authoring.repowrite`), or staged in the
    :class:`~patchq.authoring.repowrite.Transaction` ``txn`` (and read from it).

    Raises:
        UsageError: a bad profile name. SeriesError: the file does not parse before or after.
        RepoWriteError: the environment refused the write.
    """
    if not _PROFILE_RE.match(profile):
        raise UsageError(f"profile name {profile!r}: use letters, digits, - and _")
    from patchq.authoring import repowrite

    raw = txn.staged(profiles_toml) if txn is not None else repowrite.read_regular(profiles_toml)
    if raw is None:
        raise SeriesError(f"{profiles_toml}: missing")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SeriesError(f"{profiles_toml}: not UTF-8 ({exc})") from None
    profiles = tomlsafe.loads(text, profiles_toml).get("profiles", {})
    table = profiles.get(profile) if isinstance(profiles, dict) else None
    if not isinstance(profiles, dict) or not isinstance(table, (dict, type(None))) or \
            not isinstance((table or {}).get("patches", []), list):
        raise SeriesError(f"{profiles_toml}: `profiles.{profile}` must be a [profiles.{profile}] table whose patches "
                          f"is an array of patch ids")
    if table is not None and patch_id in table.get("patches", []):
        return False
    if table is None:
        text = text.rstrip("\n") + (f'\n\n[profiles.{profile}]\ndescription = "{description or profile}"\n'
                                    f'patches = ["{patch_id}"]\n')
    else:
        text = _append_to_profile(text, profiles_toml, profile, patch_id)
    try:
        after = tomlsafe.loads(text, profiles_toml)
    except SeriesError as exc:  # pragma: no cover - a bug in the edit above
        raise SeriesError(f"{profiles_toml}: editing it would break it ({exc}); add {patch_id!r} by hand") from None
    assert patch_id in after["profiles"][profile]["patches"]
    if txn is not None:
        txn.write(profiles_toml, text)
    else:
        repowrite.write_file(profiles_toml, text)
    return True


# --------------------------------------------------------------------------- patchq new


def anchors_text(patch_id: str, anchors: dict[str, dict]) -> str:
    """``anchors/<id>.toml`` for anchor id -> {module, qualname, node?, count?, fingerprints?}."""
    from patchq.authoring.fingerprints import render

    return render(patch_id, {"anchors": anchors})


_NEW_MODULE = '''"""{patch_id}: {summary}

Anchor ``{anchor}``: {where}.
Write the change in ``{fn}`` with :mod:`patchq.edits` (``insert_after``, ``insert_before``,
``replace``, ``prepend_to_block``, ``append_members``, ...); it receives the anchored
definition (libcst), the statements the anchor's ``node`` pattern matched, and a context.
Then: ``patchq diff --profile {profile} --vllm X``, ``patchq test --regen --patch {patch_id}``,
``patchq check --profile {profile} --vllm X``. Its behaviour: ``{case_fn}`` below, run by
``patchq probe --patch {patch_id} --vllm X`` on CPU.
"""

from patchq import edits
from patchq.series import case, patch, patched_definition, variant

NEW_CODE = """
pass  # {patch_id}: replace with your change
"""


def {fn}(definition, found, ctx):
    """{doc}"""
{body}


{case}

PATCH = patch(
    id={patch_id!r},
    summary={summary!r},
    why="""Say why vLLM needs this, with links where upstream discusses it.""",
    applies={applies!r},
    variants=[
        variant({applies!r}, edits={{{anchor!r}: {fn}}}),
    ],
    cases=[{case_fn}],
)
'''

#: the case skeleton ``new``, ``import`` and ``record`` write next to a patch
CASE_SKELETON = '''@case()
def {case_fn}():
    """TODO: call the patched {qualname} with small CPU inputs and assert what the patch changes.

    As written it only proves that the patched definition imports and is live (``patchq
    probe``): a case earns the probe level by asserting behaviour (docs/authoring.md, "Cases").
    """
    target = patched_definition({module!r}, {qualname!r}, {patch_id!r})
    return {{"definition": repr(target)}}
'''


def case_skeleton(patch_id: str, module: str, qualname: str) -> tuple[str, str]:
    """(the name of the case function, its text) for a patch anchored at ``module``:``qualname``."""
    fn = patch_id.replace("-", "_") + "_is_live"
    return fn, CASE_SKELETON.format(case_fn=fn, qualname=qualname, module=module, patch_id=patch_id)


def new_patch_files(patch_id: str, module: str, qualname: str, node: str | None,
                    applies: str = ">=0.15", summary: str | None = None,
                    profile: str = "default") -> tuple[str, str]:
    """(series module text, anchors TOML text) of a scaffolded patch (see ``patchq new``)."""
    check_id(patch_id)
    anchor = qualname.split(".")[-1].lower().replace("_", "-") if node is None else "target"
    anchor = re.sub(r"[^a-z0-9-]+", "-", anchor).strip("-") or "target"
    fn = patch_id.replace("-", "_")
    summary = summary or f"TODO one line: what {patch_id} changes in {qualname}"
    if node is None:
        where = f"the definition ``{qualname}`` in ``{module}`` (hint)"
        body = ("    # the anchor is the whole definition: add to the start of its body\n"
                "    return edits.prepend_to_block(definition, edits.stmts(NEW_CODE))")
        doc = "Prepend NEW_CODE to the anchored definition's body."
    else:
        where = f"the statement ``{node.strip()}`` in ``{qualname}`` (``{module}``, hint)"
        body = ("    (stmt,) = found\n"
                "    return edits.insert_after(definition, stmt, edits.stmts(NEW_CODE))")
        doc = "Insert NEW_CODE right after the anchored statement."
    case_fn, case_text = case_skeleton(patch_id, module, qualname)
    text = _NEW_MODULE.format(patch_id=patch_id, summary=summary, anchor=anchor, where=where, fn=fn,
                              body=body, doc=doc, applies=applies, profile=profile, case=case_text,
                              case_fn=case_fn)
    table: dict = {"module": module, "qualname": qualname}
    if node is not None:
        table["node"] = node
    table["count"] = 1
    return text, anchors_text(patch_id, {anchor: table})


# --------------------------------------------------------------------------- patchq init

PATCHQ_TOML = """\
# patchq series repo: `patchq` run anywhere below this directory uses this series.
series = "series"     # profiles.toml and one <patch>.py per patch
anchors = "anchors"   # one <patch>.toml per patch: where its edits go, by structure
# expected output (patchq test): series/diffs/<patch>.expect.toml and series/diffs/<release>/<patch>.diff
"""

PROFILES_TOML = """\
# Profiles: ordered patch ids. `patchq apply --profile NAME` makes the environment carry
# exactly this list. `patchq new` / `patchq record` add patches to a profile (--profile).
# An optional [profiles.NAME.serve] table gives `patchq serve` its vllm serve flags:
#   args = ["--enforce-eager"]            (appended to `vllm serve MODEL ...`)
#   env = {VLLM_LOGGING_LEVEL = "${LOG_LEVEL:-INFO}"}   (${VAR:-default} expands from the environment)

[profiles.default]
description = "my patches"
patches = []

[profiles.example]
description = "the example patch written by patchq init"
patches = ["example-quiet-logger"]

[profiles.example.serve]
args = ["--enforce-eager"]
env = {VLLM_LOGGING_LEVEL = "${LOG_LEVEL:-INFO}"}
"""

EXAMPLE_MODULE = '''"""example-quiet-logger: an example patch (written by ``patchq init``); replace it.

vLLM's ``init_logger`` (``vllm/logger.py``) returns a logger for every module. This patch
inserts two statements right after ``logger = logging.getLogger(name)``: a logger named
``vllm.example.quiet`` is disabled. No vLLM module has that name, so it changes nothing;
it shows the shape of a patch: an anchor (``anchors/example-quiet-logger.toml``: module
hint, qualname, statement pattern), a transform written with :mod:`patchq.edits`, and a
variant keyed by a vLLM version range.
"""

from patchq import edits
from patchq.series import patch, variant

QUIET = """
if name == "vllm.example.quiet":  # example-quiet-logger
    logger.disabled = True
"""


def quiet_after_get_logger(init_logger, found, ctx):
    """Insert QUIET right after ``logger = logging.getLogger(name)``."""
    (get_logger,) = found
    return edits.insert_after(init_logger, get_logger, edits.stmts(QUIET))


PATCH = patch(
    id="example-quiet-logger",
    summary="example: disable the logger named vllm.example.quiet",
    why="""An example of a patch, written by patchq init. Replace it with your own.""",
    applies=">=0.15",
    variants=[
        variant(">=0.15", edits={"get-logger": quiet_after_get_logger}),
    ],
)
'''

#: init_logger's fingerprint (docstring dropped) is the same on every release 0.15.1 .. 0.33.0
_INIT_LOGGER_FP = "dc32b1a00eb7242b"
_EXAMPLE_VERIFIED = ("0.15.1", "0.16.0", "0.17.0", "0.17.1", "0.18.0", "0.18.1", "0.19.0", "0.19.1", "0.20.2",
                     "0.21.0", "0.22.0", "0.22.1", "0.23.0", "0.24.0", "0.25.0", "0.25.1", "0.26.0", "0.27.0",
                     "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0")
EXAMPLE_ANCHORS = {"get-logger": {"module": "vllm.logger", "qualname": "init_logger",
                                  "node": "logger = logging.getLogger(name)", "count": 1,
                                  "fingerprints": {v: _INIT_LOGGER_FP for v in _EXAMPLE_VERIFIED}}}

#: The release the example's expected output is recorded on (``patchq test`` checks it there).
EXAMPLE_RELEASE = "0.23.0"
#: The example's diff on vllm 0.23.0, as ``patchq test --regen --releases 0.23.0`` renders it
#: (series/diffs/0.23.0/example-quiet-logger.diff; sentinel hashes are compared masked).
EXAMPLE_DIFF = "\n".join((
    'diff --git a/vllm/logger.py b/vllm/logger.py',
    '--- a/vllm/logger.py',
    '+++ b/vllm/logger.py',
    '@@ -201,12 +201,15 @@',
    '         dictConfig(logging_config)',
    ' ',
    ' ',
    '+# patchq:example-quiet-logger:58bce1572b7f (applied by patchq; `patchq status` explains)',
    ' def init_logger(name: str) -> _VllmLogger:',
    '     """The main purpose of this function is to ensure that loggers are',
    '     retrieved in such a way that we can be sure the root vllm logger has',
    '     already been configured."""',
    ' ',
    '     logger = logging.getLogger(name)',
    '+    if name == "vllm.example.quiet":  # example-quiet-logger',
    '+        logger.disabled = True',
    ' ',
    '     for method_name, method in _METHODS_TO_PATCH.items():',
    '         setattr(logger, method_name, MethodType(method, logger))',
)) + "\n"

TEST_MODULE = '''"""Each patch of this series on each release of its expected output (patchq.testing).

Expected `patchq check` verdicts (series/diffs/<patch>.expect.toml) and each patch's diff
per release (series/diffs/<release>/<patch>.diff). Regenerate them: `patchq test --regen`
or `pytest --patchq-regen`.
"""

import pytest

from patchq import testing


@pytest.mark.parametrize("case", testing.cases(__file__), ids=testing.case_id)
def test_patch(case, patchq_regen):
    testing.assert_case(case, regen=patchq_regen)
'''

#: The pinned actions the generated workflow uses (the same commits as ci/github/ and action.yml).
CHECKOUT = "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683  # v4.2.2"

_WORKFLOW_HEAD = f"""\
# The series on every vLLM release in range: `patchq test` (verdicts and goldens per
# release), then the compatibility matrix (artifact and run summary), through patchq's
# reusable action (action.yml of the patchq repository, pinned to a full commit hash).
name: patchq
on:
  push:
  pull_request:
  schedule:
    - cron: "0 6 * * 1"   # weekly: new vLLM releases show up in the matrix
permissions:
  contents: read
concurrency:
  group: patchq-${{{{ github.ref }}}}
  cancel-in-progress: true
jobs:
  patchq:
    name: patchq test and matrix
    runs-on: ubuntu-latest
    timeout-minutes: 60
    steps:
      - uses: {CHECKOUT}
        with:
          persist-credentials: false
"""

_ACTION_WITH = """\
        with:
          releases: ">=0.23.0"       # the matrix's releases
          fail-on-blocking: "true"   # a blocking cell fails the run
          # probe: "0.34.0"          # also import each listed release on CPU and run the cases (patchq probe);
          #                          # one job per release: a job matrix, each with matrix: "false" (action.yml)
"""

#: Without ``--action``: the action is checked out from the repository variables
#: PATCHQ_REPOSITORY (owner/name of patchq) and PATCHQ_COMMIT (a full commit hash), which
#: the repository's settings hold; patchq is not on PyPI and has no fixed public home.
WORKFLOW = _WORKFLOW_HEAD + f"""\
      - name: the patchq to use
        env:
          PATCHQ_REPOSITORY: ${{{{ vars.PATCHQ_REPOSITORY }}}}
          PATCHQ_COMMIT: ${{{{ vars.PATCHQ_COMMIT }}}}
        run: |
          if [ -z "$PATCHQ_REPOSITORY" ] || ! [[ "$PATCHQ_COMMIT" =~ ^[0-9a-f]{{40}}$ ]]; then
            echo "::error::set the repository variables PATCHQ_REPOSITORY (owner/name of the patchq repository)" \\
                 "and PATCHQ_COMMIT (a full commit hash of it), or write the action's reference here:" \\
                 "patchq init --action OWNER/NAME@COMMIT"
            exit 1
          fi
      - uses: {CHECKOUT}
        with:
          repository: ${{{{ vars.PATCHQ_REPOSITORY }}}}
          ref: ${{{{ vars.PATCHQ_COMMIT }}}}
          path: .patchq-action
          persist-credentials: false
      # patchq's checkout, not this repository (the `$/` self syntax would name this one)
      - uses: ./.patchq-action  # zizmor: ignore[self-repository]
""" + _ACTION_WITH

_ACTION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+@[0-9a-f]{40}$")


def workflow(action: str | None = None) -> str:
    """The CI workflow ``patchq init`` writes: the reusable action pinned to ``action``
    (``OWNER/NAME@<40 hex>``), or without it, from the repository variables (:data:`WORKFLOW`).

    Raises:
        UsageError: ``action`` is not ``OWNER/NAME@`` a full commit hash.
    """
    if action is None:
        return WORKFLOW
    if not _ACTION_RE.match(action):
        raise UsageError(f"--action {action!r}: give OWNER/NAME@COMMIT, the commit as a full 40-hex hash "
                         f"(a tag or branch can move; zizmor calls that unpinned)")
    return _WORKFLOW_HEAD + f"      - uses: {action}  # patchq\n" + _ACTION_WITH


PRE_COMMIT = """\
# pre-commit (https://pre-commit.com) runs patchq's checks of this series before a commit.
# `repo: local` uses the patchq installed here; to pin one, use the patchq repository
# (its .pre-commit-hooks.yaml has the same hooks) with `rev:` a commit of it.
repos:
  - repo: local
    hooks:
      - id: patchq-test
        name: patchq test (verdicts and goldens per release)
        entry: patchq test
        language: system
        pass_filenames: false
        files: ^(patchq\\.toml|series/|anchors/)
"""

REPO_README = """\
# {name}: a patchq series

Runtime patches for vLLM, kept alive release after release by patchq. patchq is not
on PyPI: install it from its wheel (`pip install patchq-X.Y.Z-py3-none-any.whl`, built
from a patchq checkout with `pip wheel --no-deps -w dist CHECKOUT`) or from the checkout
itself (`pip install CHECKOUT`).

    patchq list                                   # profiles and patches (this series)
    patchq check --profile default --vllm 0.23.0  # what each patch would do on a release
    patchq apply --profile default                # patch the installed vLLM
    patchq new ID --at vllm.module:Qualname --node 'statement'   # scaffold a patch
    patchq edit ID --file vllm/x.py  # pristine working copy; then: patchq record ID
    patchq test && pytest                          # expected output per release (--regen rewrites it)
"""


def init_files(name: str, action: str | None = None) -> dict[str, str]:
    """relpath -> text of a new series repo (see ``patchq init``; ``action``: :func:`workflow`),
    the example patch's expected output on :data:`EXAMPLE_RELEASE` included."""
    from patchq.authoring.diffstore import render_verdicts
    from patchq.authoring.fingerprints import render

    return {
        "patchq.toml": PATCHQ_TOML,
        "series/profiles.toml": PROFILES_TOML,
        "series/example_quiet_logger.py": EXAMPLE_MODULE,
        "anchors/example-quiet-logger.toml": render("example-quiet-logger", {"anchors": EXAMPLE_ANCHORS}),
        # the example's expected output, so that `patchq test`, pytest and CI pass on a fresh repo
        "series/diffs/example-quiet-logger.expect.toml": render_verdicts("example-quiet-logger",
                                                                         {EXAMPLE_RELEASE: "applies"}),
        f"series/diffs/{EXAMPLE_RELEASE}/example-quiet-logger.diff": EXAMPLE_DIFF,
        "tests/test_patches.py": TEST_MODULE,
        ".github/workflows/patchq.yml": workflow(action),
        ".pre-commit-config.yaml": PRE_COMMIT,
        "README.md": REPO_README.format(name=name),
        ".gitignore": ".patchq-edit/\n.patchq-rebase/\n.patchq-upgrade/\n.patchq-txn/\nmatrix/\n__pycache__/\n",
    }
