"""The requests of the HTTP API and the CLI: each parameter's rule (what its text may be,
its bounds), its default and its meaning, written once as a field of a frozen dataclass.

The routes read a query through ``parse_request`` (a ``UsageError`` naming the parameter
at fault, answered 400); the CLI's options take their rule, default and help from the same
fields (``cli.common.add_request_option``: a bad value is argparse's usage error, exit 2,
in the same words); ``docs/http_api.md`` lists each route's parameters from them
(``parameters_text``, through ``schema/contract.py``'s ``ROUTES``).

Dataclasses, not msgspec Structs like the documents: the CLI builds its parser from these
at every start, and msgspec (45 ms of a 0.2 s ``--help``) stays out of that until a
command prints a document. A parameter left out or empty takes its default, as the tab
sends empty values for fields the user cleared; parameters a request does not declare are
ignored.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from tb_opcompare.errors import UsageError
from tb_opcompare.schema.dimensions import (
    COMPARE_GROUP_BY,
    DEFAULT_MIN_SHARE,
    DEFAULT_THRESHOLD,
    DEVICE_STEP_CATEGORIES,
    GROUP_BY,
    SERIES_DIMENSIONS,
    STEP_CATEGORIES,
)
from tb_opcompare.text import format_percent, parse_share

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Request = TypeVar("Request", bound="DataclassInstance")

MAX_PATTERN = 500  # a filter's longest text: no request makes the server match a novel against every op
SIDE_FILTERS = ("all", "host", "device")
ORDERS = ("desc", "asc")
PLOT_TOP, MAX_PLOT_TOP = 10, 50  # the ops a sweep or trend draws: more lines than 50 no one can tell apart


# ---------------------------------------------------------------------------------------------
# Rules: how one parameter's text becomes its value. Each raises ValueError saying what was
# expected, without the parameter's name: the route prefixes `name: `, argparse
# `argument --name: `, so both say the same words about the same rule.


class Rule:
    """What a parameter's text may be; ``parse`` makes its value, ``doc`` says it in the API's doc."""

    def parse(self, text: str) -> Any:
        return text

    def doc(self) -> str:
        return ""

    def shown(self, value: Any) -> str:
        """A default as a user types it."""
        return str(value)


@dataclasses.dataclass(frozen=True)
class Text(Rule):
    """Free text; ``max_length`` bounds a filter's pattern."""

    max_length: int | None = None

    def parse(self, text: str) -> str:
        if self.max_length is not None and len(text) > self.max_length:
            raise ValueError(f"longer than {self.max_length} characters")
        return text

    def doc(self) -> str:
        return "" if self.max_length is None else f"at most {self.max_length} characters"


@dataclasses.dataclass(frozen=True)
class Count(Rule):
    """A whole number from ``low`` up to ``high`` (None: no bound above), in ASCII digits."""

    low: int
    high: int | None = None

    def parse(self, text: str) -> int:
        value = int(text) if text.isascii() and text.isdigit() and len(text) < 19 else None
        if value is None or value < self.low or (self.high is not None and value > self.high):
            raise ValueError(f"expected {self.doc()}, not {text!r}")
        return value

    def doc(self) -> str:
        if self.high is None:
            return f"an integer of {self.low} or more"
        return f"an integer from {self.low} to {self.high}"


@dataclasses.dataclass(frozen=True)
class Number(Rule):
    """A finite number of ``low`` or more."""

    low: float = 0.0

    def parse(self, text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"expected a number, not {text!r}") from None
        if not math.isfinite(value) or value < self.low:
            raise ValueError(f"expected {self.doc()}, not {text!r}")
        return value

    def doc(self) -> str:
        return f"a number of {self.low:g} or more"

    def shown(self, value: Any) -> str:
        return f"{value:g}"


@dataclasses.dataclass(frozen=True)
class Flag(Rule):
    """``0`` or ``1``; the CLI's switch (``--repeats``) where it has one."""

    def parse(self, text: str) -> bool:
        if text not in ("0", "1"):
            raise ValueError(f"expected 0 or 1, not {text!r}")
        return text == "1"

    def doc(self) -> str:
        return "0|1"

    def shown(self, value: Any) -> str:
        return "1" if value else "0"


