"""What runs inside a probe environment's interpreter (``python -I -S child.py IN.json OUT.json``).

Started by :mod:`patchq.probe.run` and :mod:`patchq.probe.env` in a fresh interpreter with
no site-packages (``-I -S``): ``sys.path`` is exactly ``IN["paths"]`` (each added with
:func:`site.addsitedir`, so their ``.pth`` files count), in that order, so nothing of the
environment patchq itself runs in (another vLLM, another transformers) leaks in. Standard
library only until the paths are set; the result is written as JSON to ``OUT.json`` (vLLM
prints to stdout freely).

Two modes (``IN["mode"]``):

``scan``
    import ``IN["modules"]`` with a *stand-in finder* last on ``sys.meta_path``: a top-level
    module nothing provides is replaced by a placeholder module, so one pass sees every
    missing module instead of the first. Only an import from vLLM's own files (``IN["site"]``)
    gets a stand-in: a dependency's import of a missing module fails as it would (its
    requirements are installed with it, what else it tries is its own optional path). For
    each it records who imported it. An import
    that is guarded (inside ``try:`` catching ``ImportError``, ``Exception``...: an
    optional dependency) gets no stand-in: it fails as it would, the code's own fallback
    runs, and it is recorded as optional. ``importlib.util.find_spec`` is answered truthfully (None), so
    ``if find_spec("x")`` checks keep their meaning. Output: ``{"missing": [{"name",
    "file", "line", "guarded"}], "errors": {module: line}}``.
``run``
    the import level, then the probe level, of one patched copy of vLLM:
    ``IN["imports"]`` [{``module``, ``patch``, ``sentinel``}]: each module imported, and
    its file must carry the patch's sentinel; ``IN["runtime_names"]`` {patch: [name]}:
    each name a patched module uses must resolve there (module globals or builtins);
    ``IN["cases"]`` {patch: [case name]}: the patch's cases, loaded from the series
    (``IN["series"]``: ``{"dir", "anchors"}``), each called in turn. Output: ``{"imports":
    {module: {"ok", "detail", "seconds", "missing"}}, "runtime_names": {patch: {name:
    why-or-null}}, "cases": {patch: [CASE]}, "missing": [module names a ModuleNotFoundError
    named]}`` with CASE = ``{"name", "result": "ok" | "fail" | "skip", "error", "frame",
    "case_frame", "observed", "seconds"}``.
"""

import json
import sys
import time

# the stand-in finder's record: name -> (file, line) of the first import of it, unguarded / guarded
_MISSING: dict = {}
_OPTIONAL: dict = {}
# the scan's vLLM copy: only imports from its files get stand-ins
_SITE = ""


def _set_paths(paths):
    import site

    for p in paths:
        site.addsitedir(p)


def _internal(code):
    name = code.co_filename
    return name.startswith("<frozen importlib") or name.endswith(("importlib/__init__.py", "importlib/util.py"))


def _importer_frame():
    """(file, line) of the code whose import reached the finder (importlib's own frames skipped)."""
    frame = sys._getframe(2)
    while frame is not None and _internal(frame.f_code):
        frame = frame.f_back
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else ("?", 0)


def _in_import():
    """True when the finder was asked by an import (``import x``, ``importlib.import_module``),
    not by ``importlib.util.find_spec`` (which imports a dotted name's parents itself)."""
    frame = sys._getframe(2)
    loading = False
    while frame is not None and _internal(frame.f_code):
        if frame.f_code.co_name == "find_spec" and frame.f_code.co_filename.endswith("importlib/util.py"):
            return False
        loading = loading or frame.f_code.co_name == "_find_and_load"
        frame = frame.f_back
    return loading


class _Placeholder:
    """Any attribute of a stand-in module: callable, subclassable, never a real value."""

    def __init__(self, *args, **kwargs):
        self._name = args[0] if args and isinstance(args[0], str) else "?"

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Placeholder(f"{self._name}.{attr}")

    def __call__(self, *args, **kwargs):
        return _Placeholder(f"{self._name}()")

    def __getitem__(self, key):
        return _Placeholder(f"{self._name}[]")

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False


