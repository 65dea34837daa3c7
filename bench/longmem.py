"""Run contextgate on LongMemEval or LoCoMo against a real provider.

    # a contextgate server configured for your provider, e.g.
    CONTEXTGATE_UPSTREAM_BASE_URL=https://api.openai.com/v1 CONTEXTGATE_UPSTREAM_API_KEY=sk-… \\
        .venv/bin/contextgate serve --port 8000 &
    .venv/bin/python -m bench.longmem --data longmemeval_s.json --model gpt-4o-mini \\
        [--format longmemeval|locomo] [--budget 8000] [--limit 50] [--judge-model gpt-4o] \\
        [--base-url http://127.0.0.1:8000/v1] [--api-key sk-…] [--out results.jsonl]

Each instance becomes ONE conversation of its own ``user``: every session is replayed as one
request (its turns as messages, dated, answered with ``max_tokens`` 1 so ingestion costs one
short call per session), then the question is asked with the instance's date at a fixed input
budget (``--budget``). What the answer can use is what contextgate brings back: the raw tail,
compaction summaries, long-term memories extracted along the way, and recalled messages.
Accuracy is judged by ``--judge-model`` (yes/no, LongMemEval's protocol) or, without one, by the
normalized gold answer appearing in the response. Prints accuracy per question type / category
and writes one JSON line per question.

Data: LongMemEval (https://github.com/xiaowu0162/LongMemEval: ``longmemeval_s.json``, a list
of {question_id, question_type, question, answer, question_date, haystack_dates,
haystack_sessions: [[{role, content}]]}) or LoCoMo (https://github.com/snap-research/locomo:
``locomo10.json``, a list of {sample_id, conversation: {speaker_a, speaker_b, session_N,
session_N_date_time}, qa: [{question, answer, category}]}).
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Instance", "load_instances", "main"]


@dataclass(slots=True)
class Instance:
    id: str
    sessions: list[tuple[str, list[dict[str, str]]]]  # (date, [{role, content}])
    # (question, gold answer, date, kind: question type (LongMemEval) or category (LoCoMo))
    questions: list[tuple[str, str, str, str]]


def _longmemeval(items: list[dict[str, Any]]) -> Iterator[Instance]:
    for item in items:
        dates = item.get("haystack_dates") or [""] * len(item["haystack_sessions"])
        sessions = [
            (str(date), [{"role": t["role"], "content": str(t["content"])} for t in turns])
            for date, turns in zip(dates, item["haystack_sessions"], strict=False)
        ]
        question = (
            str(item["question"]),
            str(item["answer"]),
            str(item.get("question_date", "")),
            str(item.get("question_type", "all")),
        )
        yield Instance(str(item["question_id"]), sessions, [question])


def _locomo(items: list[dict[str, Any]]) -> Iterator[Instance]:
    for item in items:
        talk = item["conversation"]
        speaker_a = talk.get("speaker_a")
        numbers = sorted(
            int(m.group(1)) for key in talk if (m := re.fullmatch(r"session_(\d+)", key))
        )
        sessions = []
        for n in numbers:
            turns = [
                {
                    "role": "user" if turn.get("speaker") == speaker_a else "assistant",
                    "content": f"{turn.get('speaker')}: {turn.get('text', '')}",
                }
                for turn in talk[f"session_{n}"]
            ]
            sessions.append((str(talk.get(f"session_{n}_date_time", "")), turns))
        questions = [
            (
                str(q["question"]),
                str(q.get("answer", q.get("adversarial_answer", ""))),
                "",
                f"category {q.get('category', 'all')}",
            )
            for q in item["qa"]
        ]
        yield Instance(str(item.get("sample_id", "locomo")), sessions, questions)


def load_instances(path: Path, data_format: str) -> list[Instance]:
    items = json.loads(path.read_text())
    if data_format == "auto":
        data_format = "locomo" if items and "conversation" in items[0] else "longmemeval"
    reader = _locomo if data_format == "locomo" else _longmemeval
    return list(reader(items))


def _normalize(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def _merge_roles(turns: list[dict[str, str]], date: str) -> list[dict[str, str]]:
    """Alternating user/assistant messages ending with a user one (dated), as chat needs."""
    merged: list[dict[str, str]] = []
    for turn in turns:
        role = "assistant" if turn["role"] == "assistant" else "user"
        if merged and merged[-1]["role"] == role:
            merged[-1]["content"] += "\n" + turn["content"]
        else:
            merged.append({"role": role, "content": turn["content"]})
    if not merged or merged[-1]["role"] != "user":
        merged.append({"role": "user", "content": "(end of this session)"})
    if date:
        merged[0]["content"] = f"[session date: {date}] " + merged[0]["content"]
    return merged


def _judge(client: Any, model: str, question: str, gold: str, answer: str) -> bool:
    prompt = (
        "I will give you a question, a correct answer, and a response from a model. Answer yes "
        "if the response contains the correct answer or is equivalent to it, otherwise no.\n\n"
        f"Question: {question}\nCorrect answer: {gold}\nModel response: {answer}\n\n"
        "Is the model response correct? Answer yes or no only."
    )
    reply = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": prompt}],
        max_tokens=5,
        temperature=0,
        extra_body={"context": {"enabled": False}},
    )
    return "yes" in (reply.choices[0].message.content or "").lower()


def run(args: argparse.Namespace) -> dict[str, list[bool]]:
    from openai import OpenAI

    client = OpenAI(base_url=args.base_url, api_key=args.api_key, timeout=600)
    instances = load_instances(Path(args.data), args.format)[: args.limit or None]
    scores: dict[str, list[bool]] = defaultdict(list)
    out = Path(args.out).open("w") if args.out else None
    context = {"max_input_tokens": args.budget, "memory_extraction": "every_turn"}
    for number, instance in enumerate(instances, 1):
        user = f"bench-{instance.id}"
        conversation_id: str | None = None
        started = time.perf_counter()
        for date, turns in instance.sessions:
            body: dict[str, Any] = {"context": context}
            if conversation_id:
                body["conversation_id"] = conversation_id
            reply = client.chat.completions.create(
                model=args.model,
                messages=_merge_roles(turns, date),  # type: ignore[arg-type]
                max_tokens=1,
                user=user,
                extra_body=body,
            )
            conversation_id = (
                reply.model_extra.get("conversation_id") if reply.model_extra else None
            )
        for question, gold, date, kind in instance.questions:
            text = f"[today: {date}] {question}" if date else question
            body = {"context": context, "conversation_id": conversation_id}
            reply = client.chat.completions.create(
                model=args.model,
                messages=[{"role": "user", "content": text}],
                user=user,
                extra_body=body,
            )
            answer = reply.choices[0].message.content or ""
            if args.judge_model:
                correct = _judge(client, args.judge_model, question, gold, answer)
            else:
                correct = _normalize(gold) in _normalize(answer)
            scores[kind].append(correct)
            utilization = (reply.model_extra or {}).get("context_utilization", {})
            if out:
                out.write(
                    json.dumps(
                        {
                            "id": instance.id,
                            "kind": kind,
                            "question": question,
                            "gold": gold,
                            "answer": answer,
                            "correct": correct,
                            "messages_recalled": len(utilization.get("messages_recalled", [])),
                            "memories_injected": len(utilization.get("memories_injected", [])),
                            "prompt_tokens": utilization.get("tokens_used"),
                        }
                    )
                    + "\n"
                )
        elapsed = time.perf_counter() - started
        done = sum(len(v) for v in scores.values())
        right = sum(sum(v) for v in scores.values())
        print(f"[{number}/{len(instances)}] {instance.id}: {right}/{done} so far ({elapsed:.0f} s)")
    if out:
        out.close()
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="LongMemEval or LoCoMo JSON file")
    parser.add_argument(
        "--model", required=True, help="the answering model, as contextgate routes it"
    )
    parser.add_argument("--format", choices=("auto", "longmemeval", "locomo"), default="auto")
    parser.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    parser.add_argument("--api-key", default="sk-contextgate")
    parser.add_argument("--budget", type=int, default=8000, help="context.max_input_tokens")
    parser.add_argument("--limit", type=int, default=0, help="first N instances only")
    parser.add_argument("--judge-model", default=None)
    parser.add_argument("--out", default=None, help="JSON lines, one per question")
    scores = run(parser.parse_args())
    total = [c for v in scores.values() for c in v]
    for kind, values in sorted(scores.items()):
        print(f"{kind}: {sum(values)}/{len(values)} = {sum(values) / len(values):.1%}")
    if total:
        print(f"overall: {sum(total)}/{len(total)} = {sum(total) / len(total):.1%}")


if __name__ == "__main__":
    main()
