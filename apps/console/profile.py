"""/console/profile/ — a staff member's own preferences: time zone and language."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.cache import never_cache

from apps.accounts.models import available_time_zones
from apps.accounts.services import user_preferences_update


def _zone_choices() -> list[tuple[str, str]]:
    return [("", gettext("UTC (default)")), *((z, z) for z in sorted(available_time_zones()))]


def _language_choices() -> list[tuple[str, str]]:
    return [("", gettext("The browser's language")), *((c, str(n)) for c, n in settings.LANGUAGES)]


class PreferencesForm(forms.Form):
    time_zone = forms.ChoiceField(label=_("Time zone"), required=False)
    language = forms.ChoiceField(label=_("Language"), required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["time_zone"].choices = _zone_choices()  # type: ignore[attr-defined]
        self.fields["language"].choices = _language_choices()  # type: ignore[attr-defined]


@login_required
@never_cache
def profile(request: HttpRequest) -> HttpResponse:
    user = request.user
    form = PreferencesForm(
        request.POST or None,
        initial={"time_zone": user.time_zone, "language": user.language},  # type: ignore[union-attr]
    )
    if request.method == "POST" and form.is_valid():
        try:
            user_preferences_update(
                user=user,  # type: ignore[arg-type]
                time_zone=form.cleaned_data["time_zone"],
                language=form.cleaned_data["language"],
            )
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                for error in errors:
                    form.add_error(field, error)
        else:
            messages.success(request, _("Your preferences are saved."))
            return redirect("console-profile")
    return render(request, "console/profile.html", {"form": form, "now": timezone.now()})