def _stand_in_finder():
    import importlib.abc
    import importlib.machinery

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, fullname, path=None, target=None):
            top = fullname.split(".")[0]
            if "." in fullname:
                return (importlib.machinery.ModuleSpec(fullname, self, is_package=True)
                        if top in _MISSING else None)
            if not _in_import():
                return None
            where = _importer_frame()
            if guarded(*where):  # optional: the code's own fallback runs, as it would here
                _OPTIONAL.setdefault(top, where)
                return None
            if _SITE and not where[0].startswith(_SITE):  # a dependency's own import: it fails as it would
                return None
            _MISSING.setdefault(top, where)
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

        def create_module(self, spec):
            return None

        def exec_module(self, module):
            module.__path__ = []
            module.__getattr__ = lambda attr: _Placeholder(f"{module.__name__}.{attr}")  # type: ignore[attr-defined]

    return Finder()


_CATCHING = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def guarded(file, line, _cache={}):  # noqa: B006 - a per-process parse cache
    """True when the statement at ``file:line`` lies in the body of a ``try`` whose handlers
    catch an import failure (``ImportError``, ``ModuleNotFoundError``, ``Exception``,
    ``BaseException`` or a bare ``except``): the import is optional."""
    import ast

    if file not in _cache:
        try:
            with open(file, encoding="utf-8") as fh:
                tree = ast.parse(fh.read())
        except (OSError, SyntaxError, ValueError):
            tree = None
        _cache[file] = tree
    tree = _cache[file]
    if tree is None:
        return False

    def catches(handler):
        if handler.type is None:
            return True
        names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        return any((n.id if isinstance(n, ast.Name) else getattr(n, "attr", "")) in _CATCHING for n in names)

    def blocks(stmt, guard):
        """The statement lists inside ``stmt``, each with whether it is guarded."""
        if isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            yield stmt.body, guard or any(catches(h) for h in stmt.handlers)  # type: ignore[attr-defined]
            for h in stmt.handlers:  # type: ignore[attr-defined]
                yield h.body, guard
            yield stmt.orelse, guard  # type: ignore[attr-defined]
            yield stmt.finalbody, guard  # type: ignore[attr-defined]
            return
        for name in ("body", "orelse", "finalbody"):
            value = getattr(stmt, name, None)
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                yield value, guard
        for c in getattr(stmt, "cases", None) or []:  # match
            yield c.body, guard

    def visit(stmts, guard):
        for stmt in stmts:
            if not stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
                continue
            for inner, g in blocks(stmt, guard):
                if any(s.lineno <= line <= (s.end_lineno or s.lineno) for s in inner):
                    return visit(inner, g)
            return guard
        return guard

    return visit(tree.body, False)


def _first_line(exc):
    import traceback

    return traceback.format_exception_only(type(exc), exc)[-1].strip()


def _frames(exc, series_dir):
    """(the last frame, the last frame in the series directory) of ``exc``'s traceback, as
    ``file:line in function``."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    def text(f):
        return f"{f.filename}:{f.lineno} in {f.name}" if f else None
    last = frames[-1] if frames else None
    own = next((f for f in reversed(frames) if series_dir and f.filename.startswith(series_dir)), None)
    return text(last), text(own)


def scan(job):
    import importlib

    global _SITE
    _SITE = job.get("site", "")
    sys.meta_path.append(_stand_in_finder())
    errors = {}
    for module in job["modules"]:
        try:
            importlib.import_module(module)
        except BaseException as exc:  # a stand-in broke the import: the next round sees more
            errors[module] = _first_line(exc)[:500]
    missing = [{"name": name, "file": f, "line": ln, "guarded": False} for name, (f, ln) in sorted(_MISSING.items())]
    missing += [{"name": name, "file": f, "line": ln, "guarded": True} for name, (f, ln) in sorted(_OPTIONAL.items())
                if name not in _MISSING]
    return {"missing": missing, "errors": errors}


def _jsonable(value, limit=4000):
    try:
        text = json.dumps(value, default=repr, sort_keys=True)
    except (TypeError, ValueError):
        text = json.dumps(repr(value))
    return json.loads(text) if len(text) <= limit else text[:limit] + "…"


def _uses(module, name):
    """True when ``module``'s source names ``name`` (a ``Name`` node anywhere)."""
    import ast

    try:
        with open(module.__file__, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, TypeError, ValueError):
        return True
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(tree))


