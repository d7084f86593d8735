from typing import Any

from allauth.account.adapter import DefaultAccountAdapter


class StaffAccountAdapter(DefaultAccountAdapter):
    """Staff accounts are created by an operator (admin or `createsuperuser`), never by sign-up."""

    def is_open_for_signup(self, request: Any) -> bool:
        return False
