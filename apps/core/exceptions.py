from __future__ import annotations

from typing import Any


class ApplicationError(Exception):
    """A domain failure with a message for people and optional structured detail.

    `status` is the HTTP status the API answers with; `code` a stable machine-readable name.
    """

    status: int = 400
    code: str = "invalid"

    def __init__(
        self,
        message: str,
        extra: dict[str, Any] | None = None,
        *,
        status: int | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra or {}
        if status is not None:
            self.status = status
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return self.message
