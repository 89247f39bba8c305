"""Numbers and names as users read them, in the CLI and the offline HTML report.

The tab writes the same with ``frontend/format.js``; both run the cases of
``tests/golden/text_cases.json``, so a figure reads the same wherever it is shown
(``384 µs``, ``59.1×``, ``−12.0 µs``, ``12.5%``).
"""

from __future__ import annotations

import collections
import math
import re
from decimal import ROUND_HALF_UP, Decimal

MISSING = "–"
MINUS = "−"


def _fixed(value: float, digits: int) -> str:
    """``value`` with ``digits`` decimals, rounded as JavaScript's ``toFixed`` does (half
    away from zero, on the exact binary value), so both sides print the same digits."""
    text = str(Decimal(value).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))
    return "0" + text[2:] if text.startswith("-0") and Decimal(text) == 0 else text


def format_time(us: float | None) -> str:
    if us is None:
        return MISSING
    magnitude = abs(us)
    if magnitude >= 1e6:
        return f"{_fixed(us / 1e6, 2)} s"
    if magnitude >= 1e3:
        return f"{_fixed(us / 1e3, 0 if magnitude >= 1e5 else 1 if magnitude >= 1e4 else 2)} ms"
    if magnitude >= 100:
        return f"{_fixed(us, 0)} µs"
    if magnitude >= 10:
        return f"{_fixed(us, 1)} µs"
    return f"{_fixed(us, 2)} µs"


def format_signed_time(us: float | None) -> str:
    if us is None:
        return MISSING
    return ("+" if us > 0 else MINUS if us < 0 else "") + format_time(abs(us))


def format_bytes(size: float | None) -> str:
    """``1536`` -> ``1.50 KiB``; three significant digits, binary units as memory tools use."""
    if size is None:
        return MISSING
    magnitude = abs(size)
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if magnitude >= scale:
            value = size / scale
            return f"{_fixed(value, 2 if abs(value) < 10 else 1 if abs(value) < 100 else 0)} {unit}"
    return f"{_fixed(size, 0)} B"  # rounded as the tab rounds (a mean per call can be a fraction of a byte)


def format_seconds(seconds: float) -> str:
    """``75`` -> ``1 m 15 s``: a wait, to the second (to the minute past an hour)."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, rest = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} m {rest} s" if rest else f"{minutes} m"
    return f"{minutes // 60} h {minutes % 60} m"


def format_reads(reads: list[dict]) -> str:
    """The slow reads under way as one line (the CLI's stderr, the tab's spinner):
    ``Reading torch/run (1.00 GiB): 6 s, about 5 s left (and 1 more)``; "" for none."""
    if not reads:
        return ""
    read, left = reads[0], reads[0]["seconds_left"]
    return (
        f"Reading {read['run']} ({format_bytes(read['bytes'])}): {format_seconds(read['seconds'])}"
        + (f", about {format_seconds(left)} left" if left is not None else "")
        + (f" (and {len(reads) - 1} more)" if len(reads) > 1 else "")
    )


def format_share(share: float | None) -> str:
    if share is None:
        return MISSING
    percent = share * 100
    return f"{_fixed(percent, 1 if percent >= 10 else 2)}%"


_SI = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def format_rate(value: float | None, unit: str) -> str:
    """A rate or size with an SI prefix, three significant digits: ``3.91 TFLOP/s``; mirrored
    by frontend/format.js ``formatRate``."""
    if value is None:
        return MISSING
    rounded = float(f"{value:.3g}")  # first, so 999,999 reads 1 M, not 1000 k
    scale, prefix = next(((scale, prefix) for scale, prefix in _SI if abs(rounded) >= scale), (1.0, ""))
    return f"{rounded / scale:.3g} {prefix}{unit}"


def format_percent(fraction: float) -> str:
    """A setting given as a share, as the user would type it: ``0.05`` -> ``5%``."""
    return f"{round(fraction * 100, 4):g}%"


def parse_share(text: str) -> float:
    """``5%`` or ``0.05`` -> ``0.05``; ValueError, saying what is expected, otherwise."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise ValueError(f"expected a share such as 5% or 0.05, not {text!r}") from None
    if not 0 <= value < 10:
        raise ValueError(f"expected a share between 0% and 1000%, not {text!r}")
    return value


def format_speedup(speedup: float | None) -> str:
    if speedup is None:
        return MISSING
    return f"{_fixed(speedup, _speedup_digits(speedup))}×"


def _speedup_digits(speedup: float) -> int:
    """Decimals: none from 100×, one from 10×, two down to 0.1×, and two significant
    digits below (0.0024×: different work, a hundredfold slower, never a bare 0.00×)."""
    if speedup >= 100:
        return 0
    if speedup >= 10:
        return 1
    if speedup >= 0.1 or speedup <= 0:
        return 2
    return min(MAX_SPEEDUP_DIGITS, 1 - math.floor(math.log10(speedup)))


