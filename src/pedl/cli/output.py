"""Printing: JSON (`--json`) or Rich tables on stdout, errors in red on stderr, time and state text.
Consoles are made per call so that they follow the current stdout/stderr and terminal width."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


PIPE_WIDTH = 1000  # piped output: tables as wide as their content, never folded at 80 columns


def out() -> Console:
    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(highlight=False, width=PIPE_WIDTH)
    return console


def err() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


def print_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None) -> None:
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(escape(cell_text(v)) for v in row))
    out().print(table)


def print_fields(pairs: Iterable[tuple[str, Any]], title: str | None = None) -> None:
    table = Table(title=title, title_justify="left", show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in pairs:
        table.add_row(escape(key), escape(cell_text(value)))
    out().print(table)


def say(message: str) -> None:
    """A plain line on stdout, printed as is (no Rich markup, so brackets survive)."""
    sys.stdout.write(message + "\n")
    sys.stdout.flush()


def info(message: str) -> None:
    err().print(escape(message), style="dim")


def warn(message: str) -> None:
    err().print(f"[yellow]warning:[/yellow] {escape(message)}")


def error_line(message: str) -> None:
    err().print(f"[red]error:[/red] [red]{escape(message)}[/red]")


def fail(message: str, code: int = 1) -> NoReturn:
    error_line(message)
    raise typer.Exit(code)


def cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(", ", ": "), default=str)
    return str(value)


_FRACTION = re.compile(r"(\.\d{6})\d+")


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    text = _FRACTION.sub(r"\1", value.strip()).replace("Z", "+00:00")
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def fmt_time(value: str | None) -> str:
    """RFC 3339 from the master -> local time `YYYY-MM-DD HH:MM:SS`; unparseable text is kept."""
    parsed = parse_time(value)
    if parsed is None:
        return value or ""
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone()
    return parsed.strftime("%Y-%m-%d %H:%M:%S")


def epoch_seconds(value: str | None) -> float | None:
    """RFC 3339 from the master -> seconds since the epoch (UTC where it names no zone); None if unparseable."""
    parsed = parse_time(value)
    if parsed is None:
        return None
    return (parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)).timestamp()


# Determined's wire enums name their type before the value; the longer prefixes come first
_ENUM_PREFIXES = (
    "RESOURCE_POOL_TYPE_",
    "SCHEDULER_TYPE_",
    "FITTING_POLICY_",
    "LOG_LEVEL_",
    "TASK_TYPE_",
    "ORDER_BY_",
    "SORT_BY_",
    "PRODUCT_",
    "STATE_",
    "TYPE_",
)
_ENUM = re.compile(r"[A-Z][A-Z0-9_]*")


def fmt_enum(value: str | None) -> str:
    """A wire enum for people: `STATE_COMPLETED` -> `COMPLETED`, `LOG_LEVEL_INFO` -> `INFO`, `TYPE_CUDA`
    -> `CUDA`; `..._UNSPECIFIED` says nothing, so it is "". Other text is kept; `--json` keeps wire values."""
    text = value or ""
    if not _ENUM.fullmatch(text):
        return text
    prefix = next((p for p in _ENUM_PREFIXES if text.startswith(p) and len(text) > len(p)), "")
    return "" if text.endswith("UNSPECIFIED") else text.removeprefix(prefix)


fmt_state = fmt_enum  # the name most callers use: states are the enums shown most


def fmt_bytes(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def fmt_percent(value: Any) -> str:
    return f"{float(value) * 100:.1f}%" if isinstance(value, int | float) else ""
