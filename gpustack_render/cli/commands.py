"""The ``gpustack-render`` command line: a thin layer over the library.

A verb imports only the layers it needs (``crds`` needs no admission, ``render`` no injection):
start-up is most of a small call's time.

Exit codes (docs/contract/interfaces.md): 0 success or allowed; 1 a render error or a refusal; 2 bad
usage, unreadable input, an unknown kind, or no request object.
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn, TextIO, cast

from gpustack_render.admission import review_deployment
from gpustack_render.admission.context import GROUP_KIND
from gpustack_render.cli import yamlio
from gpustack_render.cli.documents import Bundle, read_bundle
from gpustack_render.cli.gcpause import paused_gc
from gpustack_render.cli.sources import Group, collect, read_source
from gpustack_render.cli.yamlio import DocumentError
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList, RenderError, Verdict
from gpustack_render.core.review import AdmissionRequest, Operation
from gpustack_render.rendering.renderer import render
from gpustack_render.schema.decoding import decode_deployment

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2

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


class UsageError(Exception):
    """Bad usage or unreadable input: exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


class _Version(argparse.Action):
    """``--version``: the package version and the render version (read only when asked: the
    package metadata costs a start-up otherwise)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object, **__: object) -> None:
        out = _Output(sys.stdout)
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


def _parser() -> argparse.ArgumentParser:
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
    sub = p.add_subparsers(dest="verb", required=True, parser_class=_Parser, metavar="VERB")

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
            + ("each ModelDeployment" if verb == "admit" else "the first Pod"),
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


def _bundle(paths: Sequence[str], stdin: TextIO, *, namespace: str = "") -> Bundle:
    try:
        return read_bundle([read_source(p, stdin) for p in paths], namespace=namespace)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def _emit(objects: list[dict[str, Any]], fmt: str, out: TextIO) -> None:
    if fmt == "name":
        out.write("".join(object_name(o) + "\n" for o in objects))
    elif fmt == "json":
        out.write(yamlio.dump_json(yamlio.as_list(objects)))
    else:
        out.write(yamlio.dump_yaml(objects))


def object_name(obj: dict[str, Any]) -> str:
    """``kind[.group]/name`` as kubectl's ``-o name`` prints it; an object named by
    ``generateName`` shows its prefix (the API server appends the rest)."""
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    kind = str(obj.get("kind") or "").lower()
    meta = obj.get("metadata") or {}
    name = meta.get("name") or meta.get("generateName") or ""
    return f"{kind}{'.' + group if group else ''}/{name}"


def _emit_one(obj: dict[str, Any], fmt: str, out: TextIO) -> None:
    out.write(yamlio.dump_json(obj) if fmt == "json" else yamlio.dump_yaml_one(obj))


def cmd_crds(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from gpustack_render.schema.crd import all_crds  # only this verb needs it

    _emit(all_crds(), args.output, out)
    return EXIT_OK


@dataclass
class Outcome:
    """One deployment's result in a batch."""

    source: str
    name: str
    verdict: str
    code: int
    pods: int = 0
    warnings: int = 0
    objects: list[dict[str, Any]] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"{self.source}\t{self.name}\t{self.verdict}\t{self.pods} Pods\t"
            f"{self.warnings} warnings"
        )


def _groups(args: argparse.Namespace, verb: str) -> list[Group]:
    operands = [*args.files, *args.filename]
    if not operands:
        raise UsageError(f"{verb}: no input; name files or directories, or - for stdin")
    groups = collect(operands, recursive=getattr(args, "recursive", False), stdin=sys.stdin)
    if not groups:  # only directories, holding no file a walk reads
        raise UsageError(f"{verb}: no ModelDeployment in " + ", ".join(operands))
    return groups


def _each_deployment(
    groups: list[Group], verb: str, err: TextIO, *, namespace: str = ""
) -> tuple[list[tuple[Group, Bundle, dict[str, Any]]], int]:
    """Every deployment with the bundle it is judged with; the worst code of the reading."""
    found: list[tuple[Group, Bundle, dict[str, Any]]] = []
    worst = EXIT_OK
    for group in groups:
        try:
            if group.error:
                raise UsageError(group.error)
            bundle = _read_group_bundle(group, namespace)
            if not bundle.deployments and group.named:
                raise UsageError(f"{verb}: no ModelDeployment in {group.label}")
        except UsageError as exc:
            err.write(f"gpustack-render: {exc}\n")
            worst = EXIT_USAGE
            continue
        found.extend((group, bundle, doc) for doc in bundle.deployments)
    if not found and worst == EXIT_OK:
        raise UsageError(f"{verb}: no ModelDeployment in " + ", ".join(g.label for g in groups))
    return found, worst


def _read_group_bundle(group: Group, namespace: str) -> Bundle:
    try:
        return read_bundle(group.sources, namespace=namespace)
    except DocumentError as exc:
        raise UsageError(str(exc)) from exc


def _display_name(doc: dict[str, Any]) -> str:
    """``namespace/name``; ``namespace/prefix*`` for a ``generateName``, ``namespace/(no name)``
    for neither."""
    meta = doc.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    prefix = meta.get("generateName")
    name = meta.get("name") or (f"{prefix}*" if prefix else "(no name)")
    return f"{meta.get('namespace') or 'default'}/{name}"


