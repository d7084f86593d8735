from __future__ import annotations

from decimal import Decimal

from django.core.validators import MinValueValidator
from django.db import models

from apps.core.models import TenantOwnedModel, TimeStampedModel


class ModelPrice(TimeStampedModel):
    """Provider price of one model, USD per million tokens. Usage cost is computed from it at
    the time of each call and stored on the UsageRecord, so a later price change never rewrites
    history."""

    model = models.CharField(max_length=100, unique=True)
    input_per_million = models.DecimalField(
        max_digits=12, decimal_places=6, validators=[MinValueValidator(Decimal("0"))]
    )
    output_per_million = models.DecimalField(
        max_digits=12, decimal_places=6, validators=[MinValueValidator(Decimal("0"))]
    )

    class Meta:
        ordering = ["model"]

    def __str__(self) -> str:
        return f"{self.model} (${self.input_per_million}/M in, ${self.output_per_million}/M out)"


class UsageRecord(TenantOwnedModel):
    """One LLM call: who, which turn, which step, tokens, provider cost and billed amount."""

    conversation = models.ForeignKey(
        "conversations.Conversation",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    trace = models.ForeignKey(
        "reasoning.ReasoningTrace",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="usage_records",
    )
    mode = models.CharField(max_length=20)
    step = models.CharField(max_length=40)
    model = models.CharField(max_length=100)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    tokens_estimated = models.BooleanField(
        default=False, help_text="The provider reported no usage; tokens were estimated."
    )
    cost_usd = models.DecimalField(max_digits=16, decimal_places=8, default=Decimal("0"))
    multiplier = models.DecimalField(max_digits=6, decimal_places=3, default=Decimal("1"))
    billed_usd = models.DecimalField(max_digits=16, decimal_places=8, default=Decimal("0"))

    class Meta:
        indexes = [
            models.Index(fields=["client", "created_at"]),
            models.Index(fields=["client", "mode", "created_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.step} {self.model} {self.prompt_tokens}+{self.completion_tokens}"

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens
