"""The Elastic EP example (examples/elastic/): it renders, and admission admits it.

It lives in a subdirectory, out of the top-level examples ``make cluster-demo`` applies and
waits for (their counts are pinned by tests/integration/test_make_cluster.py);
test_examples_render.py renders the top-level examples only.
"""

from __future__ import annotations

import io
from pathlib import Path

from gpustack_render.cli.parser import build_parser
from gpustack_render.cli.verbs import admit
from gpustack_render.cli.verbs import render as render_verb
from gpustack_render.cli.yamlio import load_documents

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "elastic" / "deepseek-elastic.yaml"


def test_the_example_opens_with_a_comment_and_is_not_top_level() -> None:
    assert EXAMPLE.read_text().startswith("#")
    assert EXAMPLE.parent.name == "elastic"


def test_the_example_renders_its_members_and_head() -> None:
    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args(["render", "--validate=ignore", str(EXAMPLE)])
    assert render_verb.run(args, out, err) == 0, err.getvalue()
    objects = load_documents(out.getvalue())
    pods = [o for o in objects if o["kind"] == "Pod"]
    components = [p["metadata"]["labels"]["app.kubernetes.io/component"] for p in pods]
    assert components == ["server"] * 4 + ["deepseek-elastic-elastic-head"]
    services = [o["metadata"]["name"] for o in objects if o["kind"] == "Service"]
    assert services == [
        "deepseek-elastic",
        "deepseek-elastic-server",
        "deepseek-elastic-elastic-head",
    ]


def test_admission_admits_it_as_it_stands() -> None:
    verdict, _ = admit.admit_review([str(EXAMPLE)], old_file=None, operation=None)
    causes = [(e.origin, e.field) for e in verdict.errors]
    assert verdict.allowed, causes
