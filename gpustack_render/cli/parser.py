"""The command line's parser: the verbs, their flags and help, kubectl's conventions (``-f``
as a comma list, ``-n``, ``-o name``, ``--validate`` with its boolean spellings) and
``--version``. Building it imports no layer of the library; each verb's module does that when it
runs (gpustack_render.cli.verbs).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from gpustack_render.cli.exits import EXIT_OK, EXIT_USAGE
from gpustack_render.cli.output import Output

#: ``render --validate`` modes, as kubectl names them.
VALIDATE_MODES = ("strict", "warn", "ignore")
#: kubectl's older boolean spellings (``--validate=false`` is common in CI scripts), the
#: words Go's ``strconv.ParseBool`` reads: true is strict, false is ignore.
_VALIDATE_ALIASES = {
    **dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), "strict"),
    **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), "ignore"),
}


def _validate_mode(value: str) -> str:
    return _VALIDATE_ALIASES.get(value, value)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


class _VerbParser(_Parser):
    """A verb's parser: options and operands in any order, as kubectl takes them
    (``explain md/NAME -n NS edited.yaml``), and what it does not know refused with the verb's
    own usage.

    The top-level parser hands the verb everything after its name through
    ``parse_known_args``; argparse's default there stops filling ``PATH...`` at the first
    option and passes a later operand back up, where the top level calls it unrecognized
    under its own usage. Here the verb reads its arguments intermixed (every operand, wherever
    it stands, fills ``PATH...``) and refuses any left over itself. ``--`` still ends the
    options: every word after it is an operand (``render -- -odd.yaml``).
    """

    _reading = False

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self._reading:  # the intermixed reading's own passes (3.11 and 3.12 call back here)
            return super().parse_known_args(args, namespace)
        words = list(sys.argv[1:] if args is None else args)
        operands: list[str] = []
        if "--" in words and any(a.dest == "files" for a in self._actions):
            # The intermixed reading would read the words after ``--`` as options again.
            cut = words.index("--")
            words, operands = words[:cut], words[cut + 1 :]
        self._reading = True
        try:
            parsed, extras = self.parse_known_intermixed_args(words, namespace)
        finally:
            self._reading = False
        if extras:
            # An unknown option is the cause; the words after it are only left over with it.
            unknown = [a for a in extras if a.startswith("-") and a != "-"] or extras
            self.error(f"unrecognized arguments: {' '.join(unknown)}")
        if operands:
            parsed.files = [*parsed.files, *operands]
        return parsed, []


class _Version(argparse.Action):
    """``--version``: the package version and the render version (read only when asked: the
    package metadata costs a start-up otherwise)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object, **__: object) -> None:
        out = Output(sys.stdout)
        out.write(version_text() + "\n")
        out.flush()
        parser.exit(EXIT_OK)


def version_text() -> str:
    """``gpustack-render <package version> (render version <n>)``."""
    from importlib.metadata import PackageNotFoundError, version

    from gpustack_render.rendering.hashing import CURRENT_RENDER_VERSION

    try:
        package = version("gpustack-render")
    except PackageNotFoundError:
        package = "unknown"
    return f"gpustack-render {package} (render version {CURRENT_RENDER_VERSION})"


def _comma_list(value: str) -> list[str]:
    """``-f a.yaml,b.yaml``: kubectl's ``-f`` is a comma list too."""
    return [path for path in value.split(",") if path]


def build_parser() -> argparse.ArgumentParser:
    """The ``gpustack-render`` parser, every verb with its flags."""
    p = _Parser(
        prog="gpustack-render",
        description="Render ModelDeployments into Pods and Services, and answer admission reviews.",
    )
    p.add_argument(
        "--version",
        action=_Version,
        nargs=0,
        help="print the package version and the render version, then exit",
    )
    sub = p.add_subparsers(dest="verb", required=True, parser_class=_VerbParser, metavar="VERB")

    def files(sp: argparse.ArgumentParser, *, batch: bool = False, names: bool = False) -> None:
        sp.add_argument(
            "files",
            nargs="*",
            metavar="PATH",
            help="YAML/JSON files"
            + (" or directories" if batch else "")
            + "; - is stdin. Files named together are read together",
        )
        sp.add_argument(
            "-f",
            "--filename",
            action="extend",
            type=_comma_list,
            default=[],
            metavar="PATH",
            help="a file"
            + (" or directory (each file in it is read on its own)" if batch else "")
            + "; repeatable or a comma list, as kubectl's -f",
        )
        if batch:
            sp.add_argument(
                "-R",
                "--recursive",
                action="store_true",
                help="walk the subdirectories of a directory too",
            )
            sp.add_argument(
                "--summary",
                action="store_true",
                help="print one line per deployment (source, name, verdict, Pods, warnings) "
                "instead of the manifests or responses",
            )
        sp.add_argument(
            "-n",
            "--namespace",
            default="",
            help="the namespace of every namespaced object that names none (default: default); "
            "one that names another is refused, as kubectl refuses it",
        )
        sp.add_argument(
            "-o",
            "--output",
            choices=["yaml", "json", "name"] if names else ["yaml", "json"],
            default="yaml",
            help="output format"
            + ("; name prints kind[.group]/name per object, as kubectl -o name" if names else ""),
        )

    r = sub.add_parser("render", help="render every child object of each ModelDeployment")
    files(r, batch=True, names=True)
    r.add_argument(
        "--validate",
        choices=VALIDATE_MODES,
        type=_validate_mode,
        default="strict",
        help="judge the deployment as admission does before rendering: strict (or true; the "
        "default) refuses with exit 1 and prints no manifests, warn prints the causes as "
        "warnings and renders, ignore (or false) renders without judging",
    )
    r.add_argument(
        "--old",
        metavar="FILE",
        help="the stored object: the deployment is judged as an UPDATE of it",
    )
    for verb, what in (("admit", "ModelDeployment admission"), ("inject", "Pod KV-cache webhook")):
        a = sub.add_parser(
            verb,
            help=f"run the {what} on "
            + (
                "each ModelDeployment (each ModelArtifact of files holding no deployment)"
                if verb == "admit"
                else "the first Pod"
            ),
        )
        files(a, batch=verb == "admit")
        ops = ["CREATE", "UPDATE", "DELETE"] if verb == "admit" else ["CREATE", "UPDATE"]
        a.add_argument("--old", metavar="FILE", help=f"the stored object ({'/'.join(ops[1:])})")
        a.add_argument(
            "--operation",
            choices=ops,
            help="the request's operation (default: UPDATE with --old, else CREATE)",
        )
        a.add_argument(
            "--print",
            dest="print_",
            choices=["response", "object"],
            default="response",
            help="response: the AdmissionReview response (default); object: the object as "
            "admitted, with the patch applied",
        )
    _explain_parser(sub, files)
    c = sub.add_parser("crds", help="print the CustomResourceDefinitions the project ships")
    c.add_argument(
        "-o", "--output", choices=["yaml", "json", "name"], default="yaml", help="output format"
    )
    k = sub.add_parser("completion", help="print a shell completion script")
    k.add_argument("shell", choices=["bash", "zsh"], help="the shell to complete for")
    return p


