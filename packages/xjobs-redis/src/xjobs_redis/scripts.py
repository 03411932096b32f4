"""The package's Lua: one `.lua` file per operation in `lua/`, each loaded with the part of
`lib.lua` it uses in front."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

LIBRARY = "lib"

# The scripts a full server (at `maxmemory` under `noeviction`) must still run, so the runs under
# way keep their leases and settle, and their settles free memory: on Redis 7+ each is loaded
# with the `allow-oom` flag (a shebang line). Every other write (an enqueue, a claim) is refused
# while the server is full, before it writes anything (`XJOBS_BACKEND_ERROR`, naming maxmemory).
ALLOW_OOM = frozenset({"ack", "ack_many", "nack", "heartbeat", "slot_renew", "slot_release"})
OOM_SHEBANG = "#!lua flags=allow-oom\n"


# lib.lua's top-level statements each start a line: `local function f(`, `local A, B = `, or an
# `if` (which always runs); the lines up to the next such line belong to it.
STATEMENT = re.compile(r"^(?:local|if)\b")
DEFINES = re.compile(r"^local\s+(?:function\s+(\w+)|([\w\s,]+?)\s*=)")
WORD = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True, slots=True)
class LuaScript:
    """One operation's script as the server runs it: the library's part it uses, then the
    operation's file."""

    name: str
    source: str
    sha: str


def read_lua(name: str) -> str:
    """The text of `lua/<name>.lua`."""
    return resources.files("xjobs_redis").joinpath("lua", f"{name}.lua").read_text("utf-8")


def lua_names() -> list[str]:
    """Every operation's script name (the library excluded), sorted."""
    folder = resources.files("xjobs_redis").joinpath("lua")
    names = [p.name.removesuffix(".lua") for p in folder.iterdir() if p.name.endswith(".lua")]
    return sorted(name for name in names if name != LIBRARY)


def library_statements(library: str) -> list[tuple[frozenset[str], str]]:
    """lib.lua as its top-level statements in order, each with the names it defines (none for
    the opening comment and the `if` that always runs)."""
    statements: list[tuple[frozenset[str], str]] = []
    names: frozenset[str] = frozenset()
    lines: list[str] = []
    for line in library.splitlines(keepends=True):
        if STATEMENT.match(line):
            statements.append((names, "".join(lines)))
            found = DEFINES.match(line)
            defined = (found.group(1) or found.group(2)) if found else ""
            names, lines = frozenset(WORD.findall(defined)), []
        lines.append(line)
    statements.append((names, "".join(lines)))
    return statements


def library_for(library: str, script: str) -> str:
    """The statements of `library` that `script` needs, in the library's order: every one that
    defines nothing, and each one defining a name that the script or a needed statement names.

    Running the whole library in front of every call costs each call its ~60 closures; a script
    carries only what it can call. A name is matched as a word in the text, so a needed
    statement is never left out (a word in a comment at worst keeps one in).
    """
    statements = library_statements(library)
    needed = [not names for names, _ in statements]
    wanted = set(WORD.findall(script))
    grew = True
    while grew:
        grew = False
        for i, (names, text) in enumerate(statements):
            if not needed[i] and names & wanted:
                needed[i] = grew = True
                wanted |= set(WORD.findall(text))
    return "".join(text for (_, text), keep in zip(statements, needed, strict=True) if keep)


@cache
def load_scripts(flags: bool = True) -> dict[str, LuaScript]:
    """Every operation's script, keyed by name (read once per process); `flags=False` leaves out
    the shebang of the `ALLOW_OOM` scripts, for a server older than Redis 7 that has no flags."""
    library = read_lua(LIBRARY)
    found: dict[str, LuaScript] = {}
    for name in lua_names():
        head = OOM_SHEBANG if flags and name in ALLOW_OOM else ""
        body = read_lua(name)
        source = f"{head}{library_for(library, body)}\n{body}"
        sha = hashlib.sha1(source.encode("utf-8"), usedforsecurity=False).hexdigest()
        found[name] = LuaScript(name=name, source=source, sha=sha)
    return found
