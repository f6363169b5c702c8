# syntax=docker/dockerfile:1
# One image, one build target per role (each with its own HEALTHCHECK):
#   docker build --target worker -t heartbeat-gateway:worker .
# The default target (the last stage) is the HTTP API.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- build: a virtual environment with the project and the PostgreSQL driver -------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/hbgw
COPY pyproject.toml README.md ./
# hbgw/ holds core, state and gateway and links the other layers in (hbgw/beat -> ../beat):
# the wheel follows the links.
COPY sessions sessions
COPY beat beat
COPY workers workers
COPY hbgw hbgw
COPY requirements.lock ./
# The build context has no .git, so the version (from git tags elsewhere) comes in as an
# argument: docker build --build-arg HBGW_VERSION="$(.venv/bin/hbgw --version | cut -d' ' -f2)" .
ARG HBGW_VERSION=0.0.0
# A regular (non-editable) install at the locked versions: the final image carries /opt/hbgw
# only, not /src.
RUN SETUPTOOLS_SCM_PRETEND_VERSION="${HBGW_VERSION}" \
    /opt/hbgw/bin/pip install --no-compile -c requirements.lock '.[postgres]' \
    && /opt/hbgw/bin/python -m compileall -q /opt/hbgw/lib \
    && /opt/hbgw/bin/python -m pip uninstall --yes --quiet pip

# --- base: no compilers, no pip cache, a non-root user, writable paths only under HBGW_HOME -----
FROM ${PYTHON_IMAGE} AS base
ENV PATH=/opt/hbgw/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HBGW_HOME=/var/lib/hbgw \
    HBGW_LOG_FORMAT=json
RUN groupadd --system --gid 10001 hbgw \
    && useradd --system --uid 10001 --gid hbgw --home-dir /var/lib/hbgw --no-create-home hbgw \
    && mkdir -p /var/lib/hbgw \
    && chown hbgw:hbgw /var/lib/hbgw
COPY --from=build /opt/hbgw /opt/hbgw
USER 10001:10001
WORKDIR /var/lib/hbgw
ENTRYPOINT ["hbgw"]

# --- migrate: one-shot schema upgrade, run before the other roles of a release ------------------
FROM base AS migrate
CMD ["migrate"]

# --- beat and worker: healthy while their /metrics endpoint answers -----------------------------
# /metrics listens on every address of the container (HBGW_METRICS_HOST defaults to loopback).
FROM base AS beat
ENV HBGW_METRICS_PORT=9100 HBGW_METRICS_HOST=0.0.0.0
EXPOSE 9100
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/metrics' % os.environ['HBGW_METRICS_PORT'], timeout=4)"]
CMD ["beat"]

FROM base AS worker
ENV HBGW_METRICS_PORT=9100 HBGW_METRICS_HOST=0.0.0.0
EXPOSE 9100
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/metrics' % os.environ['HBGW_METRICS_PORT'], timeout=4)"]
CMD ["worker"]

# --- flower: its /healthcheck stays open when basic auth guards the rest ------------------------
FROM base AS flower
EXPOSE 5555
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthcheck' % os.environ.get('HBGW_FLOWER_PORT', '5555'), timeout=4)"]
CMD ["flower", "--host", "0.0.0.0", "--port", "5555"]

# --- api (default): liveness is /healthz; /readyz also checks SQL, Redis and the schema ---------
FROM base AS api
EXPOSE 8780
HEALTHCHECK --interval=15s --timeout=5s --start-period=15s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('HBGW_API_PORT', '8780'), timeout=4)"]
CMD ["api", "--host", "0.0.0.0", "--port", "8780"]