#: What ``explain --fail-on`` accepts.
FAIL_ON = ("refused", "roll")


def _fail_on(value: str) -> list[str]:
    """``--fail-on`` values: one or a comma-separated list of :data:`FAIL_ON`."""
    values = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in values if v not in FAIL_ON]
    if bad or not values:
        raise argparse.ArgumentTypeError(
            f"invalid choice: {value!r} (choose from {', '.join(FAIL_ON)}, or a comma list)"
        )
    return values


def _count(value: str) -> int:
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"not a count of replicas: {value!r}")
    return int(value)


def _scale_ask(value: str) -> tuple[str, int]:
    """``ROLE=N`` (or ``GROUP=N`` units) for ``explain --replicas``."""
    name, sep, count = value.partition("=")
    if not sep or not name or not count.isdigit():
        raise argparse.ArgumentTypeError(
            f"not ROLE=N (a role or scaling group and a count of replicas): {value!r}"
        )
    return name, int(count)


def _explain_parser(sub: Any, files: Callable[..., None]) -> None:
    e = sub.add_parser(
        "explain",
        help="say what creating or editing a ModelDeployment will do and why: admission, "
        "per role unchanged / scale / roll, the fields that moved, the costs",
    )
    files(e, batch=True)
    e.set_defaults(output="text")
    for action in e._actions:
        if action.dest == "output":
            action.choices = ["text", "yaml", "json"]
            action.default = "text"
            action.help = "output format: text (a table to read), yaml, or json (the stable schema)"
        if action.dest == "namespace":
            action.help = (
                "the namespace of every namespaced object that names none (default: default; "
                "one that names another is refused); in live mode, the deployment's namespace"
            )
        if action.dest == "files":
            action.help = (
                "the new ModelDeployment and the objects it names, as for render (or md/NAME to "
                "read the stored object from a cluster, see --kubeconfig)"
            )
    e.add_argument(
        "--old",
        metavar="FILE",
        help="the stored object: explain an UPDATE of it; other objects in the file are what it "
        "was rendered with (an InstanceType before its edit), read before the inputs",
    )
    e.add_argument(
        "--observed",
        metavar="FILE",
        help="the live Pods, Workloads and Services as kubectl get ... -o yaml prints them (a "
        "List): run the rollout planner on them",
    )
    e.add_argument(
        "--replicas",
        type=_scale_ask,
        action="append",
        default=[],
        metavar="ROLE=N",
        help="what N replicas of a role (N units of a scaling group) would need from the queue, "
        "and whether its scaler takes the count; repeatable",
    )
    e.add_argument(
        "--max-replaced",
        type=_count,
        metavar="N",
        help="exit 1 when the edit would replace more than N replicas",
    )
    e.add_argument(
        "--fail-on",
        type=_fail_on,
        action="extend",
        default=[],
        metavar="refused|roll",
        help="exit 1 when admission refuses (refused) or any role rolls (roll); repeatable or "
        "a comma list",
    )
    e.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="live mode (first operand md/NAME): the kubeconfig to read the cluster with "
        "(read-only: GET and LIST)",
    )
    e.add_argument("--context", metavar="NAME", help="live mode: the kubeconfig context to use")
    e.add_argument(
        "--system-namespace",
        default="gpustack-system",
        metavar="NS",
        help="live mode: the controller's namespace, whose gpustack-settings ConfigMap holds "
        "the Settings (default: gpustack-system)",
    )
