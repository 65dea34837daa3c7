"""Retrieval benchmark: recall@k and MRR of BM25, the embedded model and their fusion on
hand-written paraphrased questions (bench/retrieval_data.py); the similarity calibration of the
embedded model; p50/p99 retrieval latency through ``retrieve`` at 10,000 memories per user.

    .venv/bin/python -m bench.retrieval [--memories 10000] [--queries 300]

Quality is measured on relevance alone (every memory importance 5, same age), the production
ranking with its similarity threshold (``rank`` as ``retrieve`` calls it), and with importances
drawn at random (3-9) to show what importance x recency does to the fused order.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import select

import app  # noqa: F401  (offline defaults first)
from app.cli import run_migrations
from app.core.settings import Settings
from app.db.models import Memory
from app.embedders.embedded import FUNCTION_WORDS, EmbeddedEmbedder
from app.embedders.embedder import embedded_embedder
from app.main import build_state
from app.memories.retrieval import (
    Candidate,
    LexicalIndex,
    RankPolicy,
    Relevance,
    RetrievalQuery,
    fuse,
    rank,
    retrieve,
)
from app.memories.runtime import MemoryRuntime
from app.turns.memory_services import index_services
from bench.retrieval_data import DISTRACTORS, LEXICAL, PARAPHRASED

KS = (1, 3, 8)
# Writes (one new memory each) timed by their next query, per kind of question.
_WRITES = 10
_STOP = FUNCTION_WORDS


def content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP and len(w) > 1}


def metrics(ranked: list[list[int]], gold: list[int]) -> dict[str, float]:
    out: dict[str, float] = {}
    for k in KS:
        out[f"recall@{k}"] = float(np.mean([g in r[:k] for r, g in zip(ranked, gold, strict=True)]))
    rr = [1.0 / (r.index(g) + 1) if g in r else 0.0 for r, g in zip(ranked, gold, strict=True)]
    out["mrr"] = float(np.mean(rr))
    return out


def order(scores: np.ndarray, limit: int = 50) -> list[int]:
    return [int(i) for i in np.argsort(-scores, kind="stable")[:limit]]


def quality(
    choice: str = "embedded", k_values: tuple[int, ...] = (5, 10, 20, 60)
) -> dict[str, Any]:
    memories = [m for m, _ in PARAPHRASED] + [m for m, _ in LEXICAL] + list(DISTRACTORS)
    questions = [q for _, q in PARAPHRASED] + [q for _, q in LEXICAL]
    gold = list(range(len(PARAPHRASED) + len(LEXICAL)))
    shares = [bool(content_words(questions[i]) & content_words(memories[i])) for i in gold]
    embedder = embedded_embedder(choice)
    started = time.perf_counter()
    embedder.load()
    load_s = time.perf_counter() - started
    matrix = embedder.embed_sync(memories)
    queries = embedder.embed_sync(questions)
    lexical = LexicalIndex(memories)
    bm25 = [lexical.raw(q) for q in questions]
    strong = [lexical.strong(q, b) for q, b in zip(questions, bm25, strict=True)]
    cosine = [matrix @ queries[i] for i in range(len(questions))]
    groups = {
        "all": list(range(len(questions))),
        "no shared word": [i for i in gold if not shares[i]],
        "shared words": [i for i in gold if shares[i]],
    }
    methods: dict[str, list[list[int]]] = {
        "BM25": [order(s) for s in bm25],
        "embedded": [order(c) for c in cosine],
    }
    for k in k_values:
        methods[f"fusion k={k}"] = [
            order(fuse(c, b, s, k)) for c, b, s in zip(cosine, bm25, strong, strict=True)
        ]
    table = {
        name: {
            g: metrics([ranked[i] for i in idx], [gold[i] for i in idx])
            for g, idx in groups.items()
        }
        for name, ranked in methods.items()
    }
    # Calibration: cosine of the right memory against the best wrong one, per question.
    right = np.asarray([cosine[i][gold[i]] for i in gold])
    wrong_best = np.asarray([np.max(np.delete(cosine[i], gold[i])) for i in gold])
    all_wrong = np.concatenate([np.delete(cosine[i], gold[i]) for i in gold])
    thresholds = {}
    for t in (0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45):
        thresholds[t] = {
            "right kept": float(np.mean(right >= t)),
            "wrong per query": float(
                np.mean([np.sum(np.delete(cosine[i], gold[i]) >= t) for i in gold])
            ),
            "unrelated pairs over": float(np.mean(all_wrong >= t)),
        }
    production = production_quality(
        memories, questions, gold, cosine, bm25, strong, embedder, groups
    )
    return {
        "memories": len(memories),
        "questions": len(questions),
        "no_shared_word": len(groups["no shared word"]),
        "load_s": load_s,
        "embedder": embedder.name,
        "table": table,
        "right_cosine_pcts": np.percentile(right, [10, 25, 50]).round(3).tolist(),
        "wrong_best_pcts": np.percentile(wrong_best, [50, 90]).round(3).tolist(),
        "thresholds": thresholds,
        "production": production,
    }


def production_quality(
    memories: list[str],
    questions: list[str],
    gold: list[int],
    cosine: list[np.ndarray],
    bm25: list[np.ndarray],
    strong: list[np.ndarray],
    embedder: EmbeddedEmbedder,
    groups: dict[str, list[int]],
) -> dict[str, Any]:
    """recall@8 through ``rank`` (the threshold applied), uniform and random importances."""
    now = datetime.now(UTC)
    policy = RankPolicy(
        now=now, half_life_days=90.0, min_score=0.0, top_k=8, token_cap=10**6, count=len
    )
    rng = random.Random(5)
    results: dict[str, Any] = {}
    for label, importances, ages in (
        ("uniform", [5] * len(memories), [0] * len(memories)),
        (
            "random importance 3-9, age 0-180 d",
            [rng.randint(3, 9) for _ in memories],
            [rng.randint(0, 180) for _ in memories],
        ),
    ):
        candidates = [
            Candidate(str(i), text, "fact", importances[i], now - timedelta(days=ages[i]))
            for i, text in enumerate(memories)
        ]
        found_at: list[list[int]] = []
        injected: list[int] = []
        for i in range(len(questions)):
            eligible = (cosine[i] >= embedder.min_similarity) | strong[i]
            scored = Relevance(
                fuse(cosine[i], bm25[i], strong[i]), eligible=eligible, reported=cosine[i]
            )
            chosen = rank(candidates, scored, policy)
            found_at.append([int(c.id) for c in chosen])
            injected.append(len(chosen))
        results[label] = {
            g: metrics([found_at[i] for i in idx], [gold[i] for i in idx])["recall@8"]
            for g, idx in groups.items()
        }
        results[label]["mean injected"] = float(np.mean(injected))
    return results


async def latency(
    url: str, count: int, queries: int, embedder: str = "embedded"
) -> dict[str, float]:
    """``retrieve`` over ``count`` memories of one user (SQLite file), the embedded model on."""
    settings = Settings(database_url=url, embedder=embedder, _env_file=None)
    state = build_state(settings)
    assert isinstance(state.embedder, EmbeddedEmbedder)
    state.embedder.load()
    rng = random.Random(11)
    now = datetime.now(UTC)
    texts = [m for m, _ in PARAPHRASED] + list(DISTRACTORS)
    words = " ".join(texts).split()
    async with state.database.writing() as session:
        session.add_all(
            Memory(
                tenant_id="default",
                user_id="bench-user",
                content=" ".join(rng.choice(words) for _ in range(10)),
                memory_type="fact",
                importance=rng.randint(1, 10),
                created_at=now - timedelta(days=rng.randint(0, 365)),
                updated_at=now - timedelta(days=rng.randint(0, 365)),
            )
            for _ in range(count)
        )
    count_tokens = lambda text: state.tokens.count_text(text, "gpt-4o")  # noqa: E731
    count_tokens("warm up the tokenizer")
    questions = [q for _, q in PARAPHRASED]
    timings: list[float] = []
    cold = 0.0
    background_s = 0.0
    for i in range(queries + 1):
        started = time.perf_counter()
        async with state.database.reading() as session:
            question = RetrievalQuery(
                "default", "bench-user", questions[i % len(questions)], count_tokens
            )
            await retrieve(index_services(state), state.settings, session, question, [])
        elapsed = (time.perf_counter() - started) * 1000
        if i == 0:
            cold = elapsed
            # The vectors the cold query left to the background (all but a request's batch),
            # computed and saved before the timed queries: they measure the steady state.
            started = time.perf_counter()
            while state.background:
                await asyncio.gather(*list(state.background), return_exceptions=True)
            background_s = time.perf_counter() - started
        else:
            timings.append(elapsed)
    while state.background:  # the lazily computed vectors being saved
        await asyncio.gather(*list(state.background), return_exceptions=True)

    async def timed(query: str) -> float:
        started = time.perf_counter()
        async with state.database.reading() as session:
            question = RetrievalQuery("default", "bench-user", query, count_tokens)
            await retrieve(index_services(state), state.settings, session, question, [])
        return (time.perf_counter() - started) * 1000

    # A rebuilt index now reads the stored vectors instead of computing them.
    state.memory = MemoryRuntime(settings, state.database)
    rebuilt = await timed("tea")
    # The first query after another writer stored one new memory (as a second worker would),
    # background work settled before each write: a question sharing no word with the new
    # memory, and one that does (its BM25 must include the new memory).
    after_write: dict[str, list[float]] = {"unrelated": [], "shared": []}
    for i in range(_WRITES):
        for kind in after_write:
            while state.background:
                await asyncio.gather(*list(state.background), return_exceptions=True)
            code = 4100 + 2 * i + (kind == "shared")
            async with state.database.writing() as session:
                session.add(
                    Memory(
                        tenant_id="default",
                        user_id="bench-user",
                        content=f"The storage unit code is {code}, gate {i % 7}",
                        memory_type="fact",
                    )
                )
            query = (
                f"Which gate is storage unit {code} at?"
                if kind == "shared"
                else questions[i % len(questions)]
            )
            after_write[kind].append(await timed(query))
    while state.background:
        await asyncio.gather(*list(state.background), return_exceptions=True)
    # ... and after one was deleted (the count drops, no row says which).
    async with state.database.writing() as session:
        victim = await session.scalar(select(Memory).where(Memory.user_id == "bench-user"))
        await session.delete(victim)
    after_delete = await timed("tea")
    await state.database.dispose()
    timings.sort()
    return {
        "cold_ms": cold,
        "background_vectors_s": background_s,
        "rebuild_stored_ms": rebuilt,
        "p50_ms": statistics.median(timings),
        "p99_ms": timings[max(0, int(len(timings) * 0.99) - 1)],
        "after_write_unrelated_p50_ms": statistics.median(after_write["unrelated"]),
        "after_write_unrelated_max_ms": max(after_write["unrelated"]),
        "after_write_shared_p50_ms": statistics.median(after_write["shared"]),
        "after_write_shared_max_ms": max(after_write["shared"]),
        "after_delete_ms": after_delete,
    }


def report(result: dict[str, Any], timing: dict[str, float] | None) -> None:
    print(
        f"{result['memories']} memories, {result['questions']} questions "
        f"({result['no_shared_word']} share no content word with their memory); "
        f"embedded model {result['embedder']} loaded in {result['load_s']:.2f} s"
    )
    print("| method | group | recall@1 | recall@3 | recall@8 | MRR |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, groups in result["table"].items():
        for group, m in groups.items():
            print(
                f"| {name} | {group} | {m['recall@1']:.2f} | {m['recall@3']:.2f} | "
                f"{m['recall@8']:.2f} | {m['mrr']:.3f} |"
            )
    print("right-memory cosine p10/p25/p50:", result["right_cosine_pcts"])
    print("best wrong cosine p50/p90:", result["wrong_best_pcts"])
    for t, row in result["thresholds"].items():
        print(
            f"threshold {t}: right kept {row['right kept']:.2f}, wrong over it per query "
            f"{row['wrong per query']:.1f}, unrelated pairs over it "
            f"{row['unrelated pairs over']:.3f}"
        )
    for label, row in result["production"].items():
        print(f"production rank() recall@8 [{label}]:", {k: round(v, 3) for k, v in row.items()})
    if timing:
        print("latency:", {k: round(v, 2) for k, v in timing.items()})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument(
        "--embedder", choices=("embedded", "minilm", "wordllama"), default="embedded"
    )
    args = parser.parse_args()
    result = quality(args.embedder)
    timing = None
    if not args.skip_latency:
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite+aiosqlite:///{Path(tmp) / 'mem.db'}"
            run_migrations(url)
            timing = asyncio.run(latency(url, args.memories, args.queries, args.embedder))
    report(result, timing)


if __name__ == "__main__":
    main()
