"""Every code block and shell command of README.md and docs/**/*.md is run, or checked, here.

The rules, by kind of Markdown:

- ```python blocks run as scripts with the workspace's interpreter, in a temporary directory, and
  must exit 0. Each `postgresql://…`, `postgres://…` or `redis://…` in a string literal becomes a
  test server's URL (a fresh database, a fresh `xjobs_prefix`, dropped after), and a block that
  names `DATABASE_URL` gets that variable, set to the Postgres URL. An HTML comment right after a
  block, `<!-- output:` then one line per stdout line then `-->`, pins what it prints, in order
  (`…` stands for any text); `<!-- output (any order):` the same lines in any order.
- Shell blocks (```sh, ```bash, ```shell, ```console and unlabeled ```) hold one command per line
  (`# comments` and a `$ ` prompt are dropped; two `xjobs` commands on one line are two):
  - `xjobs …` (and `uv run xjobs …`, `python -m xjobs_cli …`: `uv run` is the workspace's
    environment, the one these tests run in): `xjobs VERB… --help` must succeed and list every
    `--flag` the line uses (all the docs' `--help`s are asked in one process, of the function the
    `xjobs` script runs). A line that is concrete (no placeholder: `…`, `[…]`, `a|b`, `<x>`, an
    upper-case metavariable such as `ID`, the docs' `myapp.main:app`), does not start a
    long-running process (`worker`, `scheduler`, `relay`, `web`) and is not in a synopsis (a
    block with a placeholder in any line) is then run, its URLs replaced as in Python blocks,
    and must exit 0.
  - `pip install …` installs from the package index, so it is not run: each xjobs distribution it
    names must be a workspace member with the extras it asks for (`tests/install` runs the
    README's install lines for real, in a fresh environment). Other names (`uv`) are not checked.
  - `nox …` (`uv run nox …`) runs these very tests, so it is not run: every session it names
    (`-s NAME`) must be in `nox --list`.
  - `pytest --pyargs xjobs.testing.parity …` is checked by collecting it (`--collect-only`)
    outside the repository, its backend placeholder (`NAME`, `mydb`) replaced by `memory`.
  - Any other line fails: give it a rule here, or mark its block (and label shown output ```text).
- A block that is the site's pymdownx.snippets include, a path (from the repository root) between
  two `--8<--` lines, stands for the file at that path: it is checked as if the file's text were
  written there, so an included example, examples/tutorial/*.py, runs like any block. (The one-line
  form, `--8<-- "path"`, parses as Python, and ruff's format of Markdown would rewrite it.)
- ```toml and ```json blocks must parse. ```text and other languages are not code: not checked.
- Inline code spans that are commands (`xjobs …`, `uv run …`, `pip install …`, `nox …`,
  `pytest …`) get the shell rules' checks but are never run: prose shortens commands.
- `<!-- not-run: reason -->` on the line before a block keeps it from running: a fragment that
  cannot run alone. Such marks stay rare (at most MAX_NOT_RUN in all the docs).
"""

from __future__ import annotations

import asyncio
import functools
import io
import itertools
import json
import os
import re
import secrets
import shlex
import subprocess
import sys
import tempfile
import tokenize
import tomllib
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
from redis.asyncio import Redis

from xjobs_pg.backend import asyncpg_dsn
from xjobs_pg.servers import ServerUnavailable, postgres_url, unavailable
from xjobs_redis.servers import ServerUnavailable as RedisUnavailable
from xjobs_redis.servers import redis_url
from xjobs_redis.testing import drop_prefix

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
MAX_NOT_RUN = 3
TIMEOUT_S = 120
SHELL = {"", "sh", "bash", "shell", "console"}
LONG_RUNNING = {"worker", "scheduler", "relay", "web"}
# the docs' stand-ins for the reader's own names: an app module and a driver
STAND_INS = ("myapp",)
BACKEND_STAND_INS = {"NAME", "mydb"}

FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
NOT_RUN = re.compile(r"^\s*<!--\s*not-run:\s*(?P<reason>.*?)\s*-->\s*$")
OUTPUT = re.compile(r"^\s*<!--\s*output(?P<any> \(any order\))?:\s*$")
MARK = re.compile(r"<!--\s*(not-run|output)\b")
SNIPPET = re.compile(r"^--8<--\n(?P<path>[^\n]+)\n--8<--\n$")
INLINE = re.compile(r"(?<!`)`(?P<code>[^`]+)`(?!`)")
COMMAND_SPAN = re.compile(r"^(xjobs|uv run|uv pip install|pip install|nox|pytest|python -m) ")
URL = re.compile(r"\b(?P<scheme>postgres(?:ql)?|redis)://[^\s\"'`]*")
FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
VERB = re.compile(r"^[a-z][a-z0-9-]*(\|[a-z][a-z0-9-]*)*$")
METAVARIABLE = re.compile(r"^[A-Z][A-Z0-9_]*(,.*)?$")
REQUIREMENT = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(\[(?P<extras>[^\]]*)\])?")


@dataclass(frozen=True)
class Block:
    """A fenced code block: where it opens, its language and text, and the marks around it."""

    doc: Path
    line: int
    lang: str
    text: str
    not_run: str | None = None
    output: tuple[str, ...] | None = None
    any_order: bool = False

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}:{self.lang or 'shell'}"


@dataclass(frozen=True)
class Span:
    """An inline code span that is a command."""

    doc: Path
    line: int
    text: str

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}:{self.text}"


# ---------------------------------------------------------------------------------------------
# Markdown


def _previous(lines: list[str], index: int) -> str:
    """The nearest non-blank line above `index`, or ""."""
    for line in reversed(lines[:index]):
        if line.strip():
            return line
    return ""


def _output_after(lines: list[str], index: int) -> tuple[tuple[str, ...], bool, int] | None:
    """The `<!-- output: … -->` mark after a block closed at `index`: lines, any order, its end."""
    start = index + 1
    while start < len(lines) and not lines[start].strip():
        start += 1
    opened = OUTPUT.match(lines[start]) if start < len(lines) else None
    if opened is None:
        return None
    end = next(i for i in range(start + 1, len(lines)) if lines[i].strip() == "-->")
    return tuple(line.strip() for line in lines[start + 1 : end]), opened["any"] is not None, end


def included(text: str) -> str:
    """The file a snippets include names, or `text` itself when it is no include."""
    found = SNIPPET.match(text)
    return (ROOT / found["path"].strip()).read_text() if found else text


def parse(doc: Path, text: str | None = None) -> tuple[list[Block], list[Span]]:
    """The fenced blocks of a Markdown file, and the commands in its inline code spans."""
    lines = (doc.read_text() if text is None else text).splitlines()
    blocks: list[Block] = []
    prose: list[tuple[int, str]] = []
    index = 0
    while index < len(lines):
        opened = FENCE.match(lines[index])
        if opened is None:
            prose.append((index + 1, lines[index]))
            index += 1
            continue
        fence = opened["fence"]
        close = next(
            (
                i
                for i in range(index + 1, len(lines))
                if lines[i].strip().startswith(fence[0] * len(fence))
                and not lines[i].strip().strip(fence[0])
            ),
            len(lines),
        )
        mark = NOT_RUN.match(_previous(lines, index))
        output = _output_after(lines, close)
        blocks.append(
            Block(
                doc=doc,
                line=index + 1,
                lang=opened["lang"].lower(),
                text=included("\n".join(lines[index + 1 : close]) + "\n"),
                not_run=mark["reason"] if mark else None,
                output=output[0] if output else None,
                any_order=output[1] if output else False,
            )
        )
        prose.append((index + 1, ""))  # a block ends a paragraph
        index = (output[2] if output else close) + 1
    return blocks, _spans(doc, prose)


