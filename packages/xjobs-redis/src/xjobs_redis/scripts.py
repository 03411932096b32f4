"""The package's Lua: one `.lua` file per operation in `lua/`, each loaded with `lib.lua` in front."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources

LIBRARY = "lib"

# The scripts a full server (at `maxmemory` under `noeviction`) must still run, so the runs under
# way keep their leases and settle, and their settles free memory: on Redis 7+ each is loaded
# with the `allow-oom` flag (a shebang line). Every other write (an enqueue, a claim) is refused
# while the server is full, before it writes anything (`XJOBS_BACKEND_ERROR`, naming maxmemory).
ALLOW_OOM = frozenset({"ack", "nack", "heartbeat", "slot_renew", "slot_release"})
OOM_SHEBANG = "#!lua flags=allow-oom\n"


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
def load_scripts(flags: bool = True) -> dict[str, LuaScript]:
    """Every operation's script, keyed by name (read once per process); `flags=False` leaves out
    the shebang of the `ALLOW_OOM` scripts, for a server older than Redis 7 that has no flags."""
    library = read_lua(LIBRARY)
    found: dict[str, LuaScript] = {}
    for name in lua_names():
        head = OOM_SHEBANG if flags and name in ALLOW_OOM else ""
        source = f"{head}{library}\n{read_lua(name)}"
        sha = hashlib.sha1(source.encode("utf-8"), usedforsecurity=False).hexdigest()
        found[name] = LuaScript(name=name, source=source, sha=sha)
    return found