def run(job):
    import builtins
    import importlib

    out = {"imports": {}, "runtime_names": {}, "cases": {}, "missing": []}
    loaded = {}
    for item in job["imports"]:
        module, sentinel = item["module"], item["sentinel"]
        if module in out["imports"]:
            continue
        t0 = time.perf_counter()
        try:
            mod = importlib.import_module(module)
            with open(mod.__file__, encoding="utf-8") as fh:
                carries = sentinel in fh.read()
            loaded[module] = mod
            out["imports"][module] = {"ok": carries, "detail": f"imported {mod.__file__}" if carries else
                                      f"{mod.__file__} lacks the sentinel {sentinel!r}"}
        except BaseException as exc:
            entry = {"ok": False, "detail": _first_line(exc)[:1000]}
            if isinstance(exc, ModuleNotFoundError) and exc.name:
                entry["missing"] = exc.name
                out["missing"].append(exc.name.split(".")[0])
            out["imports"][module] = entry
        out["imports"][module]["seconds"] = round(time.perf_counter() - t0, 3)
    for patch_id, names in job.get("runtime_names", {}).items():
        mods = [loaded[i["module"]] for i in job["imports"] if i["patch"] == patch_id and i["module"] in loaded]
        found = {}
        for name in names:
            users = [m for m in mods if _uses(m, name)]
            bad = [m.__name__ for m in users if name not in vars(m) and not hasattr(builtins, name)]
            found[name] = (f"not bound in {', '.join(bad)} (neither a module global nor a builtin there): the "
                           f"patched code raises NameError when it reaches it") if bad else None
        out["runtime_names"][patch_id] = found
    if job.get("cases"):
        out["cases"] = run_cases(job, out)
    out["missing"] = sorted(set(out["missing"]))
    return out


def run_cases(job, out):
    """Each patch's cases in turn (``job["cases"]``: {patch: [names]})."""
    from patchq import series as series_mod

    where = job["series"]
    from pathlib import Path

    loaded = series_mod.Series(root=Path(where["dir"]), anchors_root=Path(where["anchors"]), _patches={},
                               profiles=series_mod.load_profiles(Path(where["dir"]) / "profiles.toml"))
    release = job["release"]
    results = {}
    for patch_id, names in job["cases"].items():
        rows = results[patch_id] = []
        try:
            patch = loaded.patch(patch_id)
        except BaseException as exc:
            rows.append({"name": "*", "result": "fail", "error": f"loading the patch: {_first_line(exc)}",
                         "frame": _frames(exc, where["dir"])[0], "case_frame": None, "observed": None, "seconds": 0})
            continue
        for case in patch.cases:
            if case.name not in names:
                continue
            if not case.is_for(release):
                rows.append({"name": case.name, "result": "skip", "error": None, "frame": None, "case_frame": None,
                             "observed": f"not for vllm {release} (releases {case.releases})", "seconds": 0})
                continue
            t0 = time.perf_counter()
            try:
                observed = case.fn()
                row = {"name": case.name, "result": "ok", "error": None, "frame": None, "case_frame": None,
                       "observed": _jsonable(observed)}
            except BaseException as exc:  # the case's failure is the record
                last, own = _frames(exc, where["dir"])
                row = {"name": case.name, "result": "fail", "error": _first_line(exc)[:2000], "frame": last,
                       "case_frame": own, "observed": None}
                if isinstance(exc, ModuleNotFoundError) and exc.name:
                    out["missing"].append(exc.name.split(".")[0])
            row["seconds"] = round(time.perf_counter() - t0, 3)
            rows.append(row)
    return results


def main(argv):
    with open(argv[1], encoding="utf-8") as fh:
        job = json.load(fh)
    _set_paths(job["paths"])
    result = scan(job) if job["mode"] == "scan" else run(job)
    result["python"] = sys.version.split()[0]
    try:
        import torch

        result["torch"] = torch.__version__
    except BaseException:  # noqa: S110 - torch is reported when it imports
        result["torch"] = None
    with open(argv[2], "w", encoding="utf-8") as fh:
        json.dump(result, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
