"""The package's Lua: one `.lua` file per operation in `lua/`, each loaded with `lib.lua` in front."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources

LIBRARY = "lib"


@dataclass(frozen=True, slots=True)
class LuaScript:
    """One operation's script as the server runs it: the library, then the operation's file."""

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


@cache
def load_scripts() -> dict[str, LuaScript]:
    """Every operation's script, keyed by name (read once per process)."""
    library = read_lua(LIBRARY)
    found: dict[str, LuaScript] = {}
    for name in lua_names():
        source = f"{library}\n{read_lua(name)}"
        sha = hashlib.sha1(source.encode("utf-8"), usedforsecurity=False).hexdigest()
        found[name] = LuaScript(name=name, source=source, sha=sha)
    return found
