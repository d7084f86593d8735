from __future__ import annotations

import inspect
import logging
from typing import Any, ClassVar

from celery import Task, shared_task
from django.apps import apps
from django.db import InterfaceError, OperationalError

from apps.core.tenancy import tenant_scope

logger = logging.getLogger(__name__)


class TenantTask(Task):
    """Base of every task that works for one client: it takes `client_id=` and runs inside
    `tenant_scope(client_id)`, so its tenant-owned queries see that client's rows only.

    `tenant_from = ("app.Model", "arg")` names the row whose client a message queued before
    tasks carried `client_id` belongs to (the argument is that row's id, keyword or first
    positional); such a message is looked up once, explicitly unscoped, so a deploy does not
    drop work in flight. A call without that id either (a task's "run whatever is parked"
    form) runs without a tenant: its own code enters each job's scope."""

    abstract = True
    tenant_from: ClassVar[tuple[str, str] | None] = None
    # Celery's own argument check would refuse `client_id`: apply_async checks without it.
    typing = False

    def apply_async(  # type: ignore[override]  # same call, fewer spelled-out options
        self, args: Any = None, kwargs: Any = None, **options: Any
    ) -> Any:
        check = getattr(self, "__header__", None)
        if check is not None:
            given = dict(kwargs or {})
            if not self._takes_client_id():
                given.pop("client_id", None)
            check(*(args or ()), **given)
        return super().apply_async(args, kwargs, **options)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        client_id = kwargs.get("client_id")
        if not self._takes_client_id():
            kwargs.pop("client_id", None)
        if client_id is None:
            found = self._legacy_client_id(args, kwargs)
            if found is None:
                return super().__call__(*args, **kwargs)
            if found == 0:  # the row is gone: nothing to do
                logger.info("%s: its row is gone; nothing to do", self.name)
                return None
            client_id = found
        with tenant_scope(int(client_id)):
            return super().__call__(*args, **kwargs)

    def _takes_client_id(self) -> bool:
        """Whether the task's function names `client_id` (read once per task: it is asked on
        every publish and every run, a turn's hot path)."""
        takes = self.__dict__.get("_client_id_param")
        if takes is None:
            takes = self.__dict__["_client_id_param"] = (
                "client_id" in inspect.signature(self.run).parameters
            )
        return bool(takes)

    def _legacy_client_id(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | None:
        """None when the call names no row; 0 when the row no longer exists."""
        if self.tenant_from is None:
            return None
        label, arg = self.tenant_from
        row_id = kwargs.get(arg, args[0] if args else None)
        if row_id is None:
            return None
        if label == "clients.Client":  # the task's own `client_id`, given positionally
            return int(row_id)
        model = apps.get_model(label)
        found = (
            model.objects.unscoped("legacy task message")
            .filter(pk=row_id)
            .values_list("client_id", flat=True)
            .first()
        )
        return int(found) if found is not None else 0


def tenant_task(
    name: str,
    tenant_from: tuple[str, str] | None = None,
    *,
    retry_db: bool = False,
    **options: Any,
) -> Any:
    """`@shared_task` for a task that works for one client: a `TenantTask` (see above) that acks
    late and keeps no result unless `options` say otherwise; `tenant_from` as on TenantTask.
    `retry_db`: a lost or busy database retries the task (3 times, backing off)."""
    if retry_db:
        options.update(
            autoretry_for=(OperationalError, InterfaceError), max_retries=3, retry_backoff=True
        )
    options.setdefault("acks_late", True)
    options.setdefault("ignore_result", True)
    if tenant_from is not None:
        options["tenant_from"] = tenant_from
    return shared_task(name=name, base=TenantTask, **options)


@shared_task(name="core.ping", ignore_result=True)
def ping() -> None:
    """Does nothing, on purpose: what a worker spends on it is Celery's own cost per task
    (devtools/benchmarks/celery_overhead.py measures that). Harmless to send by hand to check that a
    worker consumes: `celery -A config call core.ping`."""
