"""The Dockerfile and ``make image``.

* The Dockerfile is multi-stage: the runtime stage only copies the built environment from the
  build stage (no RUN), runs as a numeric non-root user that is the one the manifests ask for,
  writes no bytecode (the build stage compiles it) and copies every package whose ``python -m``
  entry point a manifest runs; those entry points exist.
* ``hack/image.sh`` (behind ``make image``) builds with the first builder that works, and with
  none says so and exits 0 (fake builders stand in: nothing is built here).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from gpustack_render.cli.yamlio import load_documents

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
IMAGE_SCRIPT = ROOT / "hack" / "image.sh"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def stages() -> list[list[tuple[str, str]]]:
    found: list[list[tuple[str, str]]] = []
    for instruction in instructions():
        if instruction[0] == "FROM":
            found.append([])
        if found:
            found[-1].append(instruction)
    return found


def manifest_commands() -> list[list[str]]:
    commands = []
    for path in sorted((ROOT / "deploy").glob("*/deployment.yaml")):
        for doc in load_documents(path.read_text()):
            for container in doc["spec"]["template"]["spec"]["containers"]:
                commands.append(list(container["command"]))
    return commands


def manifest_users() -> set[int]:
    users = set()
    for path in sorted((ROOT / "deploy").glob("*/deployment.yaml")):
        for doc in load_documents(path.read_text()):
            users.add(doc["spec"]["template"]["spec"]["securityContext"]["runAsUser"])
    return users


def test_multi_stage_with_a_copy_only_runtime() -> None:
    build, *_, runtime = stages()
    assert len(stages()) >= 2
    build_name = build[0][1].split()[-1]
    assert " AS " in build[0][1].upper()
    kinds = [word for word, _ in runtime]
    assert "RUN" not in kinds  # nothing installed or compiled in the runtime stage
    copies = [args for word, args in runtime if word == "COPY"]
    assert copies and all(args.startswith(f"--from={build_name} ") for args in copies)
    # Bytecode is compiled at build time, never written at run time (read-only root).
    assert any("compileall" in args for word, args in build if word == "RUN")
    env = " ".join(args for word, args in runtime if word == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env


def test_runs_as_the_non_root_user_the_manifests_name() -> None:
    *_, runtime = stages()
    users = [args for word, args in runtime if word == "USER"]
    assert users, "the runtime stage sets no USER"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) != 0  # numeric: runAsNonRoot can be checked
    assert not gid or (gid.isdigit() and int(gid) != 0)
    assert manifest_users() == {int(uid)}


def test_every_manifest_entry_point_is_in_the_image() -> None:
    build, *_ = stages()
    copied = " ".join(args for word, args in build if word == "COPY")
    commands = manifest_commands()
    modules = {cmd[2] for cmd in commands}
    assert modules == {"gpustack_controller", "gpustack_webhook"}
    for cmd in commands:
        assert cmd[:2] == ["python", "-m"], cmd
    for module in modules:
        assert (ROOT / module / "__main__.py").is_file(), module
        assert module in copied.split(), f"{module} is not copied into the image"
    assert "gpustack_render" in copied.split()  # the library both shells import
    assert "gpustack_kube" in copied.split()  # the client both shells import
    *_, runtime = stages()
    (cmd_line,) = [args for word, args in runtime if word == "CMD"]
    assert '"-m"' in cmd_line and any(f'"{m}"' in cmd_line for m in modules)


def test_dockerignore_lets_in_only_what_the_build_copies() -> None:
    lines = [ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines() if ln.strip()]
    allowed = {ln[1:].rstrip("/") for ln in lines if ln.startswith("!")}
    assert "*" in lines
    build, *_ = stages()
    for word, args in build:
        if word == "COPY" and not args.startswith("--from"):
            for source in args.split()[:-1]:
                assert source.rstrip("/") in allowed, source


def _fake(bin_dir: Path, name: str, script: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(0o755)


def _run_image_script(bin_dir: Path, builders: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "IMAGE_BUILDERS": builders,
        "HOME": str(bin_dir),
    }
    return subprocess.run(
        ["bash", str(IMAGE_SCRIPT)], env=env, capture_output=True, text=True, timeout=30
    )


def test_make_image_without_a_working_builder_says_so_and_exits_0(tmp_path: Path) -> None:
    log = tmp_path / "calls"
    # A docker client whose daemon is down, and no podman or buildah.
    _fake(tmp_path, "docker", f'echo "$@" >> {log}; [ "$1" = info ] && exit 1; exit 0')
    result = _run_image_script(tmp_path, "docker podman buildah")
    assert result.returncode == 0
    assert "no container builder available" in result.stderr
    assert "gpustack/gpustack-render:v" in result.stderr
    assert log.read_text().split() == ["info"]  # never asked to build


@pytest.mark.parametrize("builder", ["docker", "podman", "buildah"])
def test_make_image_builds_the_dockerfile_with_a_working_builder(
    tmp_path: Path, builder: str
) -> None:
    log = tmp_path / "calls"
    _fake(tmp_path, builder, f'echo "$@" >> {log}; exit 0')
    result = _run_image_script(tmp_path, builder)
    assert result.returncode == 0, result.stderr
    build_call = log.read_text().splitlines()[-1].split()
    version = re.search(r'^version = "(.+)"$', (ROOT / "pyproject.toml").read_text(), re.M)
    assert version
    assert build_call == [
        "build",
        "-t",
        f"gpustack/gpustack-render:v{version.group(1)}",
        "-f",
        str(DOCKERFILE),
        str(ROOT),
    ]


def test_the_makefile_has_an_image_target() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^image:.*##", makefile, re.M)
    assert "hack/image.sh" in makefile
    assert os.access(IMAGE_SCRIPT, os.X_OK)