def cmd_render(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    found, worst = _each_deployment(
        _groups(args, "render"), "render", err, namespace=args.namespace
    )
    old = _old_object(args.old, "ModelDeployment", sys.stdin) if args.validate != "ignore" else None
    if old is not None and len(found) > 1:
        raise UsageError(f"render: --old takes one ModelDeployment; found {len(found)}")
    outcomes = [
        _render_one(doc, bundle, group.label, args=args, old=old, err=err, who=_who(doc, found))
        for group, bundle, doc in found
    ]
    worst = max([worst, *(o.code for o in outcomes)])
    if args.summary:
        out.write("".join(o.line() + "\n" for o in outcomes))
    else:
        _emit([obj for o in outcomes for obj in o.objects], args.output, out)
    return worst


def _render_one(
    doc: dict[str, Any],
    bundle: Bundle,
    source: str,
    *,
    args: argparse.Namespace,
    old: dict[str, Any] | None,
    err: TextIO,
    who: str = "",
) -> Outcome:
    """One deployment's render; every stderr line it writes carries ``who`` after its tag."""
    outcome = Outcome(source, _display_name(doc), "refused", EXIT_REFUSED)
    if args.validate != "ignore":
        request = _request("UPDATE" if old is not None else "CREATE", doc, old)
        verdict = _unnamed(request) or review_deployment(
            request,
            lookups=bundle.lookups(default_namespace=request.namespace),
            settings=bundle.settings,
        )
        outcome.warnings = len(verdict.warnings)
        if not _report_verdict(verdict, strict=args.validate == "strict", err=err, who=who):
            return outcome
    md, errs = decode_deployment(doc)
    if md is None:
        for e in errs:
            err.write(f"render: {who}{e.message()}\n")
        return outcome
    ns = md.metadata.namespace or "default"
    try:
        with paused_gc():
            result = render(
                md, lookups=bundle.lookups(default_namespace=ns), settings=bundle.settings
            )
    except RenderError as exc:
        err.write(f"render: {who}{exc}\n")
        outcome.verdict = "error"
        return outcome
    outcome.objects = result.objects()
    outcome.pods = sum(1 for o in outcome.objects if o.get("kind") == "Pod")
    outcome.verdict, outcome.code = "rendered", EXIT_OK
    return outcome


def _report_verdict(verdict: Verdict, *, strict: bool, err: TextIO, who: str = "") -> bool:
    """Print the verdict's warnings and causes on ``err``; whether rendering goes on.

    Under ``strict`` a refusal prints one ``render:`` line per cause (the API server's message
    when there are none) and stops; under ``warn`` the same lines are ``Warning:`` lines.
    """
    _warn(verdict, err, who)
    if verdict.allowed:
        return True
    causes = [e.message() for e in verdict.errors] or [verdict.status_message()]
    prefix = "render: refused" if strict else "Warning: admission would refuse"
    for cause in causes:
        err.write(f"{prefix}: {who}{cause}\n")
    return not strict


def _warn(verdict: Verdict, err: TextIO, who: str = "") -> None:
    """``Warning: <who><warning>`` per warning, as kubectl prints the API server's."""
    for warning in verdict.warnings:
        err.write(f"Warning: {who}{warning}\n")


def _who(doc: dict[str, Any], batch: Sequence[object]) -> str:
    """``ModelDeployment <namespace>/<name>: `` in a batch of several deployments, where a line
    on stderr must say which one it is about; nothing for one deployment."""
    return f"ModelDeployment {_display_name(doc)}: " if len(batch) > 1 else ""


def _operation(operation: str | None, old: dict[str, Any] | None) -> str:
    op: str = operation or ("UPDATE" if old is not None else "CREATE")
    if op in ("UPDATE", "DELETE") and old is None:
        raise UsageError(f"--operation {op} needs --old FILE with the stored object")
    return op


def _old_object(path: str | None, kind: str, stdin: TextIO) -> dict[str, Any] | None:
    if not path:
        return None
    old_bundle = _bundle([path], stdin)
    found = old_bundle.deployments if kind == "ModelDeployment" else old_bundle.pods
    if not found:
        raise UsageError(f"--old {path}: no {kind} in it")
    return found[0]


def _answer(
    verdict: Verdict,
    request_obj: dict[str, Any] | None,
    args: argparse.Namespace,
    out: TextIO,
    err: TextIO,
) -> int:
    _warn(verdict, err)
    if args.print_ == "object":
        if not verdict.allowed:
            _emit_one(verdict.to_response(), args.output, err)
            return EXIT_REFUSED
        _emit_one(_patched(request_obj or {}, verdict), args.output, out)
        return EXIT_OK
    _emit_one(verdict.to_response(), args.output, out)
    return EXIT_OK if verdict.allowed else EXIT_REFUSED


def _request(op: str, obj: dict[str, Any] | None, old: dict[str, Any] | None) -> AdmissionRequest:
    """The request the API server would send; an object without a namespace is in ``default``."""
    meta = (obj or old or {}).get("metadata")
    if not isinstance(meta, dict):
        meta = {}  # the schema refuses it, with the field named
    return AdmissionRequest(
        operation=cast(Operation, op),
        object=obj,
        old_object=old,
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
    )


def _unnamed(request: AdmissionRequest) -> Verdict | None:
    """The refusal of a create named only by ``generateName``, or None.

    The API server generates the name as it stores the object, and every Service and Pod name
    derives from it: offline there is no name to render or to judge those names by. (A create
    naming neither is refused by :func:`review_deployment`, as the API server refuses it.)
    """
    meta = (request.object or {}).get("metadata")
    if request.operation != "CREATE" or request.name or not isinstance(meta, dict):
        return None
    if not meta.get("generateName"):
        return None
    cause = errors.required(
        "metadata.name",
        "the API server generates the name from generateName only as it stores the object, "
        "and every Service and Pod name derives from it; name the deployment to render or "
        "judge it here",
        origin="metadata.name-generated",
    )
    return Verdict.from_errors(ErrorList([cause]), group_kind=GROUP_KIND, name="")


def admit_review(
    files: Sequence[str],
    *,
    old_file: str | None = None,
    operation: str | None = None,
    stdin: TextIO = sys.stdin,
) -> tuple[Verdict, dict[str, Any] | None]:
    """Run the ModelDeployment admission on ``files`` as the ``admit`` verb does.

    Returns the verdict and the schema-defaulted request object the patch applies to.
    """
    return admit_bundle(
        _bundle(files, stdin), ", ".join(files), old_file=old_file, operation=operation, stdin=stdin
    )


def admit_bundle(
    bundle: Bundle,
    label: str,
    *,
    old_file: str | None = None,
    operation: str | None = None,
    stdin: TextIO = sys.stdin,
) -> tuple[Verdict, dict[str, Any] | None]:
    """The admission of the first deployment of ``bundle`` (read from ``label``)."""
    old = _old_object(old_file, "ModelDeployment", stdin)
    op = _operation(operation, old)
    if not bundle.deployments and op != "DELETE":
        raise UsageError(f"admit: no ModelDeployment in {label}")
    obj = bundle.deployments[0] if bundle.deployments else None
    request = _request(op, obj, old)
    verdict: Verdict = _unnamed(request) or review_deployment(
        request,
        lookups=bundle.lookups(default_namespace=request.namespace),
        settings=bundle.settings,
    )
    defaulted = None
    if obj is not None:
        md, _ = decode_deployment(obj)
        defaulted = md.to_dict() if md is not None else obj
    return verdict, defaulted


def inject_review(
    files: Sequence[str],
    *,
    old_file: str | None = None,
    operation: str | None = None,
    stdin: TextIO = sys.stdin,
    namespace: str = "",
) -> tuple[Verdict, dict[str, Any]]:
    """Run the Pod KV-cache webhook on ``files`` as the ``inject`` verb does."""
    from gpustack_render.injection import review_pod  # only this verb needs it

    bundle = _bundle(files, stdin, namespace=namespace)
    if not bundle.pods:
        raise UsageError("inject: no Pod in " + ", ".join(files))
    old = _old_object(old_file, "Pod", stdin)
    op = _operation(operation, old)
    if op not in ("CREATE", "UPDATE"):
        raise UsageError(f"inject: --operation {op} is not a Pod webhook operation")
    pod = bundle.pods[0]
    request = _request(op, pod, old)
    verdict: Verdict = review_pod(
        request,
        lookups=bundle.lookups(default_namespace=request.namespace),
        settings=bundle.settings,
    )
    return verdict, pod


def cmd_admit(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    operands = [*args.files, *args.filename]
    if args.operation == "DELETE" and args.old and not operands and not args.summary:
        # A DELETE request carries no object: the stored one is the whole question.
        deleted, _ = admit_bundle(Bundle(), "", old_file=args.old, operation="DELETE")
        return _answer(deleted, None, args, out, err)
    groups = _groups(args, "admit")
    named = [g for g in groups if g.named]
    if len(groups) == 1 and named and not args.summary:
        if named[0].error:
            raise UsageError(named[0].error)
        verdict, obj = _admit(named[0].sources, named[0].label, args)
        if verdict is not None:
            return _answer(verdict, obj, args, out, err)
    found, worst = _each_deployment(groups, "admit", err, namespace=args.namespace)
    if args.old and len(found) > 1:
        raise UsageError(f"admit: --old takes one ModelDeployment; found {len(found)}")
    outcomes: list[Outcome] = []
    answers: list[dict[str, Any]] = []
    for group, bundle, doc in found:
        verdict, obj = _admit_doc(doc, bundle, args)
        who = _who(doc, found)
        outcome = Outcome(
            group.label,
            _display_name(doc),
            "allowed" if verdict.allowed else "refused",
            EXIT_OK if verdict.allowed else EXIT_REFUSED,
            pods=_pods_of(obj) if verdict.allowed else 0,
            warnings=len(verdict.warnings),
        )
        outcomes.append(outcome)
        if args.summary:
            _warn(verdict, err, who)
        else:
            answers.append(_answer_object(verdict, obj, args, err, who))
    worst = max([worst, *(o.code for o in outcomes)])
    if args.summary:
        out.write("".join(o.line() + "\n" for o in outcomes))
    else:
        _emit([a for a in answers if a], args.output, out)
    return worst


def _admit(
    sources: list[tuple[str, str]], label: str, args: argparse.Namespace
) -> tuple[Verdict | None, dict[str, Any] | None]:
    """The one-request path (every named file read together): the verdict, or None when the
    files hold several deployments (the batch path answers them)."""
    try:
        bundle = read_bundle(sources, namespace=args.namespace)
    except DocumentError as exc:
        raise UsageError(str(exc)) from exc
    if len(bundle.deployments) > 1:
        return None, None
    return admit_bundle(bundle, label, old_file=args.old, operation=args.operation)


def _admit_doc(
    doc: dict[str, Any], bundle: Bundle, args: argparse.Namespace
) -> tuple[Verdict, dict[str, Any] | None]:
    single = Bundle(deployments=[doc], inputs=bundle.inputs, settings=bundle.settings)
    return admit_bundle(single, "", old_file=args.old, operation=args.operation)


def _pods_of(obj: dict[str, Any] | None) -> int:
    """Σ replicas × size of a (defaulted) deployment: the Pods it would run. Only for an
    allowed one: a refused object may hold anything where the counts belong."""
    roles = ((obj or {}).get("spec") or {}).get("roles") or []
    return sum(int(r.get("replicas") or 1) * int(r.get("size") or 1) for r in roles if r)


def _answer_object(
    verdict: Verdict,
    obj: dict[str, Any] | None,
    args: argparse.Namespace,
    err: TextIO,
    who: str = "",
) -> dict[str, Any]:
    """What ``_answer`` prints for one request, as an object for a stream of several."""
    _warn(verdict, err, who)
    if args.print_ != "object":
        return verdict.to_response()
    if not verdict.allowed:
        _emit_one(verdict.to_response(), args.output, err)
        return {}
    return _patched(obj or {}, verdict)


def _patched(obj: dict[str, Any], verdict: Verdict) -> dict[str, Any]:
    if not verdict.patch:
        return obj
    import jsonpatch  # only --print object needs it

    patched: dict[str, Any] = jsonpatch.apply_patch(obj, verdict.patch)
    return patched


def cmd_inject(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    verdict, pod = inject_review(
        [*args.files, *args.filename],
        old_file=args.old,
        operation=args.operation,
        namespace=args.namespace,
    )
    return _answer(verdict, pod, args, out, err)


def cmd_explain(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from gpustack_render.cli.explain import run  # only this verb needs the explain layer

    return run(args, out, err)


def cmd_completion(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from gpustack_render.cli.completion import script

    out.write(script(_parser(), shell=args.shell))
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace, TextIO, TextIO], int]] = {
    "completion": cmd_completion,
    "render": cmd_render,
    "admit": cmd_admit,
    "inject": cmd_inject,
    "explain": cmd_explain,
    "crds": cmd_crds,
}


class _OutputError(Exception):
    """Standard output could not be written: a full disk, a closed descriptor (no bug)."""


class _Output(io.TextIOBase):
    """Standard output whose failed write says so, instead of passing for an internal error;
    a closed pipe (``| head``) stays a :class:`BrokenPipeError`."""

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._do(lambda stream: stream.write(text))
        return len(text)

    def flush(self) -> None:
        self._do(lambda stream: stream.flush())

    def _do(self, op: Callable[[TextIO], object]) -> None:
        if self._stream is None:  # started with descriptor 1 closed
            raise _OutputError("standard output is closed")
        try:
            op(self._stream)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _OutputError(exc.strerror or str(exc)) from exc


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    out = _Output(sys.stdout)
    try:
        args = _parser().parse_args(argv)  # --version writes through _Output too
        code = COMMANDS[args.verb](args, cast(TextIO, out), sys.stderr)
        out.flush()  # here, not at exit, so a failed write is reported
        return code
    except UsageError as exc:
        sys.stderr.write(f"gpustack-render: {exc}\n")
        return EXIT_USAGE
    except _OutputError as exc:
        sys.stderr.write(f"gpustack-render: cannot write the output: {exc}\n")
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        sys.stderr.write(
            f"gpustack-render: internal error ({type(exc).__name__}: {_first_line(exc)}); "
            "this is a bug, please report it with the input\n"
        )
        return EXIT_USAGE


def _first_line(exc: BaseException) -> str:
    lines = str(exc).splitlines()
    return lines[0] if lines else ""


if __name__ == "__main__":
    raise SystemExit(main())
