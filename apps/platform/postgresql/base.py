"""Django's PostgreSQL backend (`ENGINE = "apps.platform.postgresql"`, set by
config/settings/production.py with the pool) with one change: its psycopg pool's `check` is
`apps.platform.db.SweepOnFailedCheck`, so the first dead connection a request meets makes the pool
drop every other dead one at once. Django itself passes `check=ConnectionPool.check_connection`
when CONN_HEALTH_CHECKS is on and refuses a `check` among OPTIONS["pool"], so the pool is built
here, with the arguments Django gives it. With CONN_HEALTH_CHECKS off, or without a pool, this is
Django's backend unchanged."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.backends.base.base import NO_DB_ALIAS
from django.db.backends.postgresql import base
from psycopg_pool import ConnectionPool

from apps.platform.db import SweepOnFailedCheck


class DatabaseWrapper(base.DatabaseWrapper):
    # Django's, missing from its type stubs (annotations only: nothing is overridden).
    _connection_pools: dict[str, Any]
    _configure_connection: Callable[[Any], None]

    @property
    def pool(self) -> Any:
        options = self.settings_dict["OPTIONS"].get("pool")
        if (
            self.alias != NO_DB_ALIAS
            and options
            and self.settings_dict["CONN_HEALTH_CHECKS"]
            and not self.settings_dict.get("CONN_MAX_AGE")  # Django refuses it with a pool
            and self.alias not in self._connection_pools
        ):
            connect_kwargs = self.get_connection_params()
            connect_kwargs["autocommit"] = True  # as Django's: it sets autocommit later on
            check = SweepOnFailedCheck()
            pool: ConnectionPool[Any] = ConnectionPool(
                kwargs=connect_kwargs,
                open=False,  # as Django's: opened by the first connection
                configure=self._configure_connection,
                check=check,
                **({} if options is True else options),
            )
            check.pool = pool
            # The first to set it wins (threads may build one each; the others are never opened).
            self._connection_pools.setdefault(self.alias, pool)
        return super().pool
