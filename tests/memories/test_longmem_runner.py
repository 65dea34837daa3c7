"""bench/longmem.py (the LongMemEval / LoCoMo runner) end to end, without a real model: tiny
files in each format, ``python -m bench.longmem`` against a real ``contextgate serve`` that
forwards to the fake upstream. The runner must load both formats, replay every session as one
dated request of the instance's user, ask each question in that conversation, judge it, and write
its JSON lines and its report."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from bench.longmem import load_instances
from tests.fake_upstream import FakeUpstream
from tests.support.proxy import REPO, ContextgateServer

FILLER = " ".join(f"filler{i}" for i in range(60))

LONGMEMEVAL = [
    {
        "question_id": "gpt4_q1",
        "question_type": "single-session-user",
        "question": "What colour is my bicycle?",
        "answer": "teal",
        "question_date": "2023/05/30 (Tue) 10:00",
        "haystack_session_ids": ["s1", "s2", "s3", "s4"],
        "haystack_dates": [
            "2023/05/20 (Sat) 09:00",
            "2023/05/21 (Sun) 18:30",
            "2023/05/22 (Mon) 08:15",
            "2023/05/23 (Tue) 12:00",
        ],
        "haystack_sessions": [
            [
                {
                    "role": "user",
                    "content": "I just bought a teal bicycle for commuting.",
                    "has_answer": True,
                },
                {"role": "assistant", "content": "Nice choice for commuting!"},
            ],
            [
                {"role": "user", "content": f"Summarise these notes: {FILLER}"},
                {"role": "assistant", "content": "Done."},
                {"role": "user", "content": "Thanks."},
            ],
            [
                {"role": "user", "content": f"Sort these words: {FILLER}"},
                {"role": "assistant", "content": "Sorted."},
            ],
            [
                {"role": "user", "content": f"Count these words: {FILLER}"},
                {"role": "assistant", "content": "Sixty."},
            ],
        ],
        "answer_session_ids": ["s1"],
    }
]

LOCOMO = [
    {
        "sample_id": "conv-1",
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Caroline", "dia_id": "D1:1", "text": "I went to a pottery class."},
                {"speaker": "Melanie", "dia_id": "D1:2", "text": "Fun! What did you make?"},
                {"speaker": "Caroline", "dia_id": "D1:3", "text": "A blue vase for my mum."},
            ],
            "session_2_date_time": "10:37 am on 27 June, 2023",
            "session_2": [
                {"speaker": "Melanie", "dia_id": "D2:1", "text": "I adopted a puppy, Oscar."},
                {"speaker": "Caroline", "dia_id": "D2:2", "text": "Congratulations!"},
            ],
        },
        "qa": [
            {
                "question": "What did Caroline make in pottery class?",
                "answer": "a blue vase",
                "evidence": ["D1:3"],
                "category": 1,
            },
            {
                "question": "When did Melanie adopt a puppy?",
                "answer": 2023,
                "evidence": ["D2:1"],
                "category": 2,
            },
            {
                "question": "What is Caroline's puppy called?",
                "adversarial_answer": "Oscar",
                "evidence": ["D2:1"],
                "category": 5,
            },
        ],
        "observation": {},
        "session_summary": {},
    }
]


def _write(tmp_path: Path, name: str, data: Any) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _runner(server: ContextgateServer, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "bench.longmem", "--base-url", server.base_url, *args]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _chats(fake: FakeUpstream, model: str) -> list[dict[str, Any]]:
    return [
        r["body"]
        for r in fake.requests()
        if r["path"].endswith("/chat/completions") and r["body"].get("model") == model
    ]


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_both_formats_load(tmp_path: Path) -> None:
    (lme,) = load_instances(_write(tmp_path, "lme.json", LONGMEMEVAL), "auto")
    assert lme.id == "gpt4_q1"
    assert [date for date, _ in lme.sessions][0] == "2023/05/20 (Sat) 09:00"
    assert len(lme.sessions) == 4
    assert lme.questions == [
        ("What colour is my bicycle?", "teal", "2023/05/30 (Tue) 10:00", "single-session-user")
    ]
    (locomo,) = load_instances(_write(tmp_path, "locomo.json", LOCOMO), "auto")
    assert locomo.id == "conv-1"
    assert [date for date, _ in locomo.sessions] == [
        "1:56 pm on 8 May, 2023",
        "10:37 am on 27 June, 2023",
    ]
    assert locomo.sessions[0][1][0] == {
        "role": "user",
        "content": "Caroline: I went to a pottery class.",
    }
    assert locomo.sessions[1][1][0]["role"] == "assistant"  # speaker_b
    assert [(q[1], q[3]) for q in locomo.questions] == [
        ("a blue vase", "category 1"),
        ("2023", "category 2"),
        ("Oscar", "category 5"),  # the adversarial answer
    ]


def test_longmemeval_runs_against_contextgate_and_writes_its_results(
    tmp_path: Path,
    fake_upstream: FakeUpstream,
    start_proxy: Callable[..., ContextgateServer],
) -> None:
    server = start_proxy()
    data = _write(tmp_path, "longmemeval_s.json", LONGMEMEVAL)
    out, report = tmp_path / "lme.jsonl", tmp_path / "lme-report.json"
    done = _runner(
        server,
        *("--data", str(data), "--model", "fake-model", "--budget", "300"),
        *("--out", str(out), "--report", str(report), "--run-id", "t1", "--settle", "3"),
    )

    chats = _chats(fake_upstream, "fake-model")
    replays = [c for c in chats if c.get("max_tokens") == 1]
    assert len(replays) == 4  # one request per session
    assert all(c["user"] == "bench-t1-gpt4_q1" for c in chats)
    first = replays[0]["messages"]
    assert first[0] == {
        "role": "user",
        "content": "[session date: 2023/05/20 (Sat) 09:00] I just bought a teal bicycle for "
        "commuting.",
    }
    assert [m["role"] for m in first] == ["user", "assistant", "user"]  # ends with a user turn
    question = [c for c in chats if c.get("max_tokens") is None]
    assert len(question) == 1
    asked = question[0]["messages"][-1]["content"]
    assert asked.endswith("[today: 2023/05/30 (Tue) 10:00] What colour is my bicycle?")
    # The budget cut the first session out of the history: recall brought it back.
    sent = [m["content"] for m in question[0]["messages"][:-1]]
    assert not any("teal bicycle" in text for text in sent)
    assert asked.startswith("[RECALLED")
    assert "teal bicycle" in asked

    (line,) = _lines(out)
    assert line["id"] == "gpt4_q1"
    assert line["kind"] == "single-session-user"
    assert line["gold"] == "teal"
    assert line["answer"].startswith("Echo: ")  # the fake upstream's answer
    assert line["error"] is None
    assert line["messages_recalled"] >= 1
    assert 0 < line["prompt_tokens"] <= 300
    assert isinstance(line["correct"], bool)
    assert line["conversation_id"]

    summary = json.loads(report.read_text(encoding="utf-8"))
    assert summary["questions"] == 1
    assert summary["sessions_replayed"] == 4
    assert summary["sessions_failed"] == summary["questions_failed"] == 0
    assert summary["model"] == "fake-model"
    assert summary["budget"] == 300
    assert set(summary["by_kind"]) == {"single-session-user"}
    assert "overall: " in done.stdout
    assert "single-session-user: " in done.stdout

    # The conversation holds every replayed message and the question, under that id.
    response = httpx.get(f"{server.base_url}/conversations/{line['conversation_id']}")
    assert response.status_code == 200, response.text
    detail = response.json()
    contents = [m["content"] for m in detail["messages"]]
    assert any("teal bicycle" in c for c in contents)
    assert contents[-2] == "[today: 2023/05/30 (Tue) 10:00] What colour is my bicycle?"


def test_locomo_runs_with_a_judge_and_counts_per_category(
    tmp_path: Path,
    fake_upstream: FakeUpstream,
    start_proxy: Callable[..., ContextgateServer],
) -> None:
    server = start_proxy()
    fake_upstream.script("fake-judge", ["yes", "no", "Yes."])
    data = _write(tmp_path, "locomo10.json", LOCOMO)
    out, report = tmp_path / "locomo.jsonl", tmp_path / "locomo-report.json"
    done = _runner(
        server,
        *("--data", str(data), "--model", "fake-model", "--judge-model", "fake-judge"),
        *("--out", str(out), "--report", str(report), "--run-id", "t2"),
    )

    chats = _chats(fake_upstream, "fake-model")
    replays = [c for c in chats if c.get("max_tokens") == 1]
    assert len(replays) == 2
    second = replays[1]["messages"]
    # Session 2 opens with speaker_b: a user message goes first, so roles keep alternating
    # after the stored answer of session 1.
    new = second[-3:]
    assert [m["role"] for m in new] == ["user", "assistant", "user"]
    assert new[0]["content"].startswith("[session date: 10:37 am on 27 June, 2023]")
    assert new[1]["content"] == "Melanie: I adopted a puppy, Oscar."
    assert new[2]["content"] == "Caroline: Congratulations!"
    questions = [c for c in chats if c.get("max_tokens") is None]
    assert [c["messages"][-1]["content"] for c in questions] == [
        "What did Caroline make in pottery class?",
        "When did Melanie adopt a puppy?",
        "What is Caroline's puppy called?",
    ]
    judged = _chats(fake_upstream, "fake-judge")
    assert len(judged) == 3
    assert "Correct answer: a blue vase" in judged[0]["messages"][0]["content"]
    assert "Correct answer: Oscar" in judged[2]["messages"][0]["content"]

    lines = _lines(out)
    assert [(x["kind"], x["correct"]) for x in lines] == [
        ("category 1", True),
        ("category 2", False),
        ("category 5", True),
    ]
    assert len({x["conversation_id"] for x in lines}) == 1  # one conversation per sample
    summary = json.loads(report.read_text(encoding="utf-8"))
    assert summary["questions"] == 3
    assert summary["correct"] == 2
    assert summary["sessions_replayed"] == 2
    assert summary["judge_model"] == "fake-judge"
    assert summary["by_kind"]["category 2"] == {"questions": 1, "correct": 0, "accuracy": 0.0}
    assert "overall: 2/3 = 66.7%" in done.stdout