@dataclasses.dataclass(frozen=True)
class Choice(Rule):
    """One of ``options``; ``why`` adds a reason for a value the user may mean elsewhere."""

    options: tuple[str, ...]
    why: Callable[[str], str] | None = None

    def parse(self, text: str) -> str:
        if text not in self.options:
            why = self.why(text) if self.why else ""
            raise ValueError(f"expected one of {', '.join(self.options)}, not {text!r}{why}")
        return text

    def doc(self) -> str:
        return "|".join(self.options)


@dataclasses.dataclass(frozen=True)
class Column(Rule):
    """A column of a document's table, to sort by; ``columns`` names them when asked, so
    the contract's Structs (msgspec) load only when a sort is given."""

    columns: Callable[[], Sequence[str]]
    table: str

    def parse(self, text: str) -> str:
        columns = self.columns()
        if text not in columns:
            raise ValueError(f"unknown column {text!r}; columns: {', '.join(columns)}")
        return text

    def doc(self) -> str:
        return f"a field of {self.table}"


@dataclasses.dataclass(frozen=True)
class Subset(Rule):
    """Some of ``options``, comma-separated."""

    options: Callable[[], Sequence[str]]

    def parse(self, text: str) -> tuple[str, ...]:
        chosen = tuple(part for part in text.split(",") if part)
        options = self.options()
        if not chosen or any(part not in options for part in chosen):
            raise ValueError(f"expected a comma-separated subset of {', '.join(options)}")
        return chosen

    def doc(self) -> str:
        return "comma list"

    def shown(self, value: Any) -> str:
        return ",".join(value)


@dataclasses.dataclass(frozen=True)
class Share(Rule):
    """A share such as ``5%`` or ``0.05`` (``text.parse_share``)."""

    def parse(self, text: str) -> float:
        return parse_share(text)

    def doc(self) -> str:
        return "`5%` or `0.05`"

    def shown(self, value: Any) -> str:
        return format_percent(value)


@dataclasses.dataclass(frozen=True)
class Repeated(Rule):
    """A parameter given any number of times (``key=a&key=b``), each value whole (op names
    may hold commas); empty ones left out, none at all the default."""

    def doc(self) -> str:
        return "repeatable"


# The most rows the compare route answers unless asked for all (``full``), and the most the
# tab holds (contract.js COMPARE_PAGE, frontend/state.js): a million-op comparison was one
# 858 MB answer.
COMPARE_PAGE_ROWS = 20_000
ROWS = Count(1)  # how many rows to show: the compare view's `top`, and the CLI pages' own

# ---------------------------------------------------------------------------------------------
# Fields


REQUIRED: Any = dataclasses.MISSING


