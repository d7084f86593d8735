"""`import_client` — the tenant import format (docs/tenant-import.md). Parsing and validation
here; the writes are in `services.tenant_import`."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Literal, Union

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import validate_email
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from apps.clients.business_info import business_info_errors, json_path
from apps.clients.models import (
    DEFAULT_CONVERSATION_TOKEN_BUDGET,
    DEFAULT_DELIBERATIVE_TURNS_PER_HOUR,
    DEFAULT_REMEMBER_CONVERSATION_HOURS,
    DEFAULT_VISITOR_DAILY_TOKEN_BUDGET,
    MAX_REMEMBER_CONVERSATION_HOURS,
    validate_origin,
)
from apps.core.exceptions import ApplicationError

Slug = Annotated[str, Field(pattern=r"^[-a-zA-Z0-9_]+$", min_length=1, max_length=50)]
Money = Annotated[Decimal, Field(ge=0, max_digits=12, decimal_places=6)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class ModelPriceIn(_Strict):
    model: str = Field(min_length=1, max_length=100)
    input_per_million: Money
    output_per_million: Money


class ModeMultipliersIn(_Strict):
    standard: Annotated[Decimal, Field(ge=0, max_digits=6, decimal_places=3)] = Decimal("1.0")
    adaptive: Annotated[Decimal, Field(ge=0, max_digits=6, decimal_places=3)] = Decimal("1.5")
    deliberative: Annotated[Decimal, Field(ge=0, max_digits=6, decimal_places=3)] = Decimal("2.5")


class PlanNotesIn(_Strict):
    enabled: bool = True
    retention_days: int = Field(default=90, ge=1)
    prompt_budget_tokens: int = Field(default=400, ge=0)


class PlanIn(_Strict):
    slug: Slug
    name: str = Field(min_length=1, max_length=100)
    ai_mode: Literal["standard", "adaptive", "deliberative"] = "standard"
    mode_multipliers: ModeMultipliersIn = ModeMultipliersIn()
    monthly_fee: Annotated[Decimal, Field(ge=0, max_digits=10, decimal_places=2)] = Decimal("0")
    included_turns: int = Field(default=0, ge=0)
    monthly_token_budget: int = Field(default=0, ge=0)
    monthly_turn_budget: int = Field(default=0, ge=0)
    per_turn_token_cap: int = Field(default=0, ge=0)
    conversation_token_budget: int = Field(default=DEFAULT_CONVERSATION_TOKEN_BUDGET, ge=0)
    visitor_daily_token_budget: int = Field(default=DEFAULT_VISITOR_DAILY_TOKEN_BUDGET, ge=0)
    deliberative_turns_per_hour: int = Field(
        default=DEFAULT_DELIBERATIVE_TURNS_PER_HOUR, ge=0, le=32767
    )
    notes: PlanNotesIn = PlanNotesIn()


class WidgetIn(_Strict):
    allowed_origins: list[str] = []
    greeting: str = Field(default="Hi! How can I help?", max_length=500)
    remember_conversation_hours: int = Field(
        default=DEFAULT_REMEMBER_CONVERSATION_HOURS, ge=0, le=MAX_REMEMBER_CONVERSATION_HOURS
    )

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        for origin in value:
            try:
                validate_origin(origin)
            except Exception as exc:
                raise ValueError(getattr(exc, "messages", [str(exc)])[0]) from None
        return value


def _executor_specs() -> Any:
    """The union of every registered executor's object, told apart by its `type`."""
    from apps.tools.executors import executors

    specs = tuple(e.import_spec for e in executors().values())
    return Annotated[Union[specs], Field(discriminator="type")]  # noqa: UP007


class ToolIn(_Strict):
    name: str = Field(pattern=r"^[a-zA-Z_][a-zA-Z0-9_]{0,63}$")
    description: str = Field(min_length=1, max_length=2000)
    kind: Literal["read", "action", "destructive"]
    enabled: bool = True
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    executor: _executor_specs()  # type: ignore[valid-type]
    result_template: str = Field(default="", max_length=2000)

    @field_validator("parameters")
    @classmethod
    def _schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            Draft202012Validator.check_schema(value)
        except SchemaError as exc:
            where = json_path(exc.absolute_path)
            raise ValueError(
                f"not a valid JSON Schema{f' at {where}' if where else ''}: {exc.message}"
            ) from None
        if value.get("type") != "object":
            raise ValueError('must be a JSON Schema with "type": "object"')
        return value


class ClientIn(_Strict):
    slug: Slug
    name: str = Field(min_length=1, max_length=200)
    plan: Slug
    language: str = Field(default="en", min_length=2, max_length=16)
    support_email: str = Field(default="", max_length=254)
    business_info: dict[str, Any] = {}
    widget: WidgetIn = WidgetIn()
    tools: list[ToolIn] = []
    is_active: bool = True
    require_mfa: bool = False

    @field_validator("support_email")
    @classmethod
    def _email(cls, value: str) -> str:
        if value:
            try:
                validate_email(value)
            except DjangoValidationError:
                raise ValueError("not a valid e-mail address") from None
        return value

    @field_validator("business_info")
    @classmethod
    def _business_info(cls, value: dict[str, Any]) -> dict[str, Any]:
        errors = business_info_errors(value)
        if errors:
            raise ValueError("; ".join(f"{path}: {msg}" for path, msg in errors.items()))
        return value

    @model_validator(mode="after")
    def _unique_tools(self) -> ClientIn:
        names = [tool.name for tool in self.tools]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate tool names: {', '.join(dupes)}")
        return self


class TenantFile(_Strict):
    model_prices: list[ModelPriceIn] = []
    plans: list[PlanIn] = []
    clients: list[ClientIn] = []


def _loc(loc: tuple[Any, ...]) -> str:
    # pydantic puts the discriminator tag in the location; it means nothing to the file's author.
    return json_path([p for p in loc if p not in {"webhook", "builtin"}]) or "(file)"


def parse_tenant_file(data: Any) -> TenantFile:
    """Validate a decoded tenant file; errors name the path of each bad field."""
    if not isinstance(data, dict):
        raise ApplicationError("The file must contain a JSON object.", code="invalid_file")
    try:
        return TenantFile.model_validate(data)
    except ValidationError as exc:
        fields = {
            _loc(err["loc"]): err["msg"].removeprefix("Value error, ") for err in exc.errors()
        }
        lines = "\n".join(f"  {path}: {msg}" for path, msg in fields.items())
        raise ApplicationError(
            f"Invalid tenant file:\n{lines}", {"fields": fields}, code="invalid_file"
        ) from None