def _spans(doc: Path, prose: list[tuple[int, str]]) -> list[Span]:
    spans: list[Span] = []
    paragraph: list[tuple[int, str]] = []
    for number, line in [*prose, (0, "")]:
        if line.strip() and not line.lstrip().startswith("<!--"):
            paragraph.append((number, line))
            continue
        if paragraph:
            text = "\n".join(line for _, line in paragraph)
            for found in INLINE.finditer(text):
                code = " ".join(found["code"].split())
                if COMMAND_SPAN.match(code):
                    line_no = paragraph[0][0] + text.count("\n", 0, found.start())
                    spans.append(Span(doc=doc, line=line_no, text=code))
        paragraph = []
    return spans


def _all() -> tuple[list[Block], list[Span]]:
    blocks: list[Block] = []
    spans: list[Span] = []
    for doc in DOCS:
        found, inline = parse(doc)
        blocks += found
        spans += inline
    return blocks, spans


BLOCKS, SPANS = _all()
PYTHON = [b for b in BLOCKS if b.lang == "python" and b.not_run is None]
SHELL_BLOCKS = [b for b in BLOCKS if b.lang in SHELL and b.not_run is None]
DATA = [b for b in BLOCKS if b.lang in {"toml", "json"} and b.not_run is None]


# ---------------------------------------------------------------------------------------------
# Servers: a fresh database or key prefix per block, only for the engines the block names


@dataclass
class Servers:
    """The test servers' URLs a block's URLs become, by scheme."""

    postgres: str | None = None
    redis: str | None = None

    def url(self, scheme: str) -> str:
        found = self.redis if scheme == "redis" else self.postgres
        assert found is not None, f"no {scheme} server was set up"
        return found

    def env(self) -> dict[str, str]:
        return {"DATABASE_URL": self.postgres} if self.postgres else {}


async def _database(server: str, name: str, *, drop: bool = False) -> None:
    conn = await asyncpg.connect(asyncpg_dsn(server)[0])
    try:
        verb = "drop database if exists" if drop else "create database"
        await conn.execute(f'{verb} "{name}"{" with (force)" if drop else ""}')
    finally:
        await conn.close()


@contextmanager
def _fresh_database() -> Iterator[str]:
    try:
        server = postgres_url()
    except ServerUnavailable as exc:
        unavailable(f"no Postgres server for a docs block: {exc}")
    name = f"xjobs_docs_{secrets.token_hex(4)}"
    asyncio.run(_database(server, name))
    try:
        yield urlunsplit(urlsplit(asyncpg_dsn(server)[0])._replace(path=f"/{name}"))
    finally:
        asyncio.run(_database(server, name, drop=True))


async def _drop_prefix(server: str, prefix: str) -> None:
    client = Redis.from_url(server, decode_responses=True)
    try:
        await drop_prefix(client, prefix)
    finally:
        await client.aclose()


@contextmanager
def _fresh_prefix() -> Iterator[str]:
    try:
        server = redis_url()
    except RedisUnavailable as exc:
        unavailable(f"no Redis server for a docs block: {exc}")
    prefix = f"xjobs_t_{secrets.token_hex(6)}"  # the shape the Redis tests ignore as a test's
    try:
        yield f"{server}{'&' if '?' in server else '?'}xjobs_prefix={prefix}"
    finally:
        asyncio.run(_drop_prefix(server, prefix))


@contextmanager
def servers_for(text: str) -> Iterator[Servers]:
    """Fresh server URLs for the engines `text` names (`DATABASE_URL` names Postgres)."""
    schemes = {m["scheme"] for m in URL.finditer(text)}
    with ExitStack() as stack:
        servers = Servers()
        if "DATABASE_URL" in text or schemes & {"postgres", "postgresql"}:
            servers.postgres = stack.enter_context(_fresh_database())
        if "redis" in schemes:
            servers.redis = stack.enter_context(_fresh_prefix())
        yield servers


