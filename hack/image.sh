#!/usr/bin/env bash
# `make image`: build the Dockerfile with the first container builder that works here
# (docker with a reachable daemon, podman, buildah). Without one, say so and exit 0: nothing is
# built, and nothing else is tried (no registry is contacted but the builder's own base pull).
#
# Environment:
#   IMAGE           tag to build (default gpustack/gpustack-render:v<version of pyproject.toml>)
#   IMAGE_BUILDERS  candidates, in order (default "docker podman buildah")
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "${root}/pyproject.toml" | head -n 1)"
image="${IMAGE:-gpustack/gpustack-render:v${version}}"

usable() { # <builder>
    command -v "$1" >/dev/null 2>&1 || return 1
    case "$1" in
        docker) docker info >/dev/null 2>&1 ;;   # the client alone cannot build
        podman) podman info >/dev/null 2>&1 ;;
        buildah) buildah version >/dev/null 2>&1 ;;
        *) return 1 ;;
    esac
}

for builder in ${IMAGE_BUILDERS:-docker podman buildah}; do
    if usable "${builder}"; then
        echo "make image: building ${image} with ${builder}" >&2
        case "${builder}" in
            buildah) exec buildah build -t "${image}" -f "${root}/Dockerfile" "${root}" ;;
            *) exec "${builder}" build -t "${image}" -f "${root}/Dockerfile" "${root}" ;;
        esac
    fi
done
echo "make image: no container builder available (docker with a running daemon, podman or" \
    "buildah); ${image} was not built. Install one and run make image again." >&2
exit 0
