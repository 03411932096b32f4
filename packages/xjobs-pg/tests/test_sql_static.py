"""The package's SQL as source: named columns only, a splitter-safe DDL, strict schema names.

The static rules read the files under `src/`; the install rules run the DDL on a real server.
"""

from __future__ import annotations

import asyncio
import io
import re
import secrets
import tokenize
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import pytest_asyncio

from xjobs.contract.backend import Backend
from xjobs.contract.stores import SlotHolder, SlotStore
from xjobs.errors import SchemaInvalidError
from xjobs_pg.backend import asyncpg_dsn, open_backend
from xjobs_pg.install import SCHEMA_VERSION, ddl_statements
from xjobs_pg.schema import quote_schema
from xjobs_pg.servers import ServerUnavailable, postgres_url, unavailable
from xjobs_pg.sql import SQL_FILES, Statements, read_sql, split_statements, strip_comments
from xjobs_pg.testing import schema_structure, slots_named_leases

SRC = Path(__file__).resolve().parents[1] / "src"
SQL_DIR = SRC / "xjobs_pg" / "sql"
SQL_PATHS = sorted(SQL_DIR.glob("*.sql"))
TABLES = (
    "attempt_errors",
    "backfills",
    "child_groups",
    "child_shards",
    "counter_folds",
    "counters",
    "event_waits",
    "events",
    "jobs",
    "leaders",
    "slots",
    "outbox",
    "pauses",
    "rates",
    "result_watches",
    "schema_version",
    "steps",
    "task_fires",
    "task_pauses",
    "task_watermarks",
    "webhook_attempts",
    "webhook_endpoints",
    "workers",
)

# `select *`, `select distinct *`, `select t.*`, `returning *`, `returning t.*`, and a qualified
# star later in a select list (`select a, t.*`): each reads or returns a whole row.
WHOLE_ROW = re.compile(
    r"\b(?:select|returning)\s+(?:(?:distinct|all)\s+)?(?:\w+\s*\.\s*)?\*"
    r"|,\s*\w+\s*\.\s*\*",
    re.IGNORECASE,
)
# The loader's own comment rule: `--` to the end of the line.
SQL_COMMENT = re.compile(r"--[^\n]*")


def strip_python_comments(text: str) -> str:
    """`text` without its `#` comments; a `#` inside a string literal is kept."""
    lines = text.splitlines(keepends=True)
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            (row, start), (_, end) = token.start, token.end
            lines[row - 1] = lines[row - 1][:start] + lines[row - 1][end:]
    return "".join(lines)


def code_of(path: Path, text: str) -> str:
    """The part of a source file a statement can live in: its comments stripped."""
    if path.suffix == ".sql":
        return strip_comments(text)
    if path.suffix == ".py":
        return strip_python_comments(text)
    return text


def whole_row_reads(path: Path, text: str) -> list[str]:
    """Every whole-row form in the code of one file, whitespace collapsed."""
    return [" ".join(m.group().split()) for m in WHOLE_ROW.finditer(code_of(path, text))]


