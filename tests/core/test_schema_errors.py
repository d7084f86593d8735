"""One translator of JSON Schema errors (`apps.core.schema_errors`): field path → message, the
same walk and the same words for business info, simulation cases, executors' settings and a
tool call's params."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.utils import translation
from jsonschema import Draft202012Validator

from apps.clients.business_info import business_info_errors
from apps.core.schema_errors import WORDS, errors_by_path, json_path, schema_problems

REPO = Path(__file__).resolve().parents[2]

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "email"],
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 5},
        "email": {"type": "string"},
        "items": {"type": "array", "maxItems": 1, "items": {"type": "integer", "minimum": 1}},
        "tags": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
    },
}
VALIDATOR = Draft202012Validator(SCHEMA)


@pytest.mark.parametrize(
    ("parts", "path"),
    [([], ""), (["faqs", 2, "answer"], "faqs[2].answer"), ([0], "[0]"), (["a", "b"], "a.b")],
)
def test_json_path(parts, path):
    assert json_path(parts) == path


def test_each_missing_or_unknown_key_is_its_own_problem_at_its_own_path():
    errors = errors_by_path(VALIDATOR, {"zz": 1, "aa": 2}, root="thing")
    assert errors == {
        "aa": "Unknown field. Allowed here: email, items, name, tags.",
        "email": "This field is required.",
        "name": "This field is required.",
        "zz": "Unknown field. Allowed here: email, items, name, tags.",
    }


def test_the_shared_words_and_the_first_problem_per_path():
    data = {"name": "toolong", "email": 5, "items": [0, 1], "tags": [1]}
    assert errors_by_path(VALIDATOR, data) == {
        "email": "Must be a text.",
        "items": "At most 1 items.",
        "items[0]": "At least 1.",
        "name": "At most 5 characters.",
        # the anyOf branch of the value's JSON type (a list) explains the problem
        "tags[0]": "Must be a text.",
    }
    assert errors_by_path(VALIDATOR, []) == {"": "Must be an object."}
    assert errors_by_path(VALIDATOR, [], root="case") == {"case": "Must be an object."}


def test_a_caller_s_words_replace_the_shared_ones_and_its_star_is_asked_first():
    data = {"name": "", "email": "x"}
    own = errors_by_path(VALIDATOR, data, words={"minLength": lambda p: "Empty."})
    assert own == {"name": "Empty."}
    first = errors_by_path(
        VALIDATOR, data, words={"*": lambda p: "Mine." if p.path == ("name",) else None}
    )
    assert first == {"name": "Mine."}
    where = errors_by_path(VALIDATOR, data, where=lambda p: "everything")
    assert where == {"everything": WORDS["minLength"](schema_problems(VALIDATOR, data)[0])}


def test_the_words_are_translated_for_every_caller():
    with translation.override("de"):
        empty = errors_by_path(VALIDATOR, {"name": "", "email": "x"})["name"]
        assert empty == "Darf nicht leer sein."
        # business info's own checks speak the same words
        faqs = {"faqs": [{"question": "", "answer": "a"}]}
        assert business_info_errors(faqs) == {"faqs[0].question": empty}


def test_only_the_translator_walks_json_schema_errors():
    """Every caller goes through `schema_problems` / `errors_by_path`: no other module of
    apps/ iterates a validator's errors itself."""
    walkers = []
    for path in (REPO / "apps").rglob("*.py"):
        if path == REPO / "apps/core/schema_errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "iter_errors":
                walkers.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert walkers == []
