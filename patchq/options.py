"""The options of the commands with a standard-library front door, declared once.

``apply``, ``status`` and ``list`` are answered by :mod:`patchq.fastpath` when they can be,
and ``run`` is parsed without typer (it execs the command; a warm start costs about an
interpreter start). The typer app (:mod:`patchq.cli`) builds these commands' options from
the same :class:`Option` objects, so each name, metavar and help text is written once;
:func:`parse` is the standard-library reader of the declarations.

Standard library only, and no ``typing`` import: the fast path imports this module.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the fast path runs here)
if TYPE_CHECKING:
    from collections.abc import Sequence


class Option:
    """One declared option.

    Attributes:
        names: its spellings (``("--profile", "-p")``).
        dest: the key of its value in :func:`parse`'s result.
        help: the one-line help (``--help``, docs/cli.md).
        metavar: the value's placeholder (None for a flag).
        flag: takes no value (False unless given).
        many: repeatable; :func:`parse` collects the values in a list.
    """

    __slots__ = ("names", "dest", "help", "metavar", "flag", "many")

    def __init__(self, *names: str, dest: str, help: str, metavar: str | None = None,
                 flag: bool = False, many: bool = False) -> None:
        self.names = names
        self.dest = dest
        self.help = help
        self.metavar = metavar
        self.flag = flag
        self.many = many


# shared by most commands
SITE_PACKAGES = Option("--site-packages", dest="site_packages", metavar="DIR",
                       help="site-packages directory holding vllm")
PYTHON = Option("--python", dest="python", metavar="PATH", help="interpreter of another environment")
SERIES = Option("--series", dest="series", metavar="DIR",
                help="series directory or series repo (default: $PATCHQ_SERIES, else patchq.toml / "
                     "[tool.patchq] in or above the working directory, else an installed series)")
JSON = Option("--json", dest="json", flag=True, help="print the JSON document (schema: docs/json.md)")

# apply
APPLY_PROFILE = Option("--profile", "-p", dest="profile", metavar="NAME", help="profile to apply")
APPLY_PATCH = Option("--patch", dest="patch", metavar="ID", many=True,
                     help="apply this patch on top of the applied ones (repeatable)")
STRICT = Option("--strict", dest="strict", flag=True, help="fail on a patch found upstream instead of skipping it")
REPLACE = Option("--replace", dest="replace", flag=True,
                 help="replace the patches another series applied here (refused without it, exit 7)")

# status
RUNTIME = Option("--runtime", dest="runtime", flag=True,
                 help="the patches live in running `patchq run` processes, per pid")

# run
RUN_PROFILE = Option("--profile", "-p", dest="profile", metavar="NAME", help="profile to make live at import time")
PRINT_ENV = Option("--print-env", dest="print_env", flag=True,
                   help="print the environment as export lines; run nothing")

#: The options of each command with a standard-library front door.
COMMANDS: dict[str, tuple[Option, ...]] = {
    "apply": (APPLY_PROFILE, APPLY_PATCH, SITE_PACKAGES, PYTHON, SERIES, STRICT, REPLACE, JSON),
    "status": (SITE_PACKAGES, PYTHON, SERIES, RUNTIME, JSON),
    "list": (SERIES, JSON),
    "run": (RUN_PROFILE, SITE_PACKAGES, PYTHON, SERIES, PRINT_ENV, JSON),
}


class Unparsed(Exception):
    """An argument :func:`parse` does not take.

    Attributes:
        arg: the argument (the option's name as given, for a missing or empty value).
        why: ``unknown``, ``no-value`` or ``empty``.
    """

    def __init__(self, arg: str, why: str) -> None:
        self.arg = arg
        self.why = why
        super().__init__(self.message)

    @property
    def message(self) -> str:
        """One line: ``unknown option X``, ``X needs a value``, ``X must not be empty``."""
        if self.why == "unknown":
            return f"unknown option {self.arg}"
        return f"{self.arg} needs a value" if self.why == "no-value" else f"{self.arg} must not be empty"


def parse(argv: Sequence[str], declared: Sequence[Option], command: bool = False) -> tuple[dict, list[str]]:
    """Read ``argv`` against the ``declared`` options.

    A value is given as ``--name VALUE`` or ``--name=VALUE`` and must not be blank; a flag
    takes no value. With ``command``, the first argument that is not an option, or
    everything after ``--``, starts the command (``run``'s); without it any such argument
    is refused.

    Returns:
        ({dest: value} for the options given, every flag's dest included (False unless
        given), a repeatable option's values in a list; the command's arguments).
    Raises:
        Unparsed: an unknown option or argument, a missing or blank value.
    """
    names = {name: o for o in declared for name in o.names}
    values: dict = {o.dest: False for o in declared if o.flag}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if command and arg == "--":
            return values, list(argv[i + 1:])
        key, eq, value = arg.partition("=")
        option = names.get(key)
        if option is not None and not option.flag:
            if not eq:
                if i + 1 >= len(argv):
                    raise Unparsed(arg, "no-value")
                i += 1
                value = argv[i]
            if not value.strip():
                raise Unparsed(key, "empty")
            if option.many:
                values.setdefault(option.dest, []).append(value)
            else:
                values[option.dest] = value
        elif option is not None and not eq:
            values[option.dest] = True
        elif command and not arg.startswith("-"):
            return values, list(argv[i:])
        else:
            raise Unparsed(arg, "unknown")
        i += 1
    return values, []