def source_files() -> list[Path]:
    return sorted(p for p in SRC.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


# -- (a) no production statement reads or returns a whole row ---------------------------------


def test_the_scan_covers_every_sql_file_and_every_module() -> None:
    scanned = {p.relative_to(SRC).as_posix() for p in source_files()}
    expected_sql = {f"xjobs_pg/sql/{name}" for name in (*SQL_FILES, "ddl.sql")}
    assert expected_sql <= scanned
    assert {"xjobs_pg/driver.py", "xjobs_pg/sql.py", "xjobs_pg/wake.py"} <= scanned


def test_no_production_statement_reads_or_returns_a_whole_row() -> None:
    found = [
        f"{path.relative_to(SRC)}: {form}"
        for path in source_files()
        for form in whole_row_reads(path, path.read_text(encoding="utf-8"))
    ]
    assert found == []


@pytest.mark.parametrize(
    "planted",
    [
        "SELECT  * FROM jobs",
        "select\n\t*\nfrom jobs",
        "update jobs set state = 'ready' returning *",
        "update jobs j set state = 'ready' RETURNING j.*",
        "select t . * from jobs t",
        "select distinct * from jobs",
        "select t.id, j.* from jobs j",
    ],
)
def test_the_scanner_flags_a_planted_whole_row_form(planted: str) -> None:
    assert whole_row_reads(Path("planted.sql"), planted) != []
    assert whole_row_reads(Path("planted.py"), f'SQL = """{planted}"""\n') != []


def test_the_scanner_ignores_a_whole_row_form_inside_a_comment() -> None:
    sql = "-- once this was select * from jobs\nselect id from jobs; -- returning *\n"
    python = "# select * from jobs\nSQL = 'select id from jobs'  # returning *\n"
    assert whole_row_reads(Path("planted.sql"), sql) == []
    assert whole_row_reads(Path("planted.py"), python) == []


def test_the_scanner_keeps_a_hash_inside_a_python_string() -> None:
    python = "SQL = 'select id # not a comment\\nfrom jobs returning *'\n"
    assert whole_row_reads(Path("planted.py"), python) == ["returning *"]


def test_the_scanner_passes_counts_and_named_columns() -> None:
    sql = "select count(*), j.id from jobs j; update jobs set x = 1 returning id, run_id"
    assert whole_row_reads(Path("planted.sql"), sql) == []


# -- (b) comments obey the splitter rule, quotes pair per statement --------------------------


@pytest.mark.parametrize("path", SQL_PATHS, ids=[p.name for p in SQL_PATHS])
def test_no_sql_comment_holds_a_semicolon_or_a_quote(path: Path) -> None:
    offending = [
        f"{path.name}:{number}: {comment.group()}"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for comment in SQL_COMMENT.finditer(line)
        if ";" in comment.group() or "'" in comment.group()
    ]
    assert offending == [], "a comment holds a ; or a ':\n" + "\n".join(offending)


@pytest.mark.parametrize("path", SQL_PATHS, ids=[p.name for p in SQL_PATHS])
def test_each_split_statement_holds_an_even_number_of_quotes(path: Path) -> None:
    statements = split_statements(path.read_text(encoding="utf-8"))
    assert statements
    odd = [s for s in statements if s.count("'") % 2]
    assert odd == []


def test_the_ddl_splits_into_its_statements_lock_first() -> None:
    statements = split_statements(read_sql("ddl.sql"))
    assert statements[0].startswith("select pg_advisory_xact_lock(")
    assert statements[1] == "create schema if not exists {schema}"
    assert all("--" not in s for s in statements)


# -- (c) the splitter ------------------------------------------------------------------------

PLANTED_DDL = """
-- a header, dropped
create table a (x int);  -- a trailing comment, dropped
-- between statements
create table b (
    y text default 'two words'  -- inside a statement
);;
  insert into a values (1)
"""


def test_split_statements_cuts_at_semicolons_and_drops_comments() -> None:
    assert split_statements(PLANTED_DDL) == [
        "create table a (x int)",
        "create table b (\n    y text default 'two words'  \n)",
        "insert into a values (1)",
    ]


def test_split_statements_keeps_the_semicolons_of_a_dollar_quoted_body() -> None:
    ddl = "select 1;\ndo $$\nbegin\n    perform 2;\nend\n$$;\nselect 3;"
    assert split_statements(ddl) == [
        "select 1",
        "do $$\nbegin\n    perform 2;\nend\n$$",
        "select 3",
    ]


def test_split_statements_of_comments_alone_is_empty() -> None:
    assert split_statements("-- only\n-- comments\n\n") == []


# -- (d) every named statement renders for the schema ----------------------------------------

RENDER_SCHEMA = "xjobs_t_render"
QUOTED = quote_schema(RENDER_SCHEMA)
PLACEHOLDER = re.compile(r"\{\w+\}")
UNQUALIFIED = re.compile(
    r"\b(?:from|into|update|join|table|on|exists|using)\s+(?:" + "|".join(TABLES) + r")\b",
    re.IGNORECASE,
)


def rendered() -> list[tuple[str, str]]:
    sql = Statements(QUOTED)
    named = [(name, sql[name]) for name in sql.names()]
    ddl = [(f"ddl[{i}]", s) for i, s in enumerate(ddl_statements(QUOTED))]
    return named + ddl


def test_the_named_statements_include_the_drivers_operations() -> None:
    names = Statements(QUOTED).names()
    assert {"enqueue", "claim", "ack", "nack", "heartbeat", "wake_probe"} <= set(names)


def test_a_fragment_is_written_into_the_statements_that_name_it_and_is_no_statement() -> None:
    sql = Statements(QUOTED)
    assert not {"enqueue_input", "enqueue_woken"} & set(sql.names())
    for name in ("enqueue", "enqueue_fresh"):
        assert sql[name].startswith("with params as (")
        assert "woken as (\n    select pg_notify($16, w.queue)" in sql[name]


@pytest.mark.parametrize(("name", "sql"), rendered(), ids=[n for n, _ in rendered()])
def test_every_statement_renders_with_the_schema_and_no_placeholder(name: str, sql: str) -> None:
    assert PLACEHOLDER.findall(sql) == []
    assert UNQUALIFIED.findall(sql) == []
    if any(re.search(rf"\b{table}\b", sql) for table in TABLES):
        assert f"{QUOTED}." in sql


# -- (e) schema names ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "",
        "Public",
        "a-b",
        "x;drop",
        'x"y',
        "a" * 64,
        "xj\u043ebs",  # a Cyrillic o
        "\uff58jobs",  # a full-width x
        "1jobs",
        "xjobs\n",
        None,
    ],
    ids=repr,
)
def test_quote_schema_refuses_anything_but_a_plain_identifier(name: Any) -> None:
    with pytest.raises(SchemaInvalidError) as refused:
        quote_schema(name)
    assert refused.value.code == "XJOBS_SCHEMA_INVALID"


