"""Count the queries on tenant-owned models' `objects` in apps/ (or given paths), by scope.

    python scripts/tenancy_audit.py [--list] [paths...]

Static (AST) and approximate, for reviews: each `<TenantModel>.objects…` call chain is one site,
classified as
  scoped      `.for_client(…)`, `.for_current_client()`, or a filter keyword on `client` /
              `client_id` / `client__in` or on a foreign key to `Client` or to another
              tenant-owned model (`conversation=conv`);
  unscoped    explicit `.unscoped("why")`;
  unscoped?   neither: it raises at run time unless run inside `tenant_scope(client_id)`;
  write       `create` / `bulk_create` / `bulk_update` only (no scope needed).
The tenant-owned models are the classes in apps/*/models.py that inherit TenantOwnedModel.
Output is sorted, so two runs on the same tree print the same thing.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

ROOT = Path.cwd()  # run from the repository root
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
                if (
                    isinstance(stmt, ast.Assign | ast.AnnAssign)
                    and isinstance(stmt.value, ast.Call)
                    and getattr(stmt.value.func, "attr", "") in {"ForeignKey", "OneToOneField"}
                    and stmt.value.args
                ):
                    target = stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target
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


def _scoping_keyword(key: str, fks: set[str]) -> bool:
    head, _, rest = key.partition("__")
    if head.endswith("_id"):
        head = head[: -len("_id")]
    if head not in fks:
        return False
    return rest in {"", "in", "id", "id__in", "pk", "pk__in", "client", "client_id", "client__in"}


def _classify(outer: list[ast.Call], fks: set[str]) -> str:
    names = [getattr(call.func, "attr", "") for call in outer]
    if "unscoped" in names:
        return "unscoped"
    for call, name in zip(outer, names, strict=True):
        if name in {"for_client", "for_current_client"}:
            return "scoped"
        if name in SCOPE_CALLS and any(
            kw.arg and _scoping_keyword(kw.arg, fks) for kw in call.keywords
        ):
            return "scoped"
    if names and set(names) <= WRITES:
        return "write"
    return "unscoped?"


def audit(paths: list[Path]) -> list[tuple[str, int, str, str]]:
    models = _tenant_models()
    sites: list[tuple[str, int, str, str]] = []
    for base in paths:
        files = [base] if base.is_file() else sorted(base.rglob("*.py"))
        for path in files:
            if "migrations" in path.parts:
                continue
            tree = ast.parse(path.read_text())
            parents: dict[int, ast.AST] = {}
            for node in ast.walk(tree):
                for child in ast.iter_child_nodes(node):
                    parents[id(child)] = node
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
                rel = path.resolve().relative_to(ROOT).as_posix()
                kind = _classify(outer, models[node.value.id])
                sites.append((rel, node.lineno, node.value.id, kind))
    return sorted(sites)


def main(argv: list[str]) -> int:
    listing = "--list" in argv
    args = [a for a in argv if a != "--list"]
    paths = [Path(a) for a in args] or [ROOT / "apps"]
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
    if listing:
        for rel, line, model, kind in sites:
            if kind == "unscoped?":
                print(f"{rel}:{line}: {model}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
