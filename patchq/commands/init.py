"""``patchq init [DIR]`` and ``patchq new ID --at MODULE:QUALNAME [--node STATEMENT]``.

``patchq.init/1``: ``dir``, ``written`` [paths], ``series`` (as in ``list``).
``patchq.new/1``: ``patch``, ``anchor`` {``module``, ``qualname``, ``node``}, ``profile``,
``added_to_profile`` (false when it was there already), ``written`` [paths], ``series``.
Exit 0; 2 when a file exists (nothing is overwritten) or an argument is malformed.
"""

from __future__ import annotations

from pathlib import Path

from patchq import discovery
from patchq.authoring import scaffold
from patchq.errors import EXIT_OK, UsageError
from patchq.series import Series, module_file

INIT_SCHEMA = "patchq.init/1"
NEW_SCHEMA = "patchq.new/1"


def init(directory: str | None) -> tuple[dict, int]:
    """Write a new series repo in ``directory`` (default: the working directory).

    Raises:
        UsageError: one of its files exists already (nothing is written).
    """
    root = Path(directory or ".").resolve()
    files = scaffold.init_files(root.name)
    clash = [rel for rel in files if (root / rel).exists()]
    if clash:
        raise UsageError(f"{root} already has {', '.join(clash)}; nothing written (init writes a new series repo)")
    from patchq.authoring import repowrite

    written: list[str] = []
    with repowrite.Transaction(root, "patchq init") as txn:  # every file, or none
        for rel, text in files.items():
            scaffold.write_new(root / rel, text, written, txn)
    loc = discovery.find_config(root)
    assert loc is not None
    doc = {"schema": INIT_SCHEMA, "dir": str(root), "written": written,
           "series": discovery.from_config(*loc).as_json()}
    return doc, EXIT_OK


def render_init(doc: dict) -> str:
    """What was written and what to do next."""
    lines = [f"initialized a patchq series repo in {doc['dir']}:"]
    lines += [f"  wrote {w}" for w in doc["written"]]
    lines += ["next (in that directory):",
              "  patchq check --profile example --vllm 0.23.0     # the example patch on a release",
              "  patchq new ID --at vllm.module:Qualname --node 'statement'   # or: patchq edit ID --file vllm/x.py",
              "  patchq test --regen && pytest -q                 # goldens per release"]
    return "\n".join(lines) + "\n"


def new(series: Series, patch_id: str, at: str, node: str | None, profile: str,
        applies: str, summary: str | None) -> tuple[dict, int]:
    """Scaffold ``series/<id>.py`` + ``anchors/<id>.toml`` and add the id to ``profile``.

    Raises:
        UsageError: a malformed ``--at`` or id, or the patch exists.
    """
    if ":" not in at:
        raise UsageError(f"--at {at!r}: give MODULE:QUALNAME (e.g. vllm.v1.core.kv_cache_utils:unify_kv_cache_spec_page_size)")
    module, qualname = at.split(":", 1)
    if not module.replace(".", "").replace("_", "").isalnum() or not qualname:
        raise UsageError(f"--at {at!r}: MODULE is a dotted module path, QUALNAME a (Class.)name")
    if node is not None:
        import ast

        try:
            ast.parse(node)
        except SyntaxError as exc:
            raise UsageError(f"--node {node!r} is not a Python statement: {exc.msg}") from None
    scaffold.check_id(patch_id)
    mod_path = module_file(series.root, patch_id)
    anchor_path = series.anchors_root / f"{patch_id}.toml"
    if mod_path.exists() or anchor_path.exists():
        raise UsageError(f"patch {patch_id} exists ({mod_path if mod_path.exists() else anchor_path})")
    text, anchors = scaffold.new_patch_files(patch_id, module, qualname, node, applies, summary, profile)
    from patchq.authoring import repowrite

    written: list[str] = []
    with repowrite.series_transaction(series, f"patchq new {patch_id}") as txn:  # the three files, or none
        scaffold.write_new(mod_path, text, written, txn)
        scaffold.write_new(anchor_path, anchors, written, txn)
        added = scaffold.add_to_profile(series.root / "profiles.toml", profile, patch_id, txn=txn)
    doc = {"schema": NEW_SCHEMA, "patch": patch_id, "anchor": {"module": module, "qualname": qualname, "node": node},
           "profile": profile, "added_to_profile": added, "written": written,
           "series": series.location.as_json() if series.location else None}
    return doc, EXIT_OK


def render_new(doc: dict) -> str:
    """What was written and what to do next."""
    lines = [f"new patch {doc['patch']} at {doc['anchor']['module']}:{doc['anchor']['qualname']}"
             + (f" (node {doc['anchor']['node']!r})" if doc["anchor"]["node"] else "")]
    lines += [f"  wrote {w}" for w in doc["written"]]
    lines.append(f"  profile {doc['profile']}: " + ("added" if doc["added_to_profile"] else "already there"))
    lines.append(f"next: write the change in {doc['written'][0]}, then "
                 f"`patchq diff --profile {doc['profile']} --vllm X` and `patchq test --regen --patch {doc['patch']}`")
    return "\n".join(lines) + "\n"
