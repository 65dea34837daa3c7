"""Run contextgate on LongMemEval or LoCoMo against a real provider.

    # a contextgate server configured for your provider, e.g.
    CONTEXTGATE_UPSTREAM_BASE_URL=https://api.openai.com/v1 CONTEXTGATE_UPSTREAM_API_KEY=sk-… \\
        .venv/bin/contextgate serve --port 8000 &
    .venv/bin/python -m bench.longmem --data longmemeval_s.json --model gpt-4o-mini \\
        [--format longmemeval|locomo] [--budget 8000] [--limit 50] [--judge-model gpt-4o] \\
        [--base-url http://127.0.0.1:8000/v1] [--api-key sk-…] [--out results.jsonl] \\
        [--report report.json] [--run-id NAME]

Each instance becomes ONE conversation of its own ``user`` (``bench-<run id>-<instance id>``,
so a second run against the same server starts from nothing): every session is replayed as one
request (its turns as messages, dated, answered with ``max_tokens`` 1 so ingestion costs one
short call per session; memories are extracted from every session), then the question is asked
with the instance's date at a fixed input budget (``--budget``), memory extraction off. What the
answer can use is what contextgate brings back: the raw tail, compaction summaries, long-term
memories extracted along the way, and recalled messages. A LoCoMo sample's questions are asked
one after another in its conversation (contextgate cannot fork one), so each question sees the
earlier questions and answers in its history. Accuracy is judged by ``--judge-model`` (yes/no,
LongMemEval's protocol) or, without one, by the normalized gold answer appearing in the
response. A request that fails (e.g. a session whose last message alone exceeds the budget) is
reported and counted, and the run goes on; a failed question counts as wrong. Prints accuracy
per question type / category, writes one JSON line per question (``--out``) and the summary as
JSON (``--report``).

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
import sys
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["Instance", "RunResult", "load_instances", "main", "run"]


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
    items = json.loads(path.read_text(encoding="utf-8"))
    if data_format == "auto":
        data_format = "locomo" if items and "conversation" in items[0] else "longmemeval"
    reader = _locomo if data_format == "locomo" else _longmemeval
    return list(reader(items))


def _normalize(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def _merge_roles(turns: list[dict[str, str]], date: str) -> list[dict[str, str]]:
    """Alternating user/assistant messages starting and ending with a user one (dated), as chat
    needs: the conversation stored so far ends with an assistant answer, so a session opened by
    the other speaker (LoCoMo's speaker_b) gets a user message carrying its date first."""
    merged: list[dict[str, str]] = []
    if turns and turns[0]["role"] == "assistant":
        merged.append({"role": "user", "content": "(a new session begins)"})
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


@dataclass(slots=True)
class RunResult:
    scores: dict[str, list[bool]] = field(default_factory=lambda: defaultdict(list))
    sessions: int = 0
    session_errors: list[str] = field(default_factory=list)
    question_errors: int = 0

    def report(self) -> dict[str, Any]:
        total = [c for v in self.scores.values() for c in v]
        return {
            "questions": len(total),
            "correct": sum(total),
            "accuracy": sum(total) / len(total) if total else None,
            "by_kind": {
                kind: {"questions": len(v), "correct": sum(v), "accuracy": sum(v) / len(v)}
                for kind, v in sorted(self.scores.items())
            },
            "sessions_replayed": self.sessions,
            "sessions_failed": len(self.session_errors),
            "questions_failed": self.question_errors,
        }


def _error_text(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


def run(args: argparse.Namespace) -> RunResult:
    from openai import APIError, OpenAI

    client = OpenAI(base_url=args.base_url, api_key=args.api_key, timeout=600)
    instances = load_instances(Path(args.data), args.format)[: args.limit or None]
    result = RunResult()
    out = Path(args.out).open("w", encoding="utf-8") if args.out else None
    ingest = {"max_input_tokens": args.budget, "memory_extraction": "every_turn"}
    # The questions (and the answers) must not become memories of the conversation.
    ask = {"max_input_tokens": args.budget, "memory_extraction": "off"}
    try:
        for number, instance in enumerate(instances, 1):
            user = f"bench-{args.run_id}-{instance.id}"
            conversation_id: str | None = None
            started = time.perf_counter()
            for index, (date, turns) in enumerate(instance.sessions, 1):
                body: dict[str, Any] = {"context": ingest}
                if conversation_id:
                    body["conversation_id"] = conversation_id
                try:
                    reply = client.chat.completions.create(
                        model=args.model,
                        messages=_merge_roles(turns, date),  # type: ignore[arg-type]
                        max_tokens=1,
                        user=user,
                        extra_body=body,
                    )
                except APIError as exc:
                    failure = f"{instance.id} session {index}: {_error_text(exc)}"
                    result.session_errors.append(failure)
                    print(f"  session failed, skipped: {failure}", file=sys.stderr)
                    continue
                result.sessions += 1
                conversation_id = (reply.model_extra or {}).get("conversation_id") or (
                    conversation_id
                )
            # Sessions are days apart in the data: let the work contextgate does after an
            # answer (message vectors, memory extraction) finish before the questions.
            time.sleep(args.settle)
            for question, gold, date, kind in instance.questions:
                text = f"[today: {date}] {question}" if date else question
                body = {"context": ask}
                if conversation_id:
                    body["conversation_id"] = conversation_id
                answer = ""
                error: str | None = None
                utilization: dict[str, Any] = {}
                try:
                    reply = client.chat.completions.create(
                        model=args.model,
                        messages=[{"role": "user", "content": text}],
                        user=user,
                        extra_body=body,
                    )
                    answer = reply.choices[0].message.content or ""
                    utilization = (reply.model_extra or {}).get("context_utilization") or {}
                    if args.judge_model:
                        correct = _judge(client, args.judge_model, question, gold, answer)
                    else:
                        correct = _normalize(gold) in _normalize(answer)
                except APIError as exc:
                    error, correct = _error_text(exc), False
                    result.question_errors += 1
                    print(f"  question failed: {instance.id}: {error}", file=sys.stderr)
                result.scores[kind].append(correct)
                if out:
                    line = {
                        "id": instance.id,
                        "conversation_id": conversation_id,
                        "kind": kind,
                        "question": question,
                        "gold": gold,
                        "answer": answer,
                        "correct": correct,
                        "error": error,
                        "messages_recalled": len(utilization.get("messages_recalled") or []),
                        "memories_injected": len(utilization.get("memories_injected") or []),
                        "prompt_tokens": utilization.get("tokens_used"),
                    }
                    out.write(json.dumps(line) + "\n")
                    out.flush()
            elapsed = time.perf_counter() - started
            done = sum(len(v) for v in result.scores.values())
            right = sum(sum(v) for v in result.scores.values())
            progress = f"[{number}/{len(instances)}] {instance.id}: {right}/{done} so far"
            print(f"{progress} ({elapsed:.0f} s)")
    finally:
        if out:
            out.close()
    return result


def main(argv: Sequence[str] | None = None) -> None:
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
    parser.add_argument("--report", default=None, help="the summary below, as a JSON file")
    parser.add_argument(
        "--settle",
        type=float,
        default=1.0,
        help="seconds between an instance's last session and its questions, for the background "
        "work after an answer (message vectors, memory extraction) to finish",
    )
    parser.add_argument(
        "--run-id",
        default=None,
        help="names this run's users (bench-<run id>-<instance>); default: the start time",
    )
    args = parser.parse_args(argv)
    started = datetime.now(UTC)
    if not args.run_id:
        args.run_id = started.strftime("%Y%m%dT%H%M%S")
    clock = time.perf_counter()
    result = run(args)
    report = result.report()
    for kind, values in report["by_kind"].items():
        print(f"{kind}: {values['correct']}/{values['questions']} = {values['accuracy']:.1%}")
    if report["questions"]:
        print(f"overall: {report['correct']}/{report['questions']} = {report['accuracy']:.1%}")
    if result.session_errors or result.question_errors:
        print(
            f"failed requests: {len(result.session_errors)} sessions, "
            f"{result.question_errors} questions"
        )
    if args.report:
        report.update(
            {
                "data": str(args.data),
                "format": args.format,
                "model": args.model,
                "judge_model": args.judge_model,
                "budget": args.budget,
                "run_id": args.run_id,
                "started_utc": started.isoformat(timespec="seconds"),
                "elapsed_s": round(time.perf_counter() - clock, 1),
                "session_errors": result.session_errors,
            }
        )
        Path(args.report).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