@pytest.mark.parametrize("name", ["xjobs", "_x1", "a" * 63])
def test_quote_schema_accepts_a_plain_identifier_and_quotes_it(name: str) -> None:
    assert quote_schema(name) == f'"{name}"'


# -- (f) the DDL on a real server ------------------------------------------------------------


def server_url() -> str:
    try:
        return postgres_url()
    except ServerUnavailable as exc:
        unavailable(str(exc))


@pytest_asyncio.fixture
async def schema() -> AsyncIterator[str]:
    """A schema name no one used; dropped afterwards whatever the test installed there."""
    url = server_url()
    name = f"xjobs_t_{secrets.token_hex(6)}"
    yield name
    conn = await asyncpg.connect(asyncpg_dsn(url)[0])
    try:
        await conn.execute(f"drop schema if exists {quote_schema(name)} cascade")
    finally:
        await conn.close()


@pytest_asyncio.fixture
async def other_schema() -> AsyncIterator[str]:
    """A second schema name no one used, for a fresh install to compare with."""
    url = server_url()
    name = f"xjobs_t_{secrets.token_hex(6)}"
    yield name
    conn = await asyncpg.connect(asyncpg_dsn(url)[0])
    try:
        await conn.execute(f"drop schema if exists {quote_schema(name)} cascade")
    finally:
        await conn.close()


STRUCTURE = """
select c.relname, c.relkind::text as relkind,
       coalesce(pg_get_indexdef(c.oid), '') as indexdef,
       coalesce((select string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', '
                                   order by a.attnum)
                 from pg_attribute a
                 where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped), '') as columns
from pg_class c join pg_namespace n on n.oid = c.relnamespace
where n.nspname = $1
order by c.relname
"""


