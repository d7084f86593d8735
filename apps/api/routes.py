"""The standard routes of a resource, built from one declaration: its collection
(`<collection>/`), one object (`<collection>/<str:id>/`) and the actions on one object
(`<collection>/<str:id>/<action>`), named `<name>-list`, `<name>-detail` and `<name>-<action>`.

Ids are matched as plain strings (`<str:…>`, never `<uuid:…>` or `<int:…>`) so that a malformed
id reaches the view, which answers its own 404 (the API's JSON one: apps/api/schema.py parses
ids) instead of Django's page. The console's pages use the same shapes. Routes of another
shape are written out with `path()` beside these.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.urls import URLPattern, path
from django.views import View as ClassBasedView

# A class-based view (turned into a view with `as_view()`) or a view function.
View = type[ClassBasedView] | Callable[..., Any]


def _view(view: View) -> Callable[..., Any]:
    if isinstance(view, type) and issubclass(view, ClassBasedView):
        return view.as_view()
    return view


def resource_routes(
    collection: str,
    name: str,
    *,
    id_name: str = "public_id",
    list_view: View | None = None,
    detail_view: View | None = None,
    detail_name: str | None = None,
    actions: Mapping[str, View] | None = None,
) -> list[URLPattern]:
    """The routes of `collection` that are given a view. An action written with a trailing
    slash (`"cases/"`, a collection under the object) keeps it in its path but not its name;
    `detail_name` names the object's route when it is not `<name>-detail`."""
    routes: list[URLPattern] = []
    if list_view is not None:
        routes.append(path(f"{collection}/", _view(list_view), name=f"{name}-list"))
    member = f"{collection}/<str:{id_name}>/"
    if detail_view is not None:
        routes.append(path(member, _view(detail_view), name=detail_name or f"{name}-detail"))
    for action, view in (actions or {}).items():
        routes.append(path(member + action, _view(view), name=f"{name}-{action.rstrip('/')}"))
    return routes
