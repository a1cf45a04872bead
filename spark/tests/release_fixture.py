"""A synthetic next vLLM release, "0.33.1", built from the real 0.33.0 wheel, on a local index.

:func:`build_wheel` copies the real cached 0.33.0 wheel (``patchq.vllmdist.releases.wheel_path``;
its compressed members are carried over untouched by ``zip -d``), changes five modules (and adds one)
with the kind of drift a patch release brings, renames the ``.dist-info`` directory,
sets ``Version: 0.33.1`` in METADATA and rewrites RECORD (the real 0.33.0 lines for every
untouched member, fresh sha256/size lines for the rest). :func:`write_index` lays out a
PEP 503 simple index (``<root>/vllm/index.html`` with ``#sha256=`` fragments), served as a
directory (``file://``) or by :func:`serve` (a loopback ``http.server``).

The drift, one kind per patch of the Spark series (see ``DRIFT``):

* **fla-shmem, upstreamed verbatim**: FLA's ``Backend.DEFAULT`` becomes 101376 in
  ``vllm/third_party/flash_linear_attention/ops/utils.py``, the patch's own value.
* **unify-kv-page, a moved function and a renamed local**: ``unify_kv_cache_spec_page_size``
  leaves ``vllm/v1/core/kv_cache_planning.py`` for a new module
  ``vllm/v1/core/kv_cache_page_size.py`` (the old module re-imports it), and its local
  ``page_sizes`` becomes ``layer_page_sizes``, away from the patched lines.
* **int8-lmhead, a re-wrapped anchor statement**: the anchored ``return
  lm_head.quant_method.apply(...)`` in ``LogitsProcessor._apply_head`` is wrapped
  differently (same AST, different lines).
* **inc-hybrid-fp8, a conflict**: upstream rewrites the anchored
  ``self.pack_factor = Fraction(32, weight_bits)`` line of ``INCConfig.__init__``, the line
  the patch inserts its fields after.
* **prefix-align, a renamed local**: in ``resolve_kv_cache_block_sizes`` (``kv_cache_utils.py``)
  ``group_block_sizes`` becomes ``block_size_per_group``; the series already says the patch is
  upstreamed (since 0.28), and its upstream check must still find the fix.
"""

from __future__ import annotations

import ast
import base64
import csv
import functools
import hashlib
import html
import http.server
import io
import re
import shutil
import subprocess
import threading
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

BASE = "0.33.0"
NEXT = "0.33.1"

FLA = "vllm/third_party/flash_linear_attention/ops/utils.py"
PLANNING = "vllm/v1/core/kv_cache_planning.py"
PAGE_SIZE = "vllm/v1/core/kv_cache_page_size.py"
LOGITS = "vllm/model_executor/layers/logits_processor.py"
INC = "vllm/model_executor/layers/quantization/inc/inc.py"
UTILS = "vllm/v1/core/kv_cache_utils.py"

#: patch id -> (kind of drift, the verdict release-check must give)
#: patch -> (the drift, what `patchq upgrade --write` makes of it: tests/test_release_check.py's CARRIED)
DRIFT = {
    "fla-shmem": ("upstreamed verbatim", "an upstreamed variant from 0.33.1 on"),
    "unify-kv-page": ("moved function + renamed local", "rebased cleanly to its new module"),
    "prefix-align": ("renamed local (upstreamed since 0.28 in the series)", "nothing: the series says upstreamed"),
    "inc-hybrid-fp8": ("conflict", "a conflict file for a person"),
    "int8-lmhead": ("re-wrapped anchor statement", "nothing to merge: same fingerprint, it applies"),
}


def _sub_once(text: str, old: str, new: str, where: str) -> str:
    if text.count(old) != 1:
        raise AssertionError(f"{where}: expected exactly one {old!r} in vllm {BASE}, found {text.count(old)}")
    return text.replace(old, new)


def drift_fla(text: str) -> str:
    """Upstream lowers ``Backend.DEFAULT`` to the patch's own 101376."""
    return _sub_once(text, "    DEFAULT = 102400  # Default\n",
                     "    DEFAULT = 101376  # GB10 (sm121) reports 101376 bytes, as ADA\n", FLA)


def drift_logits(text: str) -> str:
    """Re-wrap the anchored return of ``_apply_head`` (same AST, other lines)."""
    return _sub_once(
        text,
        "            return lm_head.quant_method.apply(\n"
        "                lm_head, hidden_states, bias=embedding_bias\n"
        "            )\n",
        "            return lm_head.quant_method.apply(lm_head, hidden_states,\n"
        "                                              bias=embedding_bias)\n",
        LOGITS)


def drift_inc(text: str) -> str:
    """Rewrite the line the patch's fields are inserted after (a real conflict)."""
    return _sub_once(text, "        self.pack_factor = Fraction(32, weight_bits)\n",
                     "        self.pack_factor = Fraction(32, int(weight_bits))\n", INC)


def drift_utils(text: str) -> str:
    """Rename the local ``group_block_sizes`` of ``resolve_kv_cache_block_sizes`` (six uses)."""
    assert text.count("group_block_sizes") == 6, f"{UTILS}: six uses of group_block_sizes in vllm {BASE}"
    return re.sub(r"\bgroup_block_sizes\b", "block_size_per_group", text)


