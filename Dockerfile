# syntax=docker/dockerfile:1
# One image for both shells of gpustack-render:
#   python -m gpustack_controller   the ModelDeployment controller (deploy/controller)
#   python -m gpustack_webhook      the admission webhook server   (deploy/webhook)
#   python -m gpustack_modelmanager the CSI node plugin            (deploy/model-manager)
# Build with `make image`. The runtime stage holds the base Python and one virtual environment
# with the project and its dependencies, compiled ahead of time: nothing is written at run time,
# so it runs with readOnlyRootFilesystem: true as the non-root user 65532 the manifests name.
ARG PYTHON_IMAGE=python:3.12-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/gpustack-render
COPY pyproject.toml README.md ./
COPY gpustack_render ./gpustack_render
COPY gpustack_kube ./gpustack_kube
COPY gpustack_controller ./gpustack_controller
COPY gpustack_webhook ./gpustack_webhook
COPY gpustack_modelmanager ./gpustack_modelmanager
# A wheel of the project (no editable install, no tests), then bytecode for everything in the
# environment so that a read-only root never needs a __pycache__ write (hash-based, unchecked:
# a layer that moves file times cannot make it stale; the same as make image-rootfs).
RUN /opt/gpustack-render/bin/pip install --no-compile . \
    && /opt/gpustack-render/bin/python -m compileall -q -j 0 --invalidation-mode unchecked-hash /opt/gpustack-render \
    && /opt/gpustack-render/bin/python -c "import gpustack_controller.__main__, gpustack_webhook.__main__, gpustack_modelmanager.__main__"

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="gpustack-render" \
      org.opencontainers.image.description="GPUStack ModelDeployment controller and admission webhook server" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/gpustack-render/bin:${PATH} \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /opt/gpustack-render /opt/gpustack-render
# Numeric, so the kubelet can check runAsNonRoot without a passwd lookup.
USER 65532:65532
WORKDIR /
# Controller health and metrics; webhook HTTPS; webhook probes and metrics.
EXPOSE 8081 9443 8080
CMD ["python", "-m", "gpustack_controller"]
