"""A server-rendered SVG bar chart (no JavaScript, no CDN): daily cost stacked by mode — or daily
tokens, for a period that cost nothing (the offline demo model, a model without a price)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext

from apps.clients import modes

SIMULATION = "simulation"  # simulations' calls: their own line, not a mode's
SIMULATION_COLOR = "#c0504d"
OTHER_COLOR = "#8a8a8a"


def mode_color(mode: str) -> str:
    """A usage line's colour: the one its mode declares (`Mode.color`)."""
    declared = modes.find(mode)
    if declared is not None:
        return declared.color
    return SIMULATION_COLOR if mode == SIMULATION else OTHER_COLOR


def mode_colors() -> dict[str, str]:
    """Every registered mode's colour (and the simulations'), for the usage page's legend."""
    return {**{m.name: m.color for m in modes.modes()}, SIMULATION: SIMULATION_COLOR}


@dataclass(frozen=True)
class Box:
    width: int = 900
    height: int = 320
    left: int = 78
    right: int = 16
    top: int = 40
    bottom: int = 58

    @property
    def plot_width(self) -> int:
        return self.width - self.left - self.right

    @property
    def plot_height(self) -> int:
        return self.height - self.top - self.bottom


def _n(value: float) -> str:
    return f"{value:.1f}"


def nice_step(maximum: float, ticks: int = 4) -> float:
    """A round tick step (1, 2, 2.5 or 5 × a power of ten) covering `maximum` in ~`ticks`."""
    if maximum <= 0:
        return 1.0
    raw = maximum / ticks
    magnitude = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * magnitude:
            return factor * magnitude
    return 10 * magnitude  # pragma: no cover - the loop always returns


def _money_label(value: float, step: float) -> str:
    """`value` with as many decimals as the tick step needs ($0.25, $0.00005, $5)."""
    exponent = Decimal(repr(step)).normalize().as_tuple().exponent
    places = min(8, max(0, -int(exponent)))
    return f"${value:,.{places}f}"


def _count_label(value: float, step: float) -> str:
    """A token count for an axis tick: 0, 500, 1.5k, 2M."""
    for size, suffix in ((1_000_000, "M"), (1_000, "k")):
        if value >= size:
            scaled = value / size
            return f"{scaled:,.1f}".removesuffix(".0") + suffix
    return f"{value:,.0f}"


def stacked_cost_chart(
    *,
    days: list[date],
    cost_by_day_mode: dict[date, dict[str, Decimal]],
    title: str,
    box: Box | None = None,
) -> SafeString:
    """Stacked bars of billed cost per day, one colour per mode."""
    return _stacked_chart(
        days=days,
        by_day_mode=cost_by_day_mode,
        title=title,
        axis_label=gettext("Billed cost (USD)"),
        tick_label=_money_label,
        tooltip=lambda amount: f"${amount:.8f}",
        box=box,
    )


def stacked_token_chart(
    *,
    days: list[date],
    tokens_by_day_mode: dict[date, dict[str, int]],
    title: str,
    box: Box | None = None,
) -> SafeString:
    """Stacked bars of tokens (prompt + completion) per day, one colour per mode: the chart for
    a period whose calls cost nothing, where a cost chart would be empty."""
    return _stacked_chart(
        days=days,
        by_day_mode={
            day: {mode: Decimal(n) for mode, n in row.items()}
            for day, row in tokens_by_day_mode.items()
        },
        title=title,
        axis_label=gettext("Tokens"),
        tick_label=_count_label,
        tooltip=lambda amount: f"{int(amount):,} tokens",
        box=box,
    )


def _stacked_chart(
    *,
    days: list[date],
    by_day_mode: dict[date, dict[str, Decimal]],
    title: str,
    axis_label: str,
    tick_label: Callable[[float, float], str],
    tooltip: Callable[[Decimal], str],
    box: Box | None = None,
) -> SafeString:
    """Stacked bars per day, one colour per mode, with axes, labels, a legend and a `<title>`
    tooltip on every segment."""
    box = box or Box()
    modes_used = sorted({mode for row in by_day_mode.values() for mode in row})
    totals = [float(sum(by_day_mode.get(day, {}).values(), Decimal(0))) for day in days]
    peak = max(totals, default=0.0)
    step = nice_step(peak)
    top = step * max(1, math.ceil(peak / step)) if peak > 0 else step * 4
    scale = _Scale(box=box, step=step, top=top, days=len(days))
    parts: list[SafeString] = [
        format_html('<text x="{}" y="22" class="chart-title">{}</text>', box.left, title),
        *_grid(scale, tick_label),
        *_bars(scale, days, by_day_mode, modes_used, tooltip),
        _axes(box, axis_label),
        *_legend(box, modes_used),
    ]
    style = mark_safe(
        "<style>.grid{stroke:#ddd;stroke-width:1}.axis{stroke:#666;stroke-width:1}"
        ".tick{font:11px sans-serif;fill:#555}.legend{font:12px sans-serif;fill:#333}"
        ".axis-label{font:12px sans-serif;fill:#333}"
        ".chart-title{font:bold 13px sans-serif;fill:#333}</style>"
    )
    return format_html(
        '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {} {}" width="100%" '
        'role="img" aria-label="{}">{}{}</svg>',
        box.width,
        box.height,
        title,
        style,
        format_html_join("", "{}", ((part,) for part in parts)),
    )


