"""The real routers of the test extra (``vllm-router``, ``sglang-router``) are installed and accept
every flag the admission rules reserve for them (docs/contract/admission.md §7 rule 1), so a
command line synthesized from those flags names options the pinned router knows.

No API server is needed: each router's own ``--help`` is the evidence.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpustack_render.engines.owned import ROUTER_OWNED_ARGS, SGLANG_GATEWAY, VLLM_ROUTER

pytestmark = pytest.mark.integration

#: The console scripts sit beside the interpreter running the tests (the project's venv).
_BIN = Path(sys.executable).parent
#: The command each package installs and the arguments that print the router's own options
#: (``sglang-router`` takes a subcommand: ``launch`` starts the gateway alone).
_HELP: dict[str, tuple[str, ...]] = {
    VLLM_ROUTER: ("vllm-router", "--help"),
    SGLANG_GATEWAY: ("sglang-router", "launch", "--help"),
}
#: A long option as argparse prints it (``--host``, ``[--prefill-selector ...]``), whole.
_OPTION = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9-]*")


def _options(router: str) -> set[str]:
    command, *args = _HELP[router]
    result = subprocess.run(
        [str(_BIN / command), *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, f"{command} {' '.join(args)} failed:\n{result.stderr}"
    return set(_OPTION.findall(result.stdout))


@pytest.mark.parametrize("router", sorted(_HELP))
def test_router_accepts_every_owned_flag(router: str) -> None:
    options = _options(router)
    assert len(options) > 20, f"{router}: help printed no option list"
    missing = [flag for flag in ROUTER_OWNED_ARGS[router] if flag not in options]
    assert missing == [], f"{router} does not accept {missing}"


def test_sglang_gateway_has_no_kv_connector() -> None:
    # Why the gateway's owned list drops --kv-connector: the pinned gateway has no such flag.
    assert "--kv-connector" not in _options(SGLANG_GATEWAY)
    assert "--kv-connector" in _options(VLLM_ROUTER)
