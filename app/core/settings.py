"""Settings: environment variables prefixed CONTEXTGATE_, also read from `.env`."""

from __future__ import annotations

import string
from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy.engine import make_url

__all__ = ["MEMORY_TEMPLATE_FIELDS", "Settings", "SettingsError", "load_settings"]

# The fields CONTEXTGATE_MEMORY_TEMPLATE may use (app/memories/template.py fills them).
MEMORY_TEMPLATE_FIELDS = frozenset({"type", "importance", "age", "content", "key", "date"})


class SettingsError(Exception):
    """A setting has a bad value; the message is one line a person can act on."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="CONTEXTGATE_",
        env_file=".env",
        env_file_encoding="utf-8",
        env_ignore_empty=True,
        extra="ignore",
        frozen=True,
    )

    # --- storage -------------------------------------------------------------------------
    database_url: str = "sqlite+aiosqlite:///./contextgate.db"
    redis_url: str | None = None
    db_pool_size: int = Field(10, ge=1, le=200)
    sqlite_busy_timeout_ms: int = Field(30_000, ge=0)

    # --- routing -------------------------------------------------------------------------
    config: Path | None = None
    upstream_base_url: str | None = None
    upstream_api_key: SecretStr | None = None
    planner_model: str = "gpt-4o-mini"
    summarizer_model: str = "gpt-4o-mini"
    embedding_model: str | None = None

    # --- auth ----------------------------------------------------------------------------
    master_key: SecretStr | None = None
    # Seals what contextgate hands clients to send back (Responses' `compaction` items). Unset:
    # derived from the master key (else from the database URL: set one of them in production,
    # the same on every replica).
    secret_key: SecretStr | None = None
    # Failed-auth throttling per client address (/v1 and /ui/login); 0 turns it off.
    auth_max_failures: int = Field(20, ge=0)
    auth_failure_window_s: float = Field(60.0, gt=0)
    # How long an inspector (/ui) session cookie lasts.
    ui_session_ttl_s: int = Field(8 * 3600, ge=60)

    # --- upstream calls ------------------------------------------------------------------
    request_timeout_s: float = Field(600.0, gt=0)
    connect_timeout_s: float = Field(10.0, gt=0)
    max_retries: int = Field(2, ge=0, le=10)
    retry_backoff_s: float = Field(0.5, ge=0)
    retry_max_backoff_s: float = Field(8.0, ge=0)
    # Streams: how long the first token may take (retries and fallbacks apply until then).
    first_token_timeout_s: float = Field(120.0, gt=0)
    # "auto": plain OpenAI-compatible deployments (openai/<name> with an api_base) are called
    # over contextgate's own pooled HTTP client, everything else through litellm;
    # "litellm": every call goes through litellm.acompletion.
    upstream_transport: Literal["auto", "litellm"] = "auto"

    # --- input limits (413 / 400 before anything is stored) ------------------------------
    max_body_bytes: int = Field(32 * 1024 * 1024, ge=1024)
    max_messages: int = Field(4096, ge=1)
    max_attachments: int = Field(64, ge=0)
    max_attachment_chars: int = Field(4_000_000, ge=1)
    # One message's text (content, tool call arguments): 413 past it.
    max_message_chars: int = Field(4_000_000, ge=1)
    max_tools: int = Field(256, ge=0)
    # How deep a JSON body may nest (400 json_too_deep past it): below every serializer's limit.
    max_json_depth: int = Field(64, ge=8, le=200)
    # Budgeted keys: how long a request may wait for in-flight requests to release budget.
    budget_wait_s: float = Field(30.0, ge=0)
    # Per-tenant storage quotas (0: unlimited): bytes of stored attachments (413 past it) and
    # active long-term memories (429 past it; extraction stops storing, the turn goes on).
    tenant_max_attachment_bytes: int = Field(1024 * 1024 * 1024, ge=0)
    tenant_max_memories: int = Field(100_000, ge=0)

    # --- context budget ------------------------------------------------------------------
    default_context_window: int = Field(8192, ge=256)
    output_reserve_tokens: int = Field(1024, ge=0)
    safety_margin_ratio: float = Field(0.05, ge=0, lt=0.5)
    history_trim_chunk_tokens: int = Field(1024, ge=1)

    # --- cache-aware fit (context.cache; app/context/cache_fit.py) ------------------------
    # While the previous prompt plus the new messages fits (high_water_ratio x budget), it is
    # sent unchanged; when not, old tool results are cleared in one batch (the newest
    # keep_tool_results stay raw, never less than clear_at_least_tokens at once, exclude_tools
    # never) and the history is cut down to low_water_ratio x budget. Defaults from
    # bench/agent_loop.py (bench/README.md, "Agent loop").
    cache_enabled: bool = True
    cache_high_water_ratio: float = Field(0.75, gt=0, le=1)
    cache_low_water_ratio: float = Field(0.3, gt=0, le=1)
    # 1: at a rebase only the newest tool result stays raw (a coding agent's loop of 40 reads
    # keeps its prefix on 80% of calls against 72% with 2: bench/README "Agent loop").
    cache_keep_tool_results: int = Field(1, ge=0)
    cache_clear_at_least_tokens: int = Field(4000, ge=0)
    # An older turn keeps its frozen per-turn block (memories, date, recalled messages) when it
    # is at least this many times the block's size (app/turns/frozen.py).
    cache_block_keep_turn_ratio: float = Field(2.0, ge=0.0)
    cache_exclude_tools: list[str] = Field(default_factory=list)
    # cache_control breakpoints on the stable prefix for Anthropic models (client's kept).
    cache_hints: bool = True

    # --- memory --------------------------------------------------------------------------
    # Compaction: after a response whose reported prompt tokens exceed ratio x input budget
    # (per model in compaction_ratio_by_model, per request in context.compaction_ratio).
    compaction_ratio: float = Field(0.8, gt=0, le=1)
    compaction_ratio_by_model: dict[str, float] = Field(default_factory=dict)
    raw_tail_turns: int = Field(4, ge=0)
    # Share of the input budget the memory bundle (episodic summaries + facts) may take.
    summary_budget_share: float = Field(0.25, gt=0, lt=1)
    summarizer_max_input_tokens: int = Field(6000, ge=256)
    compaction_max_calls: int = Field(3, ge=1, le=20)
    compaction_lock_timeout_s: float = Field(60.0, gt=0)
    summarizer_timeout_s: float = Field(120.0, gt=0)
    # Long-term memory per user.
    memory_extraction_mode: Literal["every_turn", "periodic", "on_save", "llm_triggered", "off"] = (
        "periodic"
    )
    memory_extraction_every: int = Field(5, ge=1)
    memory_top_k: int = Field(8, ge=1, le=100)
    memory_token_cap: int = Field(500, ge=1)
    memory_min_score: float = Field(0.05, ge=0)
    memory_half_life_days: float = Field(90.0, gt=0)
    memory_dedupe_similarity: float = Field(0.85, gt=0, le=1)
    # Periodic summaries every N message pairs (0: off), beside compaction under pressure.
    summary_every_pairs: int = Field(10, ge=0)
    # One injected memory; fields {type} {importance} {age} {content} {key} {date}.
    memory_template: str = Field("[{type}, importance {importance}, {age}] {content}", min_length=1)
    # "[CONTEXT: <date and time>]" before the newest user message on every request.
    date_prefix: bool = False
    # llm_triggered extraction: the most rounds of `remember` calls handled per request.
    remember_max_rounds: int = Field(3, ge=1, le=10)
    # Semantic retrieval and message recall (app/embedders/, memories/retrieval.py, recall/).
    # "embedded" (default): an offline model shipped in a package, MiniLM when its weights are
    # installed, else WordLlama; "minilm" / "wordllama": that one; "bm25": lexical only, no
    # embeddings. CONTEXTGATE_EMBEDDING_MODEL, when set, replaces the embedded model (litellm).
    embedder: Literal["embedded", "minilm", "wordllama", "bm25"] = "embedded"
    # Minimum cosine for a semantic match; unset: the embedder's calibrated value.
    memory_min_similarity: float | None = Field(None, ge=-1, le=1)
    message_recall: bool = True
    recall_top_k: int = Field(4, ge=1, le=50)
    recall_token_cap: int = Field(400, ge=0)
    recall_max_chars: int = Field(600, ge=50)
    # A cleared tool result is long, noisy text that resembles most questions about the same
    # code a little: it comes back only this far above the embedder's minimum similarity.
    recall_tool_similarity_margin: float = Field(0.15, ge=0.0, le=1.0)
    # Below this many vectors in the conversation, the user's other conversations are searched.
    recall_cross_session_below: int = Field(50, ge=0)

    # --- context engine ---
    # When to ask the planner model (the design's table; see app/context/decision.py).
    planning_min_total_chars: int = Field(5_000, ge=0)
    planning_large_artifact_chars: int = Field(10_000, ge=0)
    planning_fit_buffer_ratio: float = Field(0.30, ge=0)
    # A primary model is "expensive" at or above this input price (USD per token).
    expensive_input_cost_per_token: float = Field(0.00001, ge=0)
    planner_timeout_s: float = Field(20.0, gt=0)
    planner_preview_chars: int = Field(1200, ge=100)
    # Share of the room (budget - system - current turn) artifacts may take from history.
    artifact_min_share: float = Field(0.5, ge=0, le=1)
    historical_turns: int = Field(3, ge=0)
    max_summaries_per_request: int = Field(8, ge=0)
    summary_concurrency: int = Field(4, ge=1)
    summary_max_tokens: int = Field(400, ge=32)
    artifact_summary_timeout_s: float = Field(60.0, gt=0)
    max_attachment_bytes: int = Field(10 * 1024 * 1024, ge=1)
    summary_cache_max_entries: int = Field(2048, ge=1)
    summary_cache_max_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    summary_cache_ttl_s: int = Field(7 * 24 * 3600, ge=1)

    # --- doors ---------------------------------------------------------------------------
    # POST /v1/responses with `store: false` (Codex sends it on every call): "manage" (the
    # default: a client pointed at a context-managing gateway wants its context managed) stores
    # the conversation and manages its context like any other, but keeps no response object to
    # retrieve or continue; "passthrough" keeps nothing and manages nothing, as OpenAI's word
    # says (for operators who must honour `store: false` strictly).
    responses_store_false: Literal["passthrough", "manage"] = "manage"
    # POST /v1/responses on OpenAI's own Responses API (app/llm/native_responses.py): "auto"
    # for openai/azure deployments on the provider's own API and model_list entries with
    # model_info.responses_api: true; "always" also for OpenAI-compatible servers (an
    # api_base, CONTEXTGATE_UPSTREAM_BASE_URL), falling back to the chat form on their 404;
    # "off": every model through the chat form. model_info.responses_api: false always wins.
    responses_native: Literal["auto", "always", "off"] = "auto"

    # --- server --------------------------------------------------------------------------
    # `contextgate serve --demo`: mount the built-in offline demo model at /demo/v1.
    demo: bool = False
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    @field_validator("database_url")
    @classmethod
    def _async_driver(cls, value: str) -> str:
        if value.startswith(("sqlite:", "sqlite+pysqlite:")):
            raise ValueError("use an async driver, e.g. sqlite+aiosqlite:///./contextgate.db")
        if value.startswith(("postgres://", "postgresql://", "postgresql+psycopg2://")):
            raise ValueError("use an async driver, e.g. postgresql+asyncpg://user:pw@host/db")
        if "://" not in value:
            raise ValueError("expected an SQLAlchemy URL such as sqlite+aiosqlite:///./x.db")
        try:
            dialect = make_url(value).get_dialect()
        except Exception as exc:  # unknown dialect or driver, malformed URL
            raise ValueError(f"not a usable SQLAlchemy URL ({exc})") from None
        if not getattr(dialect, "is_async", False):
            raise ValueError(f"'{dialect.driver}' is not an async driver; use aiosqlite or asyncpg")
        return value

    @field_validator("memory_template")
    @classmethod
    def _known_template_fields(cls, value: str) -> str:
        for _, name, _, _ in string.Formatter().parse(value):
            if name is not None and name not in MEMORY_TEMPLATE_FIELDS:
                known = " ".join("{" + f + "}" for f in sorted(MEMORY_TEMPLATE_FIELDS))
                raise ValueError(f"unknown field {{{name}}}; known: {known}")
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: object) -> object:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("expected redis://host:port/db, rediss://… or unix://…")
        return value

    @field_validator("upstream_base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("expected an http(s):// URL such as http://127.0.0.1:11434/v1")
        return value.rstrip("/") if value else value

    @field_validator("config")
    @classmethod
    def _config_exists(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"no such file: {value}")
        return value

    @cached_property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")


def load_settings(**overrides: object) -> Settings:
    """Build settings, turning a validation error into one clear line."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        name = "_".join(str(part) for part in first["loc"]).upper()
        message = first["msg"].removeprefix("Value error, ")
        raise SettingsError(f"invalid setting CONTEXTGATE_{name}: {message}") from None
