from __future__ import annotations

from decimal import Decimal
from typing import Any

import factory

from apps.accounts.models import Membership, Role, User
from apps.billing.models import ModelPrice
from apps.clients.deliberation import deliberation_settings_set
from apps.clients.models import Client, Plan
from apps.tools.models import ClientTool, ExecutorType, ToolKind


class PlanFactory(factory.django.DjangoModelFactory[Plan]):
    class Meta:
        model = Plan
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"plan-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())
    ai_mode = "adaptive"
    monthly_fee = Decimal("99.00")
    included_turns = 5000


def set_deliberation(plan: Plan | int, **changes: Any) -> Plan:
    """Change a plan's deliberative-mode settings (`min_steps`, `max_steps`, `target`,
    `refinement_iterations`, `refinement_stop_score`) and save them."""
    if not isinstance(plan, Plan):
        plan = Plan.objects.get(pk=plan)
    deliberation_settings_set(plan, **changes)
    plan.save(update_fields=["deliberation"])
    return plan


class ClientFactory(factory.django.DjangoModelFactory[Client]):
    class Meta:
        model = Client

    slug = factory.Sequence(lambda n: f"client-{n}")
    name = factory.LazyAttribute(lambda o: f"{o.slug.title()} Shop")
    plan = factory.SubFactory(PlanFactory)
    support_email = factory.LazyAttribute(lambda o: f"support@{o.slug}.example")
    allowed_origins = factory.LazyAttribute(lambda o: [f"https://{o.slug}.example"])
    business_info = factory.LazyAttribute(
        lambda o: {
            "about": {"description": f"{o.name} sells things.", "full": f"{o.name} in full."},
            "contact": {"hours": "Mon-Fri 9-17", "phone": "+1 555 0100", "email": "hi@x.example"},
            "policies": {"returns": "30-day returns.", "shipping": "Ships in 2 days."},
            "faqs": [{"question": "Do you ship abroad?", "answer": "Yes, to 30 countries."}],
            "ai_instructions": "Be brief.",
        }
    )


class UserFactory(factory.django.DjangoModelFactory[User]):
    class Meta:
        model = User
        skip_postgeneration_save = True

    email = factory.Sequence(lambda n: f"staff{n}@guidedesk.example")
    is_staff = True
    password = factory.PostGenerationMethodCall("set_password", "pw-for-tests-123")

    @factory.post_generation
    def _save(obj, create, extracted, **kwargs):
        if create:
            obj.save()


class MembershipFactory(factory.django.DjangoModelFactory[Membership]):
    class Meta:
        model = Membership

    client = factory.SubFactory(ClientFactory)
    user = factory.SubFactory(UserFactory)
    role = Role.AGENT


class ModelPriceFactory(factory.django.DjangoModelFactory[ModelPrice]):
    class Meta:
        model = ModelPrice
        django_get_or_create = ("model",)

    model = "gpt-4o-mini"
    input_per_million = Decimal("0.15")
    output_per_million = Decimal("0.60")


class ClientToolFactory(factory.django.DjangoModelFactory[ClientTool]):
    class Meta:
        model = ClientTool

    client = factory.SubFactory(ClientFactory)
    name = factory.Sequence(lambda n: f"tool_{n}")
    description = "A tool."
    kind = ToolKind.READ
    parameters = {
        "type": "object",
        "properties": {"order_id": {"type": "string", "pattern": "^TH-\\d{5}$"}},
        "required": ["order_id"],
        "additionalProperties": False,
    }
    executor_type = ExecutorType.WEBHOOK
    webhook_url = "http://127.0.0.1:9/hook"
    signing_secret = "test-signing-secret"
    timeout_seconds = 2.0
    max_retries = 2
