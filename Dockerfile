# syntax=docker/dockerfile:1
# contextgate: a slim, non-root image. Build: docker build -t contextgate .
# Run: docker run -p 8000:8000 -e CONTEXTGATE_MASTER_KEY=sk-… -v contextgate-data:/data contextgate

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH
RUN python -m venv /opt/venv
WORKDIR /app
# Dependencies first, in their own layer: rebuilt only when pyproject.toml changes.
COPY pyproject.toml README.md ./
COPY requirements/embedded-model.txt ./requirements/
RUN mkdir app && touch app/__init__.py \
    && pip install . \
    && pip install --no-deps --require-hashes -r requirements/embedded-model.txt \
    && pip uninstall -y contextgate \
    && rm -rf app build
# The project itself, installed in place so that alembic.ini and migrations/ sit next to app/
# (where `contextgate migrate` and `serve` look for them).
COPY app ./app
COPY alembic.ini ./
COPY migrations ./migrations
RUN pip install --no-deps -e . && python -m compileall -q app migrations

FROM python:3.11-slim
# Offline defaults (litellm's bundled cost map and tiktoken encodings: no downloads at start),
# and the embedded default database kept on the /data volume. (DL3064 reads "TOKEN" in
# TIKTOKEN_CACHE_DIR as a secret: it is a directory of public tokenizer files.)
# hadolint ignore=DL3064
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True \
    LITELLM_LOG=ERROR \
    TIKTOKEN_CACHE_DIR=/opt/venv/lib/python3.11/site-packages/litellm/litellm_core_utils/tokenizers \
    CONTEXTGATE_DATABASE_URL=sqlite+aiosqlite:////data/contextgate.db
RUN groupadd --system --gid 10001 contextgate \
    && useradd --system --uid 10001 --gid contextgate --home-dir /app --shell /usr/sbin/nologin contextgate \
    && mkdir -p /data \
    && chown contextgate:contextgate /data
COPY --from=build /opt/venv /opt/venv
COPY --from=build /app /app
WORKDIR /app
USER 10001:10001
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=3).status == 200 else 1)"]
# serve applies migrations first. Several workers: add "--workers", "4" (metrics stay summed).
CMD ["contextgate", "serve", "--host", "0.0.0.0", "--port", "8000"]
