"""``python -m bench.probe [--sqlite-only]``: issue 24's adversarial probe, as a table.

Starts the fake upstream and ``contextgate serve`` on loopback, on a SQLite file and (when
installed) on PostgreSQL, with the network guard of the tests (tests/support/netguard: every
connect or name lookup not to the fake upstream or the database is refused and written down)
and none of the offline switches inherited. Then sends each probe's requests and counts
failures: a 5xx, a status other than the one the case must get, a refused request that stored a
conversation, an outbound connect, the upstream key anywhere in an answer, the request log, the
stored responses or the server's log, another tenant's data reached (bench/probe_tenants.py).
Prints one Markdown table (README "Reliability").
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx

from bench.probe_cases import CLAUDE, MODEL, Case, hostile_cases
from bench.probe_tenants import cross_tenant
from tests.fake_upstream import FakeUpstream
from tests.support.proxy import REPO, ContextgateServer

KEY = "plain-upstream-probe-7f3a9c2e51"
ANTHROPIC_KEY = "anthropic-probe-51be07d4aa93"
MASTER = "sk-master-probe-0a1b2c3d4e"
NETGUARD = REPO / "tests" / "support" / "netguard"
OFFLINE_SWITCHES = (
    "LITELLM_LOCAL_MODEL_COST_MAP", "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "TIKTOKEN_CACHE_DIR",
)  # fmt: skip
SECRETS_PROBE = "upstream key in any error field"
TENANT_PROBE = "cross-tenant: another key's ids, continuations, deletes, lists"
Counts = dict[str, tuple[int, int]]


def _config(directory: Path, fake: FakeUpstream) -> Path:
    path = directory / "models.yaml"
    path.write_text(
        "model_list:\n"
        f"  - model_name: {CLAUDE}\n    litellm_params:\n"
        f"      model: anthropic/claude-sonnet-4-5-20250929\n      api_base: {fake.url}\n"
        f"      api_key: {ANTHROPIC_KEY}\n"
        "  - model_name: via-litellm\n    litellm_params:\n"
        f"      model: openai/{MODEL}\n      api_base: {fake.base_url}\n"
        f"      api_key: {KEY}\n      num_retries: 0\n"  # not plain: through litellm
    )
    return path


@contextlib.contextmanager
def _server(directory: Path, fake: FakeUpstream, database_url: str) -> Iterator[ContextgateServer]:
    ports = {httpx.URL(fake.url).port, httpx.URL(database_url.replace("+asyncpg", "")).port}
    server = ContextgateServer(
        {
            "CONTEXTGATE_DATABASE_URL": database_url,
            "CONTEXTGATE_UPSTREAM_BASE_URL": fake.base_url,
            "CONTEXTGATE_UPSTREAM_API_KEY": KEY,
            "CONTEXTGATE_MASTER_KEY": MASTER,
            "CONTEXTGATE_CONFIG": str(_config(directory, fake)),
            "CONTEXTGATE_MAX_RETRIES": "0",
            "CONTEXTGATE_PLANNER_MODEL": MODEL,
            "CONTEXTGATE_SUMMARIZER_MODEL": MODEL,
            "CONTEXTGATE_MAX_BODY_BYTES": str(64 * 1024 * 1024),
            "PYTHONPATH": str(NETGUARD),
            "CG_NETGUARD_LOG": str(directory / "refused.log"),
            "CG_NETGUARD_PORTS": ",".join(str(port) for port in ports if port),
        },
        log_path=directory / "server.log",
        unset=OFFLINE_SWITCHES,
    )
    (directory / "refused.log").write_text("")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _door(path: str, model: str, stream: bool) -> dict[str, object]:
    if path.endswith("/responses"):
        return {"model": model, "input": "probe", "stream": stream}
    if path.endswith("/embeddings"):
        return {"model": model, "input": "probe"}
    body: dict[str, object] = {"model": model, "messages": [{"role": "user", "content": "p"}]}
    return {**body, "stream": stream, "max_tokens": 16} if path.endswith("/messages") else body


def _secrets(http: httpx.Client, fake: FakeUpstream) -> tuple[int, int]:
    """The key echoed in message, code, param and type of the upstream's error, before the
    answer or mid-stream, on every door, both transports, and by an Anthropic upstream."""
    doors = [(p, s) for p in ("/v1/chat/completions", "/v1/responses", "/v1/messages")
             for s in (False, True)] + [("/v1/embeddings", False)]  # fmt: skip
    faults: list[tuple[str, dict[str, object], bool]] = []
    for status in (400, 401, 403, 422, 429, 500, 503):
        fault = {"status": status, "quote_key": True, "quote_key_in": ["code", "param", "type"]}
        faults += [(model, fault, False) for model in (MODEL, "via-litellm")]
    mid = {"error_after_chunks": 2, "error_status": 400, "quote_key": True,
           "quote_key_in": ["code", "param", "type"]}  # fmt: skip
    faults += [(model, mid, True) for model in (MODEL, "via-litellm")]
    error = {"type": ANTHROPIC_KEY, "message": f"invalid x-api-key {ANTHROPIC_KEY}"}
    faults.append((CLAUDE, {"status": 400, "body": {"type": "error", "error": error}}, False))
    attempts = failures = 0
    for model, fault, streams_only in faults:
        for path, stream in doors:
            if (streams_only and not stream) or (model == CLAUDE and "embeddings" in path):
                continue
            fake.reset()
            fake.faults("*", [fault] * 3)
            answer = http.post(path, json=_door(path, model, stream))
            attempts += 1
            failures += KEY in answer.text or ANTHROPIC_KEY in answer.text
    return attempts, failures


def _stored_secrets(server: ContextgateServer, database_url: str) -> int:
    """Occurrences of the keys in the server's log and (SQLite) every byte of the database."""
    texts = [(server.log_path or Path()).read_bytes()]
    if database_url.startswith("sqlite"):
        path = Path(database_url.split("///", 1)[1])
        texts += [p.read_bytes() for p in path.parent.glob(f"{path.name}*")]
        with sqlite3.connect(path) as db:
            texts.append(repr(db.execute("SELECT * FROM request_logs").fetchall()).encode())
    else:
        texts.append(_pg_dump(database_url))
    return sum(text.count(key.encode()) for text in texts for key in (KEY, ANTHROPIC_KEY))