MAX_SPEEDUP_DIGITS = 6


def format_interval(low: float | None, high: float | None, level: float | None = None) -> str:
    """An interval of a speedup: ``0.42× – 0.58×``, with its confidence where given
    (``0.42× – 0.58× (99.7%)``)."""
    if low is None or high is None:
        return MISSING
    return f"{format_speedup(low)} – {format_speedup(high)}" + (f" ({format_level(level)})" if level else "")


def format_level(level: float) -> str:
    """A confidence level: ``95%``, ``99.69%``: enough digits to tell it from 100%."""
    digits = 0
    while digits < 4 and round(level * 100, digits) >= 100:
        digits += 1
    digits = max(digits, 0 if round(level * 100) == level * 100 else 1)
    return f"{level * 100:.{digits}f}%"


def format_count(count: int | None) -> str:
    return MISSING if count is None else f"{count:,}"


def format_throughput(per_second: float | None) -> str:
    """Whole samples a second, read as counts ("4,736 samples/s"); halves round up, as the tab's."""
    return MISSING if per_second is None else f"{math.floor(per_second + 0.5):,} samples/s"


def format_breakeven(batch_size: float | None, target_faster: str | None, target: str | None) -> str:
    """Where an op's line on the target series (``GPU``, ``bf16``) crosses its line on the
    baseline, in words."""
    if batch_size is not None:
        size = _fixed(batch_size, 1 if batch_size < 10 else 0)
        return f"{target} faster {'below' if target_faster == 'below' else 'above'} {size}"
    return {
        "always": f"{target} always faster",
        "never": f"{target} never faster",
        "mixed": f"{target} faster at some sizes only",
    }.get(target_faster or "", MISSING)


ELLIPSIS = "…"


def shorten_names(names: list[str], length: int, keep: str = "") -> list[str]:
    """Each name cut to ``length`` characters so that the names stay told apart. Op names
    are scope paths that share most segments (``gradients/layer_1/weights/Apply…`` and
    ``gradients/layer_2/weights/Apply…``): segments shared with other names are elided
    first (longest first), then the others, never a name's own last segment nor one that
    holds ``keep`` (the text a filter matched); runs of elided segments become one
    ``…``. Where two different names would still read the same, the segments that tell
    them apart are kept too (a few rounds, as keeping them can meet a third name). A
    name still too long is cut in the middle."""
    shared = collections.Counter(segment for name in names for segment in set(name.split("/")[:-1]))
    needle = keep.lower()
    protected: dict[str, set[str]] = collections.defaultdict(set)
    short = [_shorten(name, length, shared, needle, set()) for name in names]
    for _ in range(_ROUNDS):
        readers: dict[str, set[str]] = collections.defaultdict(set)
        for name, text in zip(names, short):
            readers[text].add(name)
        alike = [group for group in readers.values() if len(group) > 1]
        if not alike:
            break
        for group in alike:
            common = set.intersection(*(set(name.split("/")) for name in group))
            for name in group:
                protected[name] |= set(name.split("/")) - common
        short = [_shorten(name, length, shared, needle, protected[name]) for name in names]
    return short


_ROUNDS = 3


def _shorten(name: str, length: int, shared: collections.Counter, needle: str, protected: set[str]) -> str:
    if len(name) <= length:
        return name
    parts = name.split("/")
    kept = [True] * len(parts)

    def joined() -> str:
        out: list[str] = []
        for part, keep in zip(parts, kept):
            if keep:
                out.append(part)
            elif not out or out[-1] != ELLIPSIS:
                out.append(ELLIPSIS)
        return "/".join(out)

    order = sorted(
        (i for i in range(len(parts) - 1) if parts[i] not in protected and not (needle and needle in parts[i].lower())),
        key=lambda i: (-shared[parts[i]], -len(parts[i]), i),
    )
    text = joined()
    for i in order:
        if len(text) <= length:
            break
        kept[i] = False
        text = joined()
    if len(text) <= length:
        return text
    tail = -(-(length - 1) * 3 // 5)
    return f"{name[: length - 1 - tail]}{ELLIPSIS}{name[len(name) - tail :]}"


def natural_key(text: str) -> tuple:
    """Orders ``2.9`` before ``2.10`` and ``rep2`` before ``rep10``: digit runs compare as
    numbers, the rest as text. (The tab shows names in the order documents give them.)"""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text) if part)


def format_part_change(label: str, change_us: float, low_us: float | None, high_us: float | None) -> str:
    """``waiting for input (+12.3 ms, 95% interval +8.10 ms to +16.4 ms)``: a part of the
    step and its change, with its interval where there is one."""
    if low_us is None or high_us is None:
        return f"{label} ({format_signed_time(change_us)})"
    return (
        f"{label} ({format_signed_time(change_us)}, 95% interval {format_signed_time(low_us)} to "
        f"{format_signed_time(high_us)})"
    )