def drift_planning(text: str) -> tuple[str, str]:
    """Move ``unify_kv_cache_spec_page_size`` to a new module and rename its local ``page_sizes``.

    Returns:
        (the new ``kv_cache_planning.py``, the new ``kv_cache_page_size.py``).
    """
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "unify_kv_cache_spec_page_size")
    start = min([node.lineno] + [d.lineno for d in node.decorator_list])
    func = "".join(lines[start - 1:node.end_lineno])
    assert func.count("page_sizes") == 3, "the local page_sizes is used three times in 0.33.0"
    func = re.sub(r"\bpage_sizes\b", "layer_page_sizes", func)
    header = "".join("".join(lines[s.lineno - 1:s.end_lineno])
                     for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom)))
    new_module = ('"""Page-size unification of KV cache specs (split out of kv_cache_planning)."""\n\n'
                  + header + "\n\n" + func)
    planning = ("".join(lines[:start - 1])
                + "from vllm.v1.core.kv_cache_page_size import unify_kv_cache_spec_page_size  # noqa: E402,F401\n"
                + "".join(lines[node.end_lineno:]))
    return planning, new_module


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(base_wheel: Path, dest_dir: Path) -> Path:
    """Write ``vllm-0.33.1-<tags of the base>.whl`` into ``dest_dir`` (module docstring).

    Raises:
        AssertionError: the base wheel does not look like 0.33.0 (a drift edit found no target).
        subprocess.CalledProcessError: ``zip`` failed.
    """
    tags = base_wheel.name.split("-", 2)[2]
    if re.match(r"\d", tags):  # a build tag: vllm-X-2-cp38-...
        tags = tags.split("-", 1)[1]
    out = dest_dir / f"vllm-{NEXT}-{tags}"
    old_info, new_info = f"vllm-{BASE}.dist-info", f"vllm-{NEXT}.dist-info"
    with zipfile.ZipFile(base_wheel) as zf:
        read = lambda name: zf.read(name).decode("utf-8")  # noqa: E731
        planning, page_size = drift_planning(read(PLANNING))
        changed = {FLA: drift_fla(read(FLA)), LOGITS: drift_logits(read(LOGITS)), INC: drift_inc(read(INC)),
                   UTILS: drift_utils(read(UTILS)), PLANNING: planning, PAGE_SIZE: page_size}
        info = {n: zf.read(n) for n in zf.namelist() if n.startswith(old_info + "/")}
    metadata = re.sub(rb"(?m)^Version: .*$", f"Version: {NEXT}".encode(), info[f"{old_info}/METADATA"], count=1)
    new_files: dict[str, bytes] = {k: v.encode("utf-8") for k, v in changed.items()}
    for name, data in info.items():
        rel = name.split("/", 1)[1]
        if rel == "RECORD":
            continue
        new_files[f"{new_info}/{rel}"] = metadata if rel == "METADATA" else data
    rows = []
    for row in csv.reader(io.StringIO(info[f"{old_info}/RECORD"].decode("utf-8"))):
        if row and not row[0].startswith(old_info + "/") and row[0] not in new_files:
            rows.append(row)  # untouched member: the real 0.33.0 line still holds
    rows += [[name, _record_hash(data), str(len(data))] for name, data in sorted(new_files.items())]
    rows.append([f"{new_info}/RECORD", "", ""])
    record = io.StringIO()
    csv.writer(record, lineterminator="\n").writerows(rows)

    tmp = out.with_suffix(".tmp")
    shutil.copyfile(base_wheel, tmp)
    drop = [n for n in changed if n != PAGE_SIZE] + [f"{old_info}/*"]
    subprocess.run(["zip", "-q", "-d", str(tmp), *drop], check=True)
    with zipfile.ZipFile(tmp, "a", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in new_files.items():
            zf.writestr(name, data)
        zf.writestr(f"{new_info}/RECORD", record.getvalue())
    tmp.replace(out)
    return out


@functools.lru_cache(maxsize=None)
def file_sha256(path: Path) -> str:
    """Hex sha256 of a file (memoised per path within a process)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_index(root: Path, wheels: list[Path]) -> Path:
    """A PEP 503 simple index at ``root`` holding ``wheels`` (copied or hard-linked in).

    Returns:
        ``root`` (``root/vllm/index.html`` links each wheel with its ``#sha256=``).
    """
    proj = root / "vllm"
    proj.mkdir(parents=True, exist_ok=True)
    links = []
    for whl in wheels:
        dst = proj / whl.name
        if not dst.exists():
            try:
                dst.hardlink_to(whl)
            except OSError:
                shutil.copyfile(whl, dst)
        links.append(f'<a href="{html.escape(whl.name)}#sha256={file_sha256(dst)}">{html.escape(whl.name)}</a><br/>')
    (proj / "index.html").write_text("<!DOCTYPE html>\n<html><body>\n" + "\n".join(links) + "\n</body></html>\n")
    (root / "index.html").write_text('<!DOCTYPE html>\n<html><body><a href="vllm/">vllm</a></body></html>\n')
    return root


@contextmanager
def serve(root: Path) -> Iterator[str]:
    """Serve ``root`` on a loopback ``http.server`` for the duration; yields the index URL."""
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass
