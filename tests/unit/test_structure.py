"""The code's structure holds (#24): no import circle among Topogov's modules, no module importing
another's underscore names, every path and symbol ``docs/architecture.md`` cites exists, and every
link of the README and its guides leads somewhere.

Imports are read from the source (``ast``), at module level and inside functions alike: a circle
closed by an import deferred into a function is still a circle for the reader."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"topogov": ROOT / "lambdas", "topogov_cli": ROOT / "cli", "topogov_local": ROOT / "local"}
# where a path the architecture cites is looked for: the repository, then each package's own folder
DOC_ROOTS = (ROOT, ROOT / "lambdas/topogov", ROOT / "cli/topogov_cli", ROOT / "local/topogov_local")
# what the architecture names that exists only once something has run
MADE_AT_RUN_TIME = {".topogov/rehearse/report.json", "endpoints.json", "node_modules/.bin/cdk"}
LABEL_KEY = re.compile(r"^[a-z0-9-]+(?:\.[a-z0-9-]+)+/")  # topogov.io/topology-mode: a key, not a path


def modules() -> dict[str, Path]:
    found = {}
    for package, base in PACKAGES.items():
        for path in (base / package).rglob("*.py"):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = modules()


def owner(name: str) -> str | None:
    """The module of ours a dotted name is in (the longest prefix that is a module), or None."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str) -> Iterator[tuple[str, str]]:
    """(the module of ours imported, the name taken from it or '') for each import in ``module``."""
    path = MODULES[module]
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (target := owner(alias.name)) is not None:
                    yield target, ""
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                full = f"{source}.{alias.name}"
                target = full if full in MODULES else owner(source)
                if target is not None:
                    yield target, "" if target == full else alias.name


def graph() -> dict[str, set[str]]:
    return {m: {t for t, _ in imports(m) if t != m} for m in MODULES}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_circle_finder_finds_a_circle_of_three():
    # (the finder itself: a graph with a circle a -> b -> c -> a, and d outside it)
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}) == [["a", "b", "c"]]


def test_no_import_circle_among_topogovs_modules():
    assert len(MODULES) > 100
    assert circles(graph()) == []


def test_no_module_imports_another_modules_underscore_names():
    crossing = [
        (m, target, name)
        for m in MODULES
        for target, name in imports(m)
        if target != m and name.startswith("_") and not name.startswith("__")
    ]
    assert crossing == []


CITED = re.compile(r"`([A-Za-z0-9_.\-]+(?:/[A-Za-z0-9_.\-]*)+|[A-Za-z0-9_\-]+\.(?:py|md|toml|yaml|json))`")


def cited() -> list[str]:
    return sorted(set(CITED.findall((ROOT / "docs/architecture.md").read_text(encoding="utf-8"))))


def exists(cite: str) -> bool:
    """A path (``adapters/ec2.py``, ``infra/``) or a module and a name in it (``domain/jobs.job_status``)."""
    for base in DOC_ROOTS:
        if (base / cite).exists():
            return True
        stem, dot, symbol = cite.rpartition(".")
        if dot and "/" in stem and (base / f"{stem}.py").is_file():
            source = (base / f"{stem}.py").read_text(encoding="utf-8")
            if re.search(rf"^\s*(?:def|class) {re.escape(symbol)}\b|^{re.escape(symbol)}\b", source, re.M):
                return True
        package = base / stem / "__init__.py"
        if dot and package.is_file() and symbol in package.read_text(encoding="utf-8"):
            return True
    return False


def test_every_path_and_name_the_architecture_cites_exists():
    cites = cited()
    assert len(cites) > 40
    missing = [c for c in cites if c not in MADE_AT_RUN_TIME and not LABEL_KEY.match(c) and not exists(c)]
    assert missing == []


# Functions longer than this many lines, per tree: split into named steps, unless the docstring says
# "One piece on purpose" and why (the Kueue model's functions that follow upstream's step by step).
LENGTH_LIMITS = {"lambdas": 60, "cli": 60, "infra": 60, "local": 100}
ONE_PIECE = "One piece on purpose"