def param(rule: Rule, meaning: str, default: Any = REQUIRED, unset: str = "") -> Any:
    """A request's field: its rule, its meaning (the API doc's and the CLI's help), its
    default (REQUIRED: the request is refused without it), and what a default of None
    means (``unset``: "all", "detected per run")."""
    metadata = {"rule": rule, "meaning": meaning, "unset": unset}
    if default is REQUIRED:
        return dataclasses.field(metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class Parameter:
    """One field of a request, as the parser, the CLI and the doc read it."""

    name: str
    rule: Rule
    meaning: str
    default: Any
    required: bool
    unset: str


def parameters(request: type[DataclassInstance]) -> tuple[Parameter, ...]:
    return tuple(
        Parameter(
            field.name,
            field.metadata["rule"],
            field.metadata["meaning"],
            None if field.default is dataclasses.MISSING else field.default,
            field.default is dataclasses.MISSING,
            field.metadata["unset"],
        )
        for field in dataclasses.fields(request)
    )


def parameter(request: type[DataclassInstance], name: str) -> Parameter:
    (found,) = (declared for declared in parameters(request) if declared.name == name)
    return found


def parse_request(request: type[Request], params: Mapping[str, Any]) -> Request:
    """``params`` (a query's arguments: a werkzeug MultiDict, or a dict of strings or lists
    of them) as ``request``. UsageError naming the parameter at fault: every missing one
    (the first as the parameter), else the first bad value in the request's order."""
    declared = parameters(request)
    missing = [field.name for field in declared if field.required and not _first(params, field.name)]
    if missing:
        raise UsageError(f"missing parameter: {', '.join(missing)}", missing[0])
    values: dict[str, Any] = {}
    for field in declared:
        if isinstance(field.rule, Repeated):
            given = tuple(value for value in _every(params, field.name) if value)
            if given:
                values[field.name] = given
            continue
        text = _first(params, field.name)
        if not text:
            continue  # left out or cleared: the default
        try:
            values[field.name] = field.rule.parse(text)
        except ValueError as error:
            raise UsageError(f"{field.name}: {error}", field.name) from None
    return request(**values)


def _every(params: Mapping[str, Any], name: str) -> list[str]:
    values = params.getlist(name) if hasattr(params, "getlist") else params.get(name)
    if values is None:
        return []
    return [values] if isinstance(values, str) else list(values)


def _first(params: Mapping[str, Any], name: str) -> str:
    values = _every(params, name)
    return values[0] if values else ""


def parameters_text(*requests: type[DataclassInstance]) -> str:
    """The parameters of ``requests`` as the API doc's table lists them, in their order."""
    return "; ".join(_parameter_text(field) for request in requests for field in parameters(request))


def _parameter_text(field: Parameter) -> str:
    choices = isinstance(field.rule, (Choice, Flag))  # their values are shown with the name
    name = f"`{field.name}={field.rule.doc()}`" if choices else f"`{field.name}`"
    said = qualifiers(field)
    return name + (f" ({', '.join(said)})" if said else "") + f": {field.meaning}"


def qualifiers(field: Parameter) -> list[str]:
    """What the API doc and the CLI's help say of a field beside its meaning: its rule (but
    a choice's, whose values they list), whether it is required, its default."""
    said = [] if isinstance(field.rule, (Choice, Flag)) or not field.rule.doc() else [field.rule.doc()]
    if field.required:
        said.append("required")
    elif field.default not in (None, "", ()):
        said.append(f"default {field.rule.shown(field.default)}")
    elif field.unset:
        said.append(f"default: {field.unset}")
    return said


# ---------------------------------------------------------------------------------------------
# The requests


def _group_by_why(value: str) -> str:
    if value in COMPARE_GROUP_BY:
        return " (modules are for the compare table: confidence, sweeps and trends are per op or op type)"
    return ""


def _compare_columns() -> Sequence[str]:
    from tb_opcompare.schema.contract import COMPARE_COLUMNS

    return COMPARE_COLUMNS


def _fit_columns() -> Sequence[str]:
    from tb_opcompare.schema.contract import Fit

    return Fit.__struct_fields__


def _statuses() -> Sequence[str]:
    from tb_opcompare.schema.contract import STATUSES

    return STATUSES


# Fields several requests share, one rule each (a function: a dataclass field belongs to one class)
def _group_by_ops() -> Any:
    return param(Choice(GROUP_BY, _group_by_why), "what a row is: an op by name, or an op type", "name")


def _plot_top() -> Any:
    return param(
        Count(1, MAX_PLOT_TOP), "how many ops to plot (and list), those with the largest share of op time", PLOT_TOP
    )


def _order() -> Any:
    return param(Choice(ORDERS), "the sort's direction", "desc")


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunsRequest:
    load: bool = param(Flag(), "0: read no trace (cached facts, else sidecars and names)", True)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PairRequest:
    """Two runs of a page beside Compare (modules, layers, memory, roofline)."""

    baseline: str = param(Text(), "the baseline run")
    target: str = param(Text(), "the target run")
    baseline_session: str | None = param(Text(), "a session of the run", None, "its newest")
    target_session: str | None = param(Text(), "a session of the run", None, "its newest")


@dataclasses.dataclass(frozen=True, kw_only=True)
class CompareRequest:
    baseline: str = param(Text(), "a run, or a run group: runs and shell patterns, comma list, their executions pooled")
    target: str = param(Text(), "a run or a run group, as `baseline`")
    repeats: bool = param(
        Flag(), "pool each side's repeats (the runs of its model, device, batch size and label)", False
    )
    group_by: str = param(
        Choice(COMPARE_GROUP_BY, _group_by_why),
        "what a row is: an op by name, an op type, or a module: PyTorch nn.Module calls, else TF name scopes",
        "name",
    )
    baseline_session: str | None = param(Text(), "a session of the baseline, a side of one run", None, "its newest")
    target_session: str | None = param(Text(), "a session of the target, a side of one run", None, "its newest")
    significant: bool = param(
        Flag(),
        "only the ops the `check` of the two sides, each with its repeats, finds significantly changed "
        "(CheckRow.significant)",
        False,
    )
    full: bool = param(
        Flag(),
        f"`compare`: every row the view keeps; without it (and without `top`) the first {COMPARE_PAGE_ROWS:,} "
        "(`total_rows` and `view_rows` count them all); `compare.csv` has them all",
        False,
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ViewRequest:
    """Which compare rows a user sees, in which order (``analysis.row_view.RowView``)."""

    q: str = param(Text(MAX_PATTERN), "keep ops whose key or type holds this (any case), or match `/regex/` (RE2)", "")
    status: tuple[str, ...] | None = param(
        Subset(_statuses), "keep ops of these statuses (CompareRow.status)", None, "all"
    )
    side: str = param(
        Choice(SIDE_FILTERS),
        "keep ops whose time came from the host, or the device, in the baseline or the target",
        "all",
    )
    min_us: float = param(Number(), "keep ops whose larger total time (either side) is at least this, µs", 0.0)
    key: tuple[str, ...] | None = param(Repeated(), "keep only these op keys", None)
    sort: str | None = param(
        Column(_compare_columns, "CompareRow"), "the column to sort by", None, "the most time first"
    )
    order: str = _order()
    top: int | None = param(ROWS, "show only the first N rows", None, "all")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SweepRequest:
    model: str = param(Text(), "the model key (`sweeps` lists those that can be swept)")
    top: int = _plot_top()
    ops: tuple[str, ...] | None = param(Repeated(), "plot these ops instead", None)
    group_by: str = _group_by_ops()
    series_by: str = param(
        Choice(SERIES_DIMENSIONS),
        "what the lines are drawn by; speedups and break-evens are against CPU, fp32 or eager",
        "device",
    )
    device: str | None = param(Text(), "the device to hold", None, "the one most runs were recorded on")
    precision: str | None = param(Text(), "the precision to hold", None, "the model key's")
    compiler: str | None = param(Text(), "the compiler to hold", None, "the model key's")


@dataclasses.dataclass(frozen=True, kw_only=True)
class FitsTableRequest:
    """The sweep's fits table as the tab shows it: its filter and its sort."""

    op_contains: str = param(Text(MAX_PATTERN), "keep fits whose op holds this (any case)", "")
    sort: str | None = param(Column(_fit_columns, "Fit"), "the column to sort by", None)
    order: str = _order()


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrendRequest:
    runs: str = param(Text(), "runs, comma list; shell patterns such as `resnet_cpu_bs32_*` work")
    order_by: str = param(
        Text(),
        "`recorded`, `label`, `run`, `repeat`, `device`, `batch_size`, `precision`, `compiler`, or `sidecar:<field>` "
        "(e.g. `sidecar:versions.torch`)",
        "recorded",
    )
    top: int = _plot_top()
    group_by: str = _group_by_ops()


@dataclasses.dataclass(frozen=True, kw_only=True)
class CheckRequest:
    baseline: str = param(Text(), "baseline runs, comma list; shell patterns such as `base_cpu_bs32_rep*` work")
    target: str = param(Text(), "target runs, as `baseline`")
    repeats: bool = param(Flag(), "add each run's repeats (same model, device, batch size and label)", False)
    max_regression: float = param(Share(), "the slowdown tolerated", DEFAULT_THRESHOLD)
    min_share: float = param(Share(), "gate only ops with at least this share of op time on a side", DEFAULT_MIN_SHARE)
    ops: str | None = param(Text(), "gate only the ops whose name matches (RE2 syntax)", None)
    group_by: str = _group_by_ops()
    allow_one_run: bool = param(
        Flag(),
        "accept one run on a side (indicative only: one run cannot tell a regression from a hiccup of the machine)",
        False,
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class MatrixRequest:
    reference: str | None = param(
        Text(),
        "the column speedups are against, in each row: `DEVICE/precision/compiler`",
        None,
        "CPU where present",
    )
    warmup: int | None = param(Count(0), "leave out the first N steps of every run", None, "detected per run")
    model: tuple[str, ...] | None = param(Repeated(), "only these models", None)
    part: str | None = param(
        Text(),
        "also each cell's time in one part of the step and its speedup: "
        + ", ".join(f"`{part}`" for part in {**STEP_CATEGORIES, **DEVICE_STEP_CATEGORIES}),
        None,
    )
