"""The tenancy audit: every query site on a tenant-owned model's `objects` in apps/ and devtools/
(or given paths), by scope, and every raw SQL site. `make ci-checks` runs it; it exits 1 on a gap.

    python scripts/tenancy_audit.py [--list] [paths...]

Static (AST) and approximate, for CI and reviews: each `<TenantModel>.objects…` call chain is one
site, classified as
  scoped      `.for_client(…)`, `.for_current_client()`, or a filter keyword on `client` /
              `client_id` / `client__in`, or on a foreign key to another tenant-owned model
              given a loaded row or a queryset (`conversation=conv`, `conversation__in=qs`) —
              not a bare id (`conversation_id=…`, `conversation__id=…`, `conversation=pk`,
              `conversation__in=ids`), which the tenant guard refuses at run time;
  unscoped    explicit `.unscoped("why")`;
  unscoped?   neither: it raises at run time unless run inside `tenant_scope(client_id)` —
              write `.for_current_client()` there, so a reader (and this audit) sees the scope;
  write       `create` / `bulk_create` / `bulk_update` only (no scope needed).
Raw SQL: a `cursor()`, `.raw(`, `RawSQL(`, `.extra(` or `_base_manager` outside
apps/core/tenant_sql.py is a gap; so is a `sql_rows` / `sql_models` / `sql_insert` site name that
is not in that module's reviewed lists, and (auditing the whole of apps/) a listed site nothing
runs.
The tenant-owned models are the classes in apps/*/models.py that inherit TenantOwnedModel.
Output is sorted, so two runs on the same tree print the same thing.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

ROOT = Path.cwd()  # run from the repository root
REVIEWED_MODULE = Path("apps/core/tenant_sql.py")  # the one home of raw SQL and its lists
SQL_HELPERS = {"sql_rows", "sql_models", "sql_insert"}
RAW_METHODS = {"cursor", "raw", "extra"}  # connection.cursor(), Model.objects.raw(), qs.extra()
WRITES = {"create", "bulk_create", "bulk_update", "none", "acreate", "abulk_create"}
SCOPE_CALLS = {
    "filter",
    "exclude",
    "get",
    "get_or_create",
    "update_or_create",
    "aget",
    "aget_or_create",
    "aupdate_or_create",
}


def _tenant_models() -> dict[str, set[str]]:
    """{model class name: its foreign keys to Client or to another tenant-owned model}."""
    classes: dict[str, tuple[list[str], list[tuple[str, str]]]] = {}
    for path in sorted((ROOT / "apps").glob("*/models.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            bases = [
                b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases
            ]
            fks: list[tuple[str, str]] = []
            for stmt in node.body:
                if not (
                    isinstance(stmt, ast.Assign | ast.AnnAssign)
                    and isinstance(stmt.value, ast.Call)
                ):
                    continue
                target = stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target
                func = stmt.value.func
                kind = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
                # apps/core/model_bases.py: `conversation_fk(…)` links to the conversation,
                # `optional_fk(to, …)` to its first argument.
                if kind == "conversation_fk" and isinstance(target, ast.Name):
                    fks.append((target.id, "Conversation"))
                elif kind in {"ForeignKey", "OneToOneField", "optional_fk"} and stmt.value.args:
                    first = stmt.value.args[0]
                    to = (
                        first.value.split(".")[-1]
                        if isinstance(first, ast.Constant) and isinstance(first.value, str)
                        else getattr(first, "id", getattr(first, "attr", ""))
                    )
                    if isinstance(target, ast.Name):
                        fks.append((target.id, to))
            classes[node.name] = (bases, fks)
    tenant: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, (bases, _) in classes.items():
            if name not in tenant and any(b == "TenantOwnedModel" or b in tenant for b in bases):
                tenant.add(name)
                changed = True
    return {
        name: {"client"}
        | {field for field, to in classes[name][1] if to in tenant or to == "Client"}
        for name in sorted(tenant)
    }


def _id_like(value: ast.expr) -> bool:
    """A bare id rather than a loaded row: a number, `x_id`, `pk`, `ids`, `row.pk`, a list of
    them."""
    if isinstance(value, ast.Constant):
        return True
    if isinstance(value, ast.List | ast.Tuple | ast.Set):
        return any(_id_like(e) for e in value.elts)
    name = value.id if isinstance(value, ast.Name) else getattr(value, "attr", "")
    if isinstance(value, ast.Subscript):
        name = value.value.id if isinstance(value.value, ast.Name) else ""
    return name in {"id", "pk", "ids", "pks"} or name.endswith(("_id", "_ids", "_pk", "_pks"))


def _scoping_keyword(key: str, value: ast.expr, fks: set[str]) -> bool:
    head, _, rest = key.partition("__")
    bare = head.endswith("_id")
    if bare:
        head = head[: -len("_id")]
    if head not in fks:
        return False
    if head == "client" or rest in {"client", "client_id", "client__in"}:
        return rest in {
            "",
            "in",
            "id",
            "id__in",
            "pk",
            "pk__in",
            "client",
            "client_id",
            "client__in",
        }
    # A tenant-owned parent scopes only as a loaded row or a queryset, never as a bare id.
    return not bare and rest in {"", "in"} and not _id_like(value)


def _classify(outer: list[ast.Call], fks: set[str]) -> str:
    names = [getattr(call.func, "attr", "") for call in outer]
    if "unscoped" in names:
        return "unscoped"
    for call, name in zip(outer, names, strict=True):
        if name in {"for_client", "for_current_client"}:
            return "scoped"
        if name in SCOPE_CALLS and any(
            kw.arg and _scoping_keyword(kw.arg, kw.value, fks) for kw in call.keywords
        ):
            return "scoped"
    if names and set(names) <= WRITES:
        return "write"
    return "unscoped?"


def _relative(path: Path) -> str:
    resolved = path.resolve()
    return resolved.relative_to(ROOT).as_posix() if resolved.is_relative_to(ROOT) else str(path)


def _files(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for base in paths:
        found = [base] if base.is_file() else sorted(base.rglob("*.py"))
        files.extend(f for f in found if "migrations" not in f.parts)
    return files


def _query_sites(
    rel: str, tree: ast.AST, models: dict[str, set[str]]
) -> list[tuple[str, int, str, str]]:
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    sites = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Attribute)
            and node.attr == "objects"
            and isinstance(node.value, ast.Name)
            and node.value.id in models
        ):
            continue
        outer: list[ast.Call] = []
        current: ast.AST = node
        while True:
            attr = parents.get(id(current))
            if not isinstance(attr, ast.Attribute) or attr.value is not current:
                break
            call = parents.get(id(attr))
            if not isinstance(call, ast.Call) or call.func is not attr:
                break
            outer.append(call)
            current = call
        sites.append((rel, node.lineno, node.value.id, _classify(outer, models[node.value.id])))
    return sites


def audit(paths: list[Path]) -> list[tuple[str, int, str, str]]:
    models = _tenant_models()
    sites: list[tuple[str, int, str, str]] = []
    for path in _files(paths):
        sites += _query_sites(_relative(path), ast.parse(path.read_text()), models)
    return sorted(sites)


def reviewed_sites() -> set[str]:
    """The site names in the reviewed lists (CLIENT_SQL, PLATFORM_SQL) of the helper module."""
    tree = ast.parse((ROOT / REVIEWED_MODULE).read_text())
    names: set[str] = set()
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and target.id in {"CLIENT_SQL", "PLATFORM_SQL"}:
            assert isinstance(node, ast.AnnAssign)
            assert isinstance(node.value, ast.Dict)
            names |= {str(k.value) for k in node.value.keys if isinstance(k, ast.Constant)}
    return names


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def raw_sql_gaps(paths: list[Path], *, whole_tree: bool) -> tuple[list[str], set[str]]:
    """(gaps, site names run): raw SQL outside the reviewed helper, helper calls with a site
    name that is not reviewed, and — auditing all of apps/ — reviewed sites nothing runs."""
    reviewed = reviewed_sites()
    gaps: list[str] = []
    used: set[str] = set()
    for path in _files(paths):
        rel = _relative(path)
        if rel == REVIEWED_MODULE.as_posix():
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "_base_manager":
                gaps.append(f"{rel}:{node.lineno}: _base_manager goes around the tenant guard")
            if not isinstance(node, ast.Call):
                continue
            name = _call_name(node)
            method = isinstance(node.func, ast.Attribute)
            if (method and name in RAW_METHODS) or name == "RawSQL":
                gaps.append(f"{rel}:{node.lineno}: raw SQL ({name}) outside {REVIEWED_MODULE}")
            elif name in SQL_HELPERS:
                first = node.args[0] if node.args else None
                site = first.value if isinstance(first, ast.Constant) else None
                if not isinstance(site, str) or site not in reviewed:
                    gaps.append(f"{rel}:{node.lineno}: SQL site {site!r} is not reviewed")
                else:
                    used.add(site)
    if whole_tree:
        gaps += [
            f"{REVIEWED_MODULE}: reviewed SQL site {s!r} is run nowhere"
            for s in sorted(reviewed - used)
        ]
    return sorted(gaps), used


def main(argv: list[str]) -> int:
    listing = "--list" in argv
    args = [a for a in argv if a != "--list"]
    paths = [Path(a) for a in args] or [ROOT / "apps", ROOT / "devtools"]
    sites = audit(paths)
    totals = Counter(kind for *_, kind in sites)
    per_file: dict[str, Counter[str]] = {}
    for rel, _, _, kind in sites:
        per_file.setdefault(rel, Counter())[kind] += 1
    kinds = ["scoped", "unscoped", "unscoped?", "write"]
    print(f"{'file':60} " + " ".join(f"{k:>9}" for k in kinds))
    for rel in sorted(per_file):
        print(f"{rel:60} " + " ".join(f"{per_file[rel][k]:>9}" for k in kinds))
    print(
        f"{'total (' + str(len(sites)) + ' sites)':60} "
        + " ".join(f"{totals[k]:>9}" for k in kinds)
    )
    gaps, used = raw_sql_gaps(paths, whole_tree=not args)
    print(f"raw SQL: {len(used)} reviewed sites run through apps/core/tenant_sql.py")
    unaccounted = [
        f"{rel}:{line}: {model} (unscoped?)"
        for rel, line, model, kind in sites
        if kind == "unscoped?"
    ]
    if listing or unaccounted or gaps:
        for line in unaccounted + gaps:
            print(line)
    if unaccounted or gaps:
        print(
            f"tenancy audit: {len(unaccounted) + len(gaps)} unaccounted for — scope each query "
            '(for_client / for_current_client / unscoped("why")) and run raw SQL through a '
            "reviewed site of apps/core/tenant_sql.py",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