def long_functions() -> dict[str, int]:
    found = {}
    for tree, limit in LENGTH_LIMITS.items():
        for path in sorted((ROOT / tree).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > limit and ONE_PIECE not in " ".join((ast.get_docstring(node) or "").split()):
                    found[f"{path.relative_to(ROOT)}::{node.name}"] = length
    return found


def test_no_function_is_over_its_trees_limit_unless_it_says_why():
    assert long_functions() == {}


LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but '-' dropped, spaces to '-'."""
    heads = re.findall(r"^#+ (.+)$", markdown, re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def test_every_link_of_the_readme_and_its_guides_leads_somewhere():
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert len(documents) >= 10
    broken = []
    for doc in documents:
        text = doc.read_text(encoding="utf-8")
        for target in LINK.findall(text):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            file = (doc.parent / path).resolve() if path else doc
            if not file.exists():
                broken.append(f"{doc.name}: {target}")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text(encoding="utf-8")):
                broken.append(f"{doc.name}: {target} (no such heading)")
    assert broken == []


def test_the_readme_is_a_front_door():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 250


# A label or annotation key (or a prefix of one): a DNS name of Kubernetes, Kueue, AWS or Topogov,
# a slash, a name. Resource names (vpc.amazonaws.com/efa) and API versions (…/v1beta2) are not keys.
LABEL_KEY_LITERAL = re.compile(
    r"^([a-z0-9-]+\.)*(kubernetes\.io|x-k8s\.io|k8s\.aws|topogov\.io|amazonaws\.com)/[A-Za-z0-9._-]*$"
)
RESOURCE_NAMES = {"vpc.amazonaws.com/efa"}


def test_label_keys_are_spelled_in_domain_labels_only():
    spelled = []
    for tree in ("lambdas/topogov", "cli/topogov_cli"):
        for path in sorted((ROOT / tree).rglob("*.py")):
            if path == ROOT / "lambdas/topogov/domain/labels.py":
                continue
            module = ast.parse(path.read_text(encoding="utf-8"))
            docstrings = {
                id(node.body[0].value)
                for node in ast.walk(module)
                if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                and node.body
                and isinstance(node.body[0], ast.Expr)
            }
            for node in ast.walk(module):
                if (
                    isinstance(node, ast.Constant)
                    and isinstance(node.value, str)
                    and id(node) not in docstrings
                    and LABEL_KEY_LITERAL.match(node.value)
                    and node.value not in RESOURCE_NAMES
                    and not re.search(r"/v\d", node.value)
                ):
                    spelled.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value}")
    assert spelled == []


# Kubernetes objects are read through their views (#24 item 1): the adapters make a view of each
# object they read (``domain/views``), and the logic and the rest of the domain read its fields, never
# the JSON. A field of a Kubernetes object read from a body (``obj["metadata"]``,
# ``(x.get("status") or {}).get("conditions")``) is allowed only in ``domain/views/`` and where a
# body is rendered: ``domain/kueue.py`` (the Kueue objects) and, in ``domain/jobs.py``, the Job
# manifest's renderer and the checker of a submitted one.
BODY_FIELDS = frozenset(
    {
        "apiVersion", "kind", "metadata", "spec", "status", "items", "labels", "annotations", "uid",
        "resourceVersion", "ownerReferences", "creationTimestamp", "deletionTimestamp", "managedFields",
        "finalizers", "conditions", "lastTransitionTime", "template", "containers", "initContainers",
        "overhead", "nodeName", "nodeSelector", "tolerations", "phase", "providerID", "taints", "suspend",
        "activeDeadlineSeconds", "startTime", "completionTime", "podSets", "topologyRequest", "admission",
        "podSetAssignments", "topologyAssignment", "resourceUsage", "queueName", "clusterQueue",
        "resourceGroups", "coveredResources", "nominalQuota", "borrowingLimit", "lendingLimit",
        "topologyName", "nodeLabel", "nodeLabels", "stopPolicy", "cohortName", "namespaceSelector",
        "matchLabels", "fairSharing",
    }
)  # fmt: skip
VIEWS = ROOT / "lambdas/topogov/domain/views"
RENDERERS: dict[str, frozenset[str] | None] = {
    "lambdas/topogov/domain/kueue.py": None,  # the whole module renders Kueue's objects
    "lambdas/topogov/domain/hyperpod/addon.py": None,  # renders the objects the HyperPod add-on writes
    # completes a checked job (and each of its pod templates)
    "lambdas/topogov/domain/jobs.py": frozenset({"complete_manifest", "_complete_template"}),
    # check a submitted manifest field by field (the JSON is the input being checked)
    "lambdas/topogov/domain/manifests/__init__.py": None,
    "lambdas/topogov/domain/manifests/kinds.py": None,
    "lambdas/topogov/domain/manifests/metadata.py": None,
    "lambdas/topogov/domain/manifests/pods.py": None,
    # Kubernetes' own rules over a pod spec: Pod Security's checks, the requests a pod counts
    "lambdas/topogov/domain/podrequests.py": None,
    **{
        str(p.relative_to(ROOT)): None
        for p in sorted((ROOT / "lambdas/topogov/domain/podsecurity").glob("*.py"))
    },
}  # fmt: skip
# Where a view's whole body (``raw``) is read, and why; nowhere else.
RAW_READERS = {
    "lambdas/topogov/logic/governor/drift.py": "compares rendered and live objects, writes them whole",
    "lambdas/topogov/logic/api_service.py": "answers a submission with the Job as it was created",
    "lambdas/topogov/logic/governor/team_pods.py": "applies the rendered team pod objects whole",
}


def body_reads(source: str) -> list[tuple[int, str, str]]:
    """(line, function, field) of each read of a Kubernetes object's field: ``x["field"]`` or
    ``x.get("field")`` with a field of :data:`BODY_FIELDS`."""
    module = ast.parse(source)
    function_of: dict[int, str] = {}
    for node in ast.walk(module):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for sub in ast.walk(node):
                function_of[id(sub)] = node.name  # ast.walk goes outside in: the innermost stays
    found = []
    for node in ast.walk(module):
        key = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice.value if isinstance(node.slice, ast.Constant) else None
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            key = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
        if isinstance(key, str) and key in BODY_FIELDS:
            found.append((node.lineno, function_of.get(id(node), ""), key))
    return sorted(found)


def raw_body_reads() -> list[str]:
    out = []
    for tree in ("lambdas/topogov/logic", "lambdas/topogov/domain"):
        for path in sorted((ROOT / tree).rglob("*.py")):
            name = str(path.relative_to(ROOT))
            if path.is_relative_to(VIEWS) or (name in RENDERERS and RENDERERS[name] is None):
                continue
            allowed = RENDERERS.get(name) or frozenset()
            for line, function, key in body_reads(path.read_text(encoding="utf-8")):
                if function not in allowed:
                    out.append(f"{name}:{line} {function}: {key}")
    return out


def test_the_body_read_finder_finds_chains_and_subscripts_not_writes_or_other_keys():
    source = (
        "def f(job, obj, record):\n"
        '    uid = (job.get("metadata") or {}).get("uid", "")\n'
        '    phase = obj["status"]["phase"]\n'
        '    obj["spec"] = {}\n'  # a write: rendering
        '    return record.get("decision"), job.uid\n'
    )
    assert body_reads(source) == [
        (2, "f", "metadata"),
        (2, "f", "uid"),
        (3, "f", "phase"),
        (3, "f", "status"),
    ]


def test_logic_and_domain_read_kubernetes_objects_through_their_views():
    for name, functions in RENDERERS.items():  # the exceptions name what exists
        source = (ROOT / name).read_text(encoding="utf-8")
        assert all(re.search(rf"^def {f}\(", source, re.M) for f in functions or ()), name
    assert raw_body_reads() == []


def test_a_views_whole_body_is_read_only_where_it_must_pass_through_whole():
    readers = set()
    for tree in ("lambdas/topogov/logic", "lambdas/topogov/domain"):
        for path in sorted((ROOT / tree).rglob("*.py")):
            if path.is_relative_to(VIEWS):
                continue
            module = ast.parse(path.read_text(encoding="utf-8"))
            if any(isinstance(n, ast.Attribute) and n.attr == "raw" for n in ast.walk(module)):
                readers.add(str(path.relative_to(ROOT)))
    assert readers == set(RAW_READERS)