def string_literals(source: str) -> list[tuple[int, int, str]]:
    """Each string literal of `source` that holds a URL: start and end offsets, text."""
    kinds = {tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    offsets = [0, *itertools.accumulate(len(line) for line in source.splitlines(keepends=True))]
    return [
        (
            offsets[token.start[0] - 1] + token.start[1],
            offsets[token.end[0] - 1] + token.end[1],
            token.string,
        )
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type in kinds and URL.search(token.string)
    ]


def substitute_python(source: str, servers: Servers) -> str:
    """`source` with the URL in each string literal replaced by the test server's."""
    for start, end, text in reversed(string_literals(source)):
        replaced = URL.sub(lambda m: servers.url(m["scheme"]), text)
        source = source[:start] + replaced + source[end:]
    return source


# ---------------------------------------------------------------------------------------------
# Shell commands


def commands(text: str) -> list[list[str]]:
    """The commands of a shell block, one word list each, `uv run` and prompts dropped."""
    found: list[list[str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        line = line[2:] if line.startswith("$ ") else line
        words = shlex.split(line, comments=True)
        if words[:2] == ["uv", "run"]:
            words = words[2:]
        if words[:3] == ["python", "-m", "xjobs_cli"]:
            words = ["xjobs", *words[3:]]
        if not words:
            continue
        if words[0] != "xjobs":
            found.append(words)
            continue
        starts = [i for i, word in enumerate(words) if word == "xjobs"]
        found += [words[a:b] for a, b in itertools.pairwise([*starts, len(words)])]
    return found


def is_placeholder(word: str) -> bool:
    """Whether a word stands for something the reader fills in (`ID`, `…`, `[--flag X]`, …)."""
    return (
        any(mark in word for mark in ("…", "...", "[", "]", "|", "<", ">"))
        or METAVARIABLE.match(word) is not None
        or any(word.startswith(stand_in) for stand_in in STAND_INS)
    )


def _xjobs() -> list[str]:
    script = Path(sys.executable).with_name("xjobs")
    return [str(script)] if script.exists() else [sys.executable, "-m", "xjobs_cli"]


def _run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        command,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, (
        f"`{shlex.join(command)}` exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout


# Every `--help` the docs need, in one process: `main` is what the `xjobs` script runs.
HELP = """
import contextlib, io, json, sys
from xjobs_cli.main import main
answers = {}
for path in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*path, "--help"])
    answers[" ".join(path)] = {"code": code, "out": out.getvalue(), "err": err.getvalue()}
print(json.dumps(answers))
"""


def _verb_paths(words: list[str]) -> list[tuple[str, ...]]:
    """`xjobs tasks pause|resume NAME` -> [("tasks", "pause"), ("tasks", "resume")]."""
    verbs = itertools.takewhile(lambda w: VERB.match(w) is not None, words[1:])
    return list(itertools.product(*(verb.split("|") for verb in verbs)))


@functools.cache
def all_help() -> dict[str, dict[str, str | int]]:
    """`xjobs PATH --help` for every verb path of every `xjobs` command in the docs."""
    texts = [b.text for b in SHELL_BLOCKS] + [s.text for s in SPANS]
    paths = {
        path
        for text in texts
        for words in commands(text)
        if words[0] == "xjobs"
        for path in _verb_paths(words)
    }
    found = _run([sys.executable, "-c", HELP, json.dumps(sorted(paths))], cwd=ROOT)
    answers: dict[str, dict[str, str | int]] = json.loads(found)
    return answers


def xjobs_help(path: tuple[str, ...]) -> str:
    """`xjobs PATH --help`, which must succeed."""
    answer = all_help().get(" ".join(path))
    if answer is None:  # a command made up by a test, not found in the docs
        return _run([*_xjobs(), *path, "--help"], cwd=ROOT)
    assert answer["code"] == 0, f"exited {answer['code']}: {answer['err']}"
    return str(answer["out"])


def xjobs_problems(words: list[str]) -> list[str]:
    """What is wrong with an `xjobs …` command: a verb or a flag its `--help` does not know."""
    problems: list[str] = []
    for path in _verb_paths(words):
        try:
            text = xjobs_help(path)
        except AssertionError as exc:
            problems.append(f"`xjobs {' '.join(path)} --help` failed: {exc}")
            continue
        for flag in sorted({f for word in words for f in FLAG.findall(word)}):
            if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text):
                problems.append(f"`xjobs {' '.join(path)}` has no {flag}")
    return problems


def runs(words: list[str]) -> bool:
    """Whether an `xjobs` command is run, not only checked: concrete and not long-running."""
    verb = words[1] if len(words) > 1 else ""
    return verb not in LONG_RUNNING and not any(is_placeholder(word) for word in words)


@functools.cache
def workspace_distributions() -> dict[str, frozenset[str]]:
    """Each workspace distribution's name and extras."""
    found = {}
    for pyproject in (ROOT / "packages").glob("*/pyproject.toml"):
        project = tomllib.loads(pyproject.read_text())["project"]
        found[project["name"]] = frozenset(project.get("optional-dependencies", {}))
    return found


def pip_problems(words: list[str]) -> list[str]:
    """What is wrong with a `pip install …` line: an xjobs name or an extra that does not exist."""
    problems: list[str] = []
    for word in words[2:]:
        found = REQUIREMENT.match(word)
        if word.startswith("-") or found is None:
            continue
        name = re.sub(r"[-_.]+", "-", found["name"]).lower()
        extras = {e.strip() for e in (found["extras"] or "").split(",") if e.strip()}
        if name not in workspace_distributions():
            if name.startswith("xjobs"):
                problems.append(f"{word}: no workspace distribution is named {name}")
            continue
        missing = extras - workspace_distributions()[name]
        if missing:
            problems.append(f"{word}: {name} has no extra {', '.join(sorted(missing))}")
    return problems


@functools.cache
def nox_sessions() -> frozenset[str]:
    listed = _run(
        [sys.executable, "-m", "nox", "--list", "--noxfile", str(ROOT / "noxfile.py")], ROOT
    )
    return frozenset(m[1] for m in re.finditer(r"^[*-] ([\w-]+)", listed, flags=re.M))


def nox_problems(words: list[str]) -> list[str]:
    named: list[str] = []
    for flag, value in itertools.pairwise(words):
        if flag == "--":
            break
        if flag in {"-s", "--session", "--sessions", "-e"}:
            named.append(value)
    return [f"nox has no session {name}" for name in named if name not in nox_sessions()]


def parity_problem(words: list[str]) -> str:
    """What is wrong with the parity suite's pytest line, or "": it must collect scenarios."""
    if "--pyargs" not in words or "xjobs.testing.parity" not in words:
        return f"no rule for `{shlex.join(words)}`: only the parity suite's pytest line has one"
    args = []
    for word in words[1:]:
        option, equals, value = word.partition("=")
        args.append(f"{option}=memory" if equals and value in BACKEND_STAND_INS else word)
    return parity_collection(tuple(args))


@functools.cache
def parity_collection(args: tuple[str, ...]) -> str:
    """`pytest ARGS --collect-only` as a third party runs it: outside the repository, with no
    project configuration. The problem found, or ""."""
    with tempfile.TemporaryDirectory() as tmp:
        ini = Path(tmp) / "pytest.ini"
        ini.write_text("[pytest]\n")
        command = [sys.executable, "-m", "pytest", "-c", str(ini), "-p", "no:cacheprovider"]
        try:
            out = _run([*command, *args, "--collect-only", "-q"], cwd=Path(tmp))
        except AssertionError as exc:
            return str(exc)
    return "" if re.search(r"\b\d+ tests? collected\b", out) else f"collected nothing:\n{out}"


def check_command(words: list[str], tmp: Path, *, check_only: bool) -> list[str]:
    """Check one command, and run it when it `runs` unless `check_only`; the problems found."""
    head = words[0]
    if head == "xjobs":
        problems = xjobs_problems(words)
        if not problems and not check_only and runs(words):
            with servers_for(shlex.join(words)) as servers:
                concrete = [URL.sub(lambda m: servers.url(m["scheme"]), w) for w in words]
                concrete = [os.path.expandvars(w) for w in concrete]
                _run([*_xjobs(), *concrete[1:]], cwd=tmp, env=servers.env())
        return problems
    if words[:2] == ["pip", "install"] or words[:3] == ["uv", "pip", "install"]:
        return pip_problems(words[1:] if head == "uv" else words)
    if head == "nox":
        return nox_problems(words)
    if head == "pytest":
        problem = parity_problem(words)
        return [problem] if problem else []
    return [
        f"no rule for `{shlex.join(words)}`: add one to {Path(__file__).name} or mark the block"
    ]


# ---------------------------------------------------------------------------------------------
# The tests


def _lines_match(expected: str, actual: str) -> bool:
    pattern = ".*".join(re.escape(part.strip()) for part in expected.split("…"))
    return re.fullmatch(pattern, actual.strip()) is not None


def check_output(block: Block, stdout: str) -> None:
    assert block.output is not None
    actual = [line for line in stdout.splitlines() if line.strip()]
    expected = list(block.output)
    if block.any_order:
        unmatched = list(actual)
        for line in expected:
            hit = next((a for a in unmatched if _lines_match(line, a)), None)
            assert hit is not None, f"no printed line matches {line!r}:\n{stdout}"
            unmatched.remove(hit)
        assert not unmatched, f"printed more than the mark says: {unmatched}"
        return
    said = f"printed:\n{stdout}\nthe mark after the block says:\n" + "\n".join(expected)
    assert len(actual) == len(expected), said
    assert all(map(_lines_match, expected, actual)), said


@pytest.mark.parametrize("block", PYTHON, ids=[b.id for b in PYTHON])
def test_python_block_runs(block: Block, tmp_path: Path) -> None:
    # the servers its string literals name (a URL in a comment is prose)
    named = [text for _, _, text in string_literals(block.text)]
    if "DATABASE_URL" in block.text:
        named.append("DATABASE_URL")
    with servers_for(" ".join(named)) as servers:
        script = tmp_path / "block.py"
        script.write_text(substitute_python(block.text, servers))
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env={**os.environ, **servers.env()},
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    assert done.returncode == 0, f"{block.id} exited {done.returncode}:\n{done.stderr}"
    if block.output is not None:
        check_output(block, done.stdout)


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=[b.id for b in SHELL_BLOCKS])
def test_shell_block_runs_or_parses(block: Block, tmp_path: Path) -> None:
    found = commands(block.text)
    assert found, f"{block.id} holds no command"
    # a block that shows a placeholder anywhere is a synopsis: its commands are shapes to check
    synopsis = any(is_placeholder(word) for words in found for word in words)
    problems = [p for words in found for p in check_command(words, tmp_path, check_only=synopsis)]
    assert not problems, f"{block.id}:\n" + "\n".join(problems)


@pytest.mark.parametrize("span", SPANS, ids=[s.id for s in SPANS])
def test_inline_command_parses(span: Span, tmp_path: Path) -> None:
    problems = [
        p for words in commands(span.text) for p in check_command(words, tmp_path, check_only=True)
    ]
    assert not problems, f"{span.id}:\n" + "\n".join(problems)


@pytest.mark.parametrize("block", DATA, ids=[b.id for b in DATA])
def test_data_block_parses(block: Block) -> None:
    if block.lang == "toml":
        tomllib.loads(block.text)
    else:
        json.loads(block.text)


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_marks_sit_by_a_block_and_not_run_marks_say_why(doc: Path) -> None:
    blocks, _ = parse(doc)
    placed = sum(1 for b in blocks if b.not_run is not None) + sum(
        1 for b in blocks if b.output is not None
    )
    marks = len(MARK.findall(doc.read_text()))
    assert marks == placed, f"{doc.name}: a not-run or output mark is not next to a block"
    for block in blocks:
        assert block.not_run is None or block.not_run, f"{block.id}: not-run without a reason"
        assert block.output is None or block.lang == "python", f"{block.id}: output on non-python"


def test_not_run_marks_stay_rare() -> None:
    marked = [f"{b.id}: {b.not_run}" for b in BLOCKS if b.not_run is not None]
    assert len(marked) <= MAX_NOT_RUN, "too many blocks are not run:\n" + "\n".join(marked)


def test_the_readme_examples_are_run_with_their_output_pinned() -> None:
    readme = [b for b in PYTHON if b.doc.name == "README.md"]
    assert len(readme) >= 4, [b.id for b in readme]
    assert all(b.output for b in readme), [b.id for b in readme if not b.output]


# The rules themselves, on made-up Markdown.

SAMPLE = """\
# Sample

Run `xjobs worker myapp.main:app --queues a,b` or `pip install "xjobs-kit[pg]"`, not `xjobs` alone.

<!-- not-run: a fragment -->
```python
app = make()
```

```python
print("hi")
```
<!-- output:
h…
-->

```
xjobs jobs pause --name N          xjobs jobs resume   --name N
uv run xjobs demo   # the demo
```
"""


def test_the_parser_finds_blocks_marks_and_command_spans() -> None:
    blocks, spans = parse(ROOT / "sample.md", SAMPLE)
    assert [(b.lang, b.not_run, b.output) for b in blocks] == [
        ("python", "a fragment", None),
        ("python", None, ("h…",)),
        ("", None, None),
    ]
    assert [s.text for s in spans] == [
        "xjobs worker myapp.main:app --queues a,b",
        'pip install "xjobs-kit[pg]"',
    ]
    assert commands(blocks[2].text) == [
        ["xjobs", "jobs", "pause", "--name", "N"],
        ["xjobs", "jobs", "resume", "--name", "N"],
        ["xjobs", "demo"],
    ]


def test_placeholders_keep_a_command_from_running() -> None:
    assert runs(["xjobs", "demo"])
    assert runs(["xjobs", "install", "--url", "postgresql://localhost/app"])
    assert not runs(["xjobs", "install", "--url", "postgresql://…"])
    assert not runs(["xjobs", "jobs", "show", "ID"])
    assert not runs(["xjobs", "jobs", "list", "myapp.main:app"])
    assert not runs(["xjobs", "worker", "shop:app"])
    assert not runs(["xjobs", "stats", "[--since", "1h]"])


def test_python_urls_are_replaced_in_strings_only() -> None:
    servers = Servers(postgres="postgresql://test/db", redis="redis://test/0?xjobs_prefix=p")
    source = 'a = "postgresql://localhost/app"  # or "redis://…"\nb = f"redis://h:1/0"\n'
    assert substitute_python(source, servers) == (
        'a = "postgresql://test/db"  # or "redis://…"\nb = f"redis://test/0?xjobs_prefix=p"\n'
    )


def test_pip_lines_name_workspace_distributions_and_their_extras() -> None:
    assert pip_problems(["pip", "install", "xjobs-kit[pg,redis]", "xjobs-core", "uv"]) == []
    assert pip_problems(["pip", "install", "xjobs[pg]"]) == [
        "xjobs[pg]: no workspace distribution is named xjobs"
    ]
    assert pip_problems(["pip", "install", "xjobs-kit[mysql]"]) == [
        "xjobs-kit[mysql]: xjobs-kit has no extra mysql"
    ]
