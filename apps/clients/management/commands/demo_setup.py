from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from apps.accounts.models import Membership, Role, User
from apps.clients.models import Client

DEMO_EMAIL = "admin@guidedesk.example"
DEMO_PASSWORD = "guidedesk-demo"  # noqa: S105 - the local demo's published credential


class Command(BaseCommand):
    help = "Create the demo superuser (idempotent) and print how to sign in. Local demo only."

    def handle(self, *args: Any, **options: Any) -> None:
        user = User.objects.filter(email=DEMO_EMAIL).first()
        if user is None:
            user = User.objects.create_superuser(DEMO_EMAIL, DEMO_PASSWORD)
        for client in Client.objects.all():
            Membership.objects.get_or_create(
                client=client, user=user, defaults={"role": Role.OWNER}
            )
        model = "the OFFLINE DEMO MODEL" if not settings.OPENAI_API_KEY else settings.LLM_MODEL
        self.stdout.write(
            "\n".join(
                [
                    "",
                    "GuideDesk demo is ready.",
                    "  Demo shop:  http://127.0.0.1:8000/",
                    "  Admin:      http://127.0.0.1:8000/admin/",
                    f"  Sign in:    {DEMO_EMAIL} / {DEMO_PASSWORD}",
                    f"  Assistant:  {model}",
                    "",
                ]
            )
        )