def _pg_dump(database_url: str) -> bytes:
    from tests.servers import _run_in_thread

    async def dump() -> bytes:
        import asyncpg

        conn = await asyncpg.connect(database_url.replace("+asyncpg", ""))
        try:
            rows = [await conn.fetch(f"SELECT * FROM {t}") for t in ("request_logs", "responses")]
        finally:
            await conn.close()
        return repr(rows).encode()

    result: bytes = _run_in_thread(dump)
    return result


def _conversations(http: httpx.Client) -> int:
    return len(http.get("/v1/conversations", params={"limit": 100}).json()["data"])


def _run(http: httpx.Client, cases: list[Case]) -> tuple[int, int]:
    failures = 0
    for path, raw, headers, expected in cases:
        before = _conversations(http) if expected == 400 else 0
        answer = http.post(
            path, content=raw, headers={"content-type": "application/json", **headers}
        )
        bad = answer.status_code >= 500 or (expected and answer.status_code != expected)
        if not bad and expected == 400:
            bad = _conversations(http) != before
        if bad:
            print(f"  FAIL {path} -> {answer.status_code} {answer.text[:160]}", flush=True)
        failures += bool(bad)
    return len(cases), failures


def probe(directory: Path, fake: FakeUpstream, database_url: str) -> Counts:
    counts: Counts = {}
    with (
        _server(directory, fake, database_url) as server,
        httpx.Client(
            base_url=server.url, timeout=120, headers={"Authorization": f"Bearer {MASTER}"}
        ) as http,
    ):
        attempts, failures = _secrets(http, fake)
        fake.reset()  # faults the secrets probe left queued
        counts[TENANT_PROBE] = cross_tenant(http, fake)
        fake.reset()
        for name, cases in hostile_cases().items():
            refused_before = len((directory / "refused.log").read_text().splitlines())
            total, failed = _run(http, cases)
            if "firewall" in name:
                refused = (directory / "refused.log").read_text().splitlines()
                failed += len(refused) - refused_before
            counts[name] = (total, failed)
        leaked = _stored_secrets(server, database_url)
    counts[SECRETS_PROBE] = (attempts, failures + leaked)
    return counts


def table(results: dict[str, Counts]) -> str:
    backends = list(results)
    head = "| probe | " + " | ".join(f"{b}: attempts | failures" for b in backends) + " |"
    rule = "| --- |" + " --- | --- |" * len(backends)
    names = [SECRETS_PROBE, TENANT_PROBE, *hostile_cases()]
    rows = [
        f"| {name} | " + " | ".join(f"{results[b][name][0]} | **{results[b][name][1]}**"
                                    for b in backends) + " |"
        for name in names
    ]  # fmt: skip
    return "\n".join([head, rule, *rows])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sqlite-only", action="store_true")
    args = parser.parse_args()
    results: dict[str, Counts] = {}
    with tempfile.TemporaryDirectory() as tmp, FakeUpstream() as fake:
        work = Path(tmp)
        print("probing on SQLite", flush=True)
        (work / "sqlite").mkdir()
        url = f"sqlite+aiosqlite:///{work / 'sqlite' / 'probe.db'}"
        results["SQLite"] = probe(work / "sqlite", fake, url)
        from tests.servers import PostgresServer, find_postgres_bin

        if not args.sqlite_only and find_postgres_bin() is not None:
            print("probing on PostgreSQL", flush=True)
            (work / "pg").mkdir()
            with PostgresServer() as pg:
                results["PostgreSQL"] = probe(work / "pg", fake, pg.create_database("probe"))
    print(table(results))
    return 0 if all(f == 0 for counts in results.values() for _, f in counts.values()) else 1


if __name__ == "__main__":
    os.environ.setdefault("CONTEXTGATE_LOG_LEVEL", "INFO")
    raise SystemExit(main())