async def installed(url: str, schema: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The schema's relations (tables, indexes, their columns) and its schema_version rows."""
    conn = await asyncpg.connect(asyncpg_dsn(url)[0])
    try:
        relations = [tuple(row) for row in await conn.fetch(STRUCTURE, schema)]
        versions = await conn.fetch(
            f"select singleton, version, installed_at from {quote_schema(schema)}.schema_version"
        )
    finally:
        await conn.close()
    return relations, [tuple(row) for row in versions]


def tables_of(relations: list[tuple[Any, ...]]) -> list[str]:
    return sorted(name for name, kind, *_ in relations if kind == "r")


def logging_into(log: list[str]) -> Callable[[Any], None]:
    """An asyncpg query logger that keeps each statement's text in `log`."""
    return lambda query: log.append(query.query)


async def close_all(*backends: Backend) -> None:
    await asyncio.gather(*(b.close() for b in backends))


@pytest.mark.asyncio
async def test_installing_twice_leaves_the_tables_and_the_version_row_unchanged(
    schema: str,
) -> None:
    url = server_url()
    backend = await open_backend(url, schema=schema, max_size=2)
    try:
        first = await installed(url, schema)
        await backend.install()
        second = await installed(url, schema)
    finally:
        await backend.close()
    assert tables_of(first[0]) == sorted(TABLES)
    assert [row[:2] for row in first[1]] == [(True, SCHEMA_VERSION)]
    assert second == first


@pytest.mark.asyncio
async def test_two_installs_racing_on_one_new_schema_both_succeed(schema: str) -> None:
    url = server_url()
    ran: list[list[str]] = [[], []]
    a, b = [
        await open_backend(
            url,
            schema=schema,
            max_size=2,
            install_schema=False,
            on_query=logging_into(log),
        )
        for log in ran
    ]
    try:
        await asyncio.gather(a.install(), b.install())
    finally:
        await close_all(a, b)
    relations, versions = await installed(url, schema)
    assert tables_of(relations) == sorted(TABLES)
    assert [row[:2] for row in versions] == [(True, SCHEMA_VERSION)]
    # both took the install lock; the one that waited found the schema current and ran no DDL
    # (its alter tables would wait on the tables' users while they wait on it: a deadlock)
    assert all(any("pg_advisory_xact_lock" in q for q in log) for log in ran)
    create = f"create schema if not exists {quote_schema(schema)}"
    assert sorted(any(create in q for q in log) for log in ran) == [False, True]


@pytest.mark.asyncio
async def test_two_backends_opening_one_new_schema_at_once_both_open(schema: str) -> None:
    url = server_url()
    a, b = await asyncio.gather(
        open_backend(url, schema=schema, max_size=2),
        open_backend(url, schema=schema, max_size=2),
    )
    await close_all(a, b)
    relations, versions = await installed(url, schema)
    assert tables_of(relations) == sorted(TABLES)
    assert [row[:2] for row in versions] == [(True, SCHEMA_VERSION)]


# -- (g) the slot table renamed in version 5 --------------------------------------------------

HOLDER = SlotHolder(job_id="job-1", claims=1)


async def as_version_4(url: str, schema: str) -> None:
    """Turn a current install of `schema` back into version 4: its slot table named `leases`."""
    conn = await asyncpg.connect(asyncpg_dsn(url)[0])
    try:
        await slots_named_leases(conn, schema)
        await conn.execute(f"update {quote_schema(schema)}.schema_version set version = 4")
    finally:
        await conn.close()


async def structure(url: str, schema: str) -> list[tuple[Any, ...]]:
    conn = await asyncpg.connect(asyncpg_dsn(url)[0])
    try:
        return await schema_structure(conn, schema)
    finally:
        await conn.close()


def slots_of(backend: Backend) -> SlotStore:
    assert backend.slots is not None
    return backend.slots


@pytest.mark.asyncio
async def test_opening_a_version_4_schema_renames_leases_to_slots_and_keeps_the_held_slots(
    schema: str, other_schema: str
) -> None:
    url = server_url()
    backend = await open_backend(url, schema=schema, max_size=2)
    try:
        assert await slots_of(backend).acquire("job:a", HOLDER, 1, 60_000) is True
    finally:
        await backend.close()
    await close_all(await open_backend(url, schema=other_schema, max_size=2))
    await as_version_4(url, schema)
    backend = await open_backend(url, schema=schema, max_size=2)
    try:
        assert await slots_of(backend).holders("job:a") == [HOLDER]
        relations, versions = await installed(url, schema)
        await backend.install()
        assert await installed(url, schema) == (relations, versions)
    finally:
        await backend.close()
    assert tables_of(relations) == sorted(TABLES)
    assert [row[:2] for row in versions] == [(True, SCHEMA_VERSION)]
    assert await structure(url, schema) == await structure(url, other_schema)


@pytest.mark.asyncio
async def test_two_installs_racing_on_a_version_4_schema_rename_leases_once(schema: str) -> None:
    url = server_url()
    backend = await open_backend(url, schema=schema, max_size=2)
    try:
        assert await slots_of(backend).acquire("job:a", HOLDER, 1, 60_000) is True
    finally:
        await backend.close()
    await as_version_4(url, schema)
    a, b = [
        await open_backend(url, schema=schema, max_size=2, install_schema=False) for _ in range(2)
    ]
    try:
        await asyncio.gather(a.install(), b.install())
        assert await slots_of(a).holders("job:a") == [HOLDER]
    finally:
        await close_all(a, b)
    relations, versions = await installed(url, schema)
    assert tables_of(relations) == sorted(TABLES)
    assert [row[:2] for row in versions] == [(True, SCHEMA_VERSION)]


@pytest.mark.asyncio
async def test_an_install_leaves_a_leases_table_alone_when_slots_exists(schema: str) -> None:
    url = server_url()
    backend = await open_backend(url, schema=schema, max_size=2)
    try:
        conn = await asyncpg.connect(asyncpg_dsn(url)[0])
        try:
            await conn.execute(f"create table {quote_schema(schema)}.leases (x int)")
        finally:
            await conn.close()
        await backend.install()
        assert await slots_of(backend).acquire("job:a", HOLDER, 1, 60_000) is True
    finally:
        await backend.close()
    relations, _ = await installed(url, schema)
    assert tables_of(relations) == sorted((*TABLES, "leases"))