@dataclass(frozen=True)
class _Scale:
    """Where a chart's values and days go: `top` is the value at the top of the plot, `step`
    the one between grid lines."""

    box: Box
    step: float
    top: float
    days: int

    @property
    def per_unit(self) -> float:
        return self.box.plot_height / self.top

    @property
    def base_y(self) -> int:
        return self.box.top + self.box.plot_height

    @property
    def slot(self) -> float:
        return self.box.plot_width / max(1, self.days)


def _grid(scale: _Scale, tick_label: Callable[[float, float], str]) -> list[SafeString]:
    """Grid lines and y tick labels."""
    box, parts = scale.box, []
    for index in range(round(scale.top / scale.step) + 1):
        value = scale.step * index
        y = scale.base_y - value * scale.per_unit
        parts.append(
            format_html(
                '<line x1="{}" y1="{}" x2="{}" y2="{}" class="grid"/>'
                '<text x="{}" y="{}" class="tick" text-anchor="end">{}</text>',
                box.left,
                _n(y),
                box.left + box.plot_width,
                _n(y),
                box.left - 6,
                _n(y + 4),
                tick_label(value, scale.step),
            )
        )
    return parts


def _bars(
    scale: _Scale,
    days: list[date],
    by_day_mode: dict[date, dict[str, Decimal]],
    modes_used: list[str],
    tooltip: Callable[[Decimal], str],
) -> list[SafeString]:
    """One bar per day, a segment per mode, and a label under every few days."""
    parts: list[SafeString] = []
    bar = max(1.0, scale.slot * 0.72)
    label_every = max(1, math.ceil(len(days) / 15))
    for index, day in enumerate(days):
        x = scale.box.left + index * scale.slot + (scale.slot - bar) / 2
        y = float(scale.base_y)
        for mode in modes_used:
            amount = by_day_mode.get(day, {}).get(mode)
            if not amount:
                continue
            height = float(amount) * scale.per_unit
            y -= height
            parts.append(
                format_html(
                    '<rect x="{}" y="{}" width="{}" height="{}" fill="{}">'
                    "<title>{} · {}: {}</title></rect>",
                    _n(x),
                    _n(y),
                    _n(bar),
                    _n(max(height, 0.5)),
                    mode_color(mode),
                    day.isoformat(),
                    mode,
                    tooltip(amount),
                )
            )
        if index % label_every == 0:
            parts.append(
                format_html(
                    '<text x="{}" y="{}" class="tick" text-anchor="middle">{}</text>',
                    _n(x + bar / 2),
                    scale.base_y + 16,
                    day.strftime("%m-%d"),
                )
            )
    return parts


def _axes(box: Box, axis_label: str) -> SafeString:
    """The axes and their labels."""
    base_y = box.top + box.plot_height
    return format_html(
        '<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" class="axis"/>'
        '<line x1="{0}" y1="{2}" x2="{3}" y2="{2}" class="axis"/>'
        '<text x="{4}" y="{5}" class="axis-label" text-anchor="middle">{8}</text>'
        '<text x="16" y="{6}" class="axis-label" text-anchor="middle" '
        'transform="rotate(-90 16 {6})">{7}</text>',
        box.left,
        box.top,
        base_y,
        box.left + box.plot_width,
        _n(box.left + box.plot_width / 2),
        box.height - 12,
        _n(box.top + box.plot_height / 2),
        axis_label,
        gettext("Day"),
    )


def _legend(box: Box, modes_used: list[str]) -> list[SafeString]:
    """A swatch and a name per mode, top right."""
    legend_x = box.left + box.plot_width - 120 * max(1, len(modes_used))
    parts = []
    for index, mode in enumerate(modes_used or ["no usage"]):
        lx = legend_x + index * 120
        parts.append(
            format_html(
                '<rect x="{}" y="12" width="12" height="12" fill="{}"/>'
                '<text x="{}" y="22" class="legend">{}</text>',
                lx,
                mode_color(mode),
                lx + 16,
                mode,
            )
        )
    return parts
