# syntax=docker/dockerfile:1
# raybatch on Ray, for KubeRay (deploy/kuberay/) or `docker run`: the versions of uv.lock, the default
# extras (none: Tesseract and its models come with the default install), a user that is not root.
#
#   docker build -t raybatch:0.1.0 .                                  # amd64: Tesseract's wheel is x86-64
#   docker build --build-arg EXTRAS="vision" -t raybatch:0.1.0-vision .   # + Cloud Vision (or rapidocr)
#   docker run --rm --env-file raybatch.env raybatch:0.1.0 run s3://inbox/scans --store s3://raybatch/out
#
# Python and Ray are those of the cluster image (cluster.yaml: rayproject/ray:2.60.0-py311-cpu) and
# uv that of the Makefile; a test keeps the three in step.

FROM python:3.11-slim-bookworm AS build
COPY --from=ghcr.io/astral-sh/uv:0.13.9 /uv /usr/local/bin/uv
ENV UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never UV_PROJECT_ENVIRONMENT=/opt/raybatch
ARG EXTRAS=""
WORKDIR /src
# The dependencies first, from the lock alone: this layer is rebuilt only when uv.lock changes.
COPY pyproject.toml uv.lock ./
RUN uv sync --frozen --no-install-project --no-editable $(for e in $EXTRAS; do echo "--extra $e"; done)
COPY README.md LICENSE ./
COPY raybatch ./raybatch
RUN uv sync --frozen --no-editable $(for e in $EXTRAS; do echo "--extra $e"; done)

FROM python:3.11-slim-bookworm
# wget: KubeRay's health probes call the head's and workers' health endpoints with it.
RUN apt-get update \
    && apt-get install -y --no-install-recommends wget \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --uid 1000 --user-group --create-home --shell /bin/bash raybatch
COPY --from=build /opt/raybatch /opt/raybatch
COPY LICENSE /usr/share/doc/raybatch/LICENSE
ENV PATH=/opt/raybatch/bin:$PATH PYTHONUNBUFFERED=1 RAY_USAGE_STATS_ENABLED=0
# Numeric, so Kubernetes can check runAsNonRoot.
USER 1000:1000
WORKDIR /home/raybatch
ENTRYPOINT ["raybatch"]
CMD ["--help"]
