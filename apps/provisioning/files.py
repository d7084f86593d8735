"""Reading a tenant file from disk (docs/tenant-import.md): JSON, or YAML for *.yaml / *.yml;
each client's `knowledge.article_dir` (relative to the file) is read into
`knowledge.articles` — every `*.md` in it is an article with YAML front matter. Errors name the
file and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from apps.core.exceptions import ApplicationError
from apps.core.schema_errors import json_path

FRONT_MATTER = "---"
# An article directory is read in full: bound it like the rest of the file.
MAX_ARTICLE_FILES = 2000
MAX_ARTICLE_FILE_BYTES = 200_000


def _invalid(path: str, message: str) -> ApplicationError:
    return ApplicationError(
        f"Invalid tenant file:\n  {path}: {message}",
        {"fields": {path: message}},
        code="invalid_file",
    )


def load_tenant_file(path: Path | str) -> Any:
    """The parsed tenant file with its article directories read in; an ApplicationError that
    says what is wrong otherwise."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ApplicationError(f"{path}: no such file", code="invalid_file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ApplicationError(f"{path}: cannot be read ({exc})", code="invalid_file") from None
    if path.suffix.lower() in {".yaml", ".yml"}:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise ApplicationError(
                f"{path}: not valid YAML{where}: {problem}", code="invalid_file"
            ) from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ApplicationError(
                f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
                code="invalid_file",
            ) from None
    return expand_article_dirs(data, base_dir=path.parent)


def expand_article_dirs(data: Any, *, base_dir: Path) -> Any:
    """Replace each client's `knowledge.article_dir` by the articles its `*.md` files hold
    (appended to `knowledge.articles`, in file-name order)."""
    clients = data.get("clients") if isinstance(data, dict) else None
    for i, client in enumerate(clients if isinstance(clients, list) else []):
        knowledge = client.get("knowledge") if isinstance(client, dict) else None
        if not isinstance(knowledge, dict) or "article_dir" not in knowledge:
            continue
        where = json_path(["clients", i, "knowledge", "article_dir"])
        relative = knowledge.pop("article_dir")
        if not isinstance(relative, str) or not relative.strip():
            raise _invalid(where, "must be a directory name")
        directory = (base_dir / relative.strip()).resolve()
        if not directory.is_dir():
            raise _invalid(where, f"{relative}: no such directory (relative to the tenant file)")
        files = sorted(directory.glob("*.md"))
        if len(files) > MAX_ARTICLE_FILES:
            raise _invalid(where, f"{relative}: more than {MAX_ARTICLE_FILES} articles")
        articles = knowledge.get("articles")
        if articles is None:
            articles = knowledge["articles"] = []
        if not isinstance(articles, list):
            continue  # the importer's validation names it
        for file in files:
            label = f"{relative.strip().rstrip('/')}/{file.name}"
            articles.append(read_article_file(file, label=label, where=where))
    return data


def read_article_file(file: Path, *, label: str, where: str) -> dict[str, Any]:
    """One `*.md` article: YAML front matter (title, tags, language, kind, enabled, status)
    between `---` lines, then the Markdown body. Errors name `label` and the field."""
    if file.stat().st_size > MAX_ARTICLE_FILE_BYTES:
        raise _invalid(where, f"{label}: larger than {MAX_ARTICLE_FILE_BYTES} bytes")
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise _invalid(where, f"{label}: not UTF-8 text") from None
    return parse_article_text(text, label=label, where=where)


def parse_article_text(text: str, *, label: str, where: str) -> dict[str, Any]:
    """An article file's text (front matter, then the Markdown body) as an `articles` entry."""
    from apps.provisioning.importer import ArticleIn

    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != FRONT_MATTER:
        raise _invalid(where, f"{label}: must start with YAML front matter (a --- line)")
    try:
        end = next(n for n, line in enumerate(lines[1:], start=1) if line.strip() == FRONT_MATTER)
    except StopIteration:
        raise _invalid(where, f"{label}: the front matter has no closing --- line") from None
    try:
        meta = yaml.safe_load("\n".join(lines[1:end])) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 2})" if mark else ""
        raise _invalid(where, f"{label}: front matter is not valid YAML{at}") from None
    if not isinstance(meta, dict):
        raise _invalid(where, f"{label}: the front matter must be key: value lines")
    if "body" in meta:
        raise _invalid(where, f"{label}: body: the text goes below the front matter")
    article = {**meta, "body": "\n".join(lines[end + 1 :]).strip()}
    try:
        ArticleIn.model_validate(article)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = json_path(list(err["loc"])) or "(file)"
        message = err["msg"].removeprefix("Value error, ")
        raise _invalid(where, f"{label}: {field}: {message}") from None
    return article
