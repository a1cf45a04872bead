"""A small series and a small vLLM-shaped tree, written into a directory (for the unit tests)."""

from __future__ import annotations

import textwrap
from pathlib import Path

PATCH_PY = textwrap.dedent('''\
    """bump-default: a bigger Backend.DEFAULT (a small stand-in for backend-tiles)."""

    from patchq import edits
    from patchq.series import patch, variant


    def bump(backend, found, ctx):
        (stmt,) = found
        return edits.replace(backend, stmt, edits.stmts("DEFAULT = 101376"))


    PATCH = patch(
        id="bump-default",
        summary="Backend.DEFAULT becomes 101376",
        why="""GB10 gets   big tiles.""",
        applies=">=0.1",
        upstream=["https://example.invalid/pr/1"],
        variants=[
            variant(">=0.1,<0.3", edits={"default": bump}, note="class attribute"),
            variant(">=0.3", upstreamed="0.3 sets 101376 itself"),
        ],
    )
''')

ANCHORS_TOML = textwrap.dedent('''\
    [anchors.default]
    module = "vllm.ops.utils"
    qualname = "Backend"
    node = "DEFAULT = ..."
    count = 1

    [anchors.default.fingerprints]
    "0.1.0" = "FINGERPRINT"
''')

PROFILES_TOML = textwrap.dedent('''\
    [profiles.base]
    description = "the one patch"
    patches = ["bump-default"]

    [profiles.none]
    description = "nothing"
    patches = []
''')

UTILS_PY = textwrap.dedent('''\
    import os


    class Backend:
        """Shared memory per block."""

        # the default
        DEFAULT = 102400

        def get(self):
            return self.DEFAULT
''')


def write_series(root: Path, fingerprint: str = "0" * 16) -> Path:
    """``root/series`` (+ ``root/anchors``); returns the series directory."""
    series = root / "series"
    (root / "anchors").mkdir(parents=True)
    series.mkdir(parents=True)
    (series / "profiles.toml").write_text(PROFILES_TOML)
    (series / "bump_default.py").write_text(PATCH_PY)
    (root / "anchors" / "bump-default.toml").write_text(ANCHORS_TOML.replace("FINGERPRINT", fingerprint))
    return series


def write_tree(root: Path, *, moved: bool = False, utils: str = UTILS_PY) -> Path:
    """A vLLM-shaped source tree: ``vllm/__init__.py`` and ``vllm/ops/utils.py`` (or, with
    ``moved``, ``vllm/third_party/utils.py``) holding ``utils``."""
    (root / "vllm").mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text("")
    rel = Path("vllm/third_party/utils.py" if moved else "vllm/ops/utils.py")
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel.parent / "__init__.py").write_text("")
    (root / rel).write_text(utils)
    return root


def _record_row(root: Path, rel: str) -> str:
    import base64
    import hashlib

    digest = base64.urlsafe_b64encode(hashlib.sha256((root / rel).read_bytes()).digest()).rstrip(b"=").decode()
    return f"{rel},sha256={digest},{(root / rel).stat().st_size}"


def write_site(root: Path, version: str = "0.1.0", *, moved: bool = False, utils: str = UTILS_PY) -> Path:
    """A vLLM-shaped *installed* site-packages: :func:`write_tree` plus
    ``vllm-<version>.dist-info`` (METADATA, RECORD with real sha256 rows), so patchq's
    apply/revert/status/edit run on it without any release."""
    write_tree(root, moved=moved, utils=utils)
    di = root / f"vllm-{version}.dist-info"
    di.mkdir()
    (di / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n\n")
    rels = sorted(p.relative_to(root).as_posix() for p in (root / "vllm").rglob("*.py"))
    rels.append(f"vllm-{version}.dist-info/METADATA")
    (di / "RECORD").write_text("".join(_record_row(root, r) + "\n" for r in rels)
                               + f"vllm-{version}.dist-info/RECORD,,\n")
    return root


def write_release(cache_root: Path, version: str = "0.1.0", *, moved: bool = False, utils: str = UTILS_PY) -> Path:
    """The same tree as a release in a patchq cache at ``cache_root`` (what
    :func:`patchq.vllmdist.releases.release_tree` returns for ``version``; no download)."""
    import hashlib
    import json

    tree = write_site(cache_root / "releases" / version, version, moved=moved, utils=utils)
    record = (tree / f"vllm-{version}.dist-info" / "RECORD").read_bytes()
    (tree / ".patchq-verified.json").write_text(json.dumps({"record_sha256": hashlib.sha256(record).hexdigest()}))
    (tree / ".patchq-extracted-v1").write_text(json.dumps({"source": "test", "files": 0, "version": version}))
    return tree


def write_wheel(cache_root: Path, version: str = "0.1.0", *, holds: str | None = None) -> Path:
    """A whole wheel of the small tree in a patchq cache (``wheels/vllm-<version>-...whl`` and
    the ``.sha256`` note patchq records at download, so it is used without asking the
    index); ``holds``: the release its dist-info and METADATA say (another release's wheel
    under this name)."""
    import hashlib
    import tempfile
    import zipfile

    holds = holds or version
    with tempfile.TemporaryDirectory() as tmp:
        site = write_site(Path(tmp) / "site", holds)
        wheel = cache_root / "wheels" / f"vllm-{version}-cp38-abi3-manylinux_2_28_x86_64.whl"
        wheel.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel, "w") as zf:
            for path in sorted(site.rglob("*")):
                if path.is_file():
                    zf.write(path, path.relative_to(site).as_posix())
    (wheel.parent / f".{wheel.name}.sha256").write_text(hashlib.sha256(wheel.read_bytes()).hexdigest() + "\n")
    return wheel


def write_index(cache_root: Path, versions: list[str], package: str = "vllm") -> Path:
    """The release list of ``package`` as patchq caches it from PyPI (``index/<package>.json``,
    fresh), so that listing releases needs no network."""
    import json
    import time

    path = cache_root / "index" / f"{package}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"package": package, "fetched": time.time(), "source": "test", "versions": versions}))
    return path
