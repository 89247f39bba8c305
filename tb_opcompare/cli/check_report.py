"""The check document as text for a terminal and as Markdown for a pull-request comment."""

from __future__ import annotations

from tb_opcompare.errors import escape_control_characters
from tb_opcompare.schema.contract import CheckDocument, CheckRow
from tb_opcompare.schema.dimensions import DETECTION_POWER, FALSE_DISCOVERY_RATE
from tb_opcompare.text import (
    format_interval,
    format_part_change,
    format_percent,
    format_share,
    format_speedup,
    format_time,
)

SHOWN = 10  # regressions and improvements listed in full; the rest are counted


def _columns(row: CheckRow) -> list[str]:
    share = max(row.baseline_share, row.target_share)
    return [
        row.key,
        row.verdict,
        format_speedup(row.speedup),
        format_speedup(row.adjusted_speedup),
        format_interval(row.speedup_low, row.speedup_high, row.interval_level),
        format_time(row.baseline_mean_us),
        format_time(row.target_mean_us),
        format_share(share),
    ]


_HEADERS = ["op", "verdict", "speedup", "adjusted", "interval (confidence)", "baseline mean", "target mean", "share"]


def _sections(document: CheckDocument) -> list[tuple[str, list[CheckRow]]]:
    gated = [row for row in document.rows if row.gated]
    return [
        (f"Regressions ({document.slower})", [row for row in gated if row.verdict == "slower"][:SHOWN]),
        (
            f"New in the target ({document.only_target})",
            [row for row in gated if row.verdict == "only in target"][:SHOWN],
        ),
        (f"Improvements ({document.faster})", [row for row in gated if row.verdict == "faster"][:SHOWN]),
        (
            f"Gone from the target ({document.only_baseline})",
            [row for row in gated if row.verdict == "only in baseline"][:SHOWN],
        ),
    ]


def _evidence(document: CheckDocument) -> list[str]:
    """What the runs could show, and which of them were outliers for the whole step."""
    lines = []
    if document.detectable_change is not None:
        lines.append(
            f"power:    the smallest detectable change here is {document.detectable_change:.0%} "
            f"({document.detectable_key}; flagged in {DETECTION_POWER:.0%} of checks)"
            + (
                ""
                if document.enough_evidence
                else f": not enough evidence for a {format_percent(document.threshold)} gate"
            )
        )
    grown = sorted((part for part in document.step_parts if part.side == "host" and part.change_us > 0), key=_by_growth)
    if grown:
        lines.append(
            "step:     grew most in "
            + "; then ".join(format_part_change(p.label, p.change_us, p.low_us, p.high_us) for p in grown[:3])
        )
    elif document.step_parts:
        lines.append("step:     no part of the step grew")
    if document.outlier_runs:
        lines.append(
            f"outliers: {', '.join(document.outlier_runs)} (the whole step far from the rest of their side; "
            "left out of its test)"
        )
    return lines


def _by_growth(part) -> float:
    return -part.change_us


def markdown(document: CheckDocument) -> str:
    def cell(text: str) -> str:
        return escape_control_characters(text).replace("|", "\\|").replace("`", "'")

    mark = ("✅" if document.enough_evidence else "⚠️") if document.passed else "❌"
    lines = [
        f"### {mark} tb-opcompare check: {cell(document.headline)}",
        "",
        f"Baseline: {cell(', '.join(document.baseline))}{cell(_stored(document))} · "
        f"target: {cell(', '.join(document.target))} · "
        f"threshold {format_percent(document.threshold)} · ops above {format_percent(document.min_share)} of time"
        + (f" matching `{cell(document.ops)}`" if document.ops else ""),
        *(part for line in _evidence(document) for part in ("", cell(line))),
        "",
        "| " + " | ".join(_HEADERS) + " |",
        "|" + "---|" * len(_HEADERS),
        "| " + " | ".join(cell(c) for c in _columns(document.whole_step)) + " |",
    ]
    for title, rows in _sections(document):
        if rows:
            lines += ["", f"**{title}**", "", "| " + " | ".join(_HEADERS) + " |", "|" + "---|" * len(_HEADERS)]
            lines += ["| " + " | ".join(cell(c) for c in _columns(row)) + " |" for row in rows]
    lines += [
        "",
        f"<sub>Speedup = baseline mean / target mean per execution (> 1: faster); *adjusted* and the "
        f"interval: {cell(document.noise)}; verdicts hold the false discovery rate at "
        f"{FALSE_DISCOVERY_RATE / 2:.1%} over {document.slower + document.faster + document.within_noise} tested "
        f"ops, the whole step is tested on its own at {FALSE_DISCOVERY_RATE / 2:.1%} (never adjusted), so where "
        f"nothing changed the chance of a failed check is held at {FALSE_DISCOVERY_RATE:.0%}; each tested interval "
        f"is at the confidence its verdict "
        f"was decided at: it clears the threshold exactly when the row is flagged.</sub>",
    ]
    lines += [f"> ⚠️ {cell(warning)}" for warning in document.warnings]
    return "\n".join(lines) + "\n"


def _stored(document: CheckDocument) -> str:
    """`` (in s3://team/baselines/main)`` for a baseline read from a logdir of its own."""
    return f" (in {document.baseline_logdir})" if document.baseline_logdir else ""


def text(document: CheckDocument) -> str:
    lines = [
        escape_control_characters(document.headline),
        f"baseline: {', '.join(document.baseline)}{_stored(document)}",
        f"target:   {', '.join(document.target)}",
        f"noise:    {document.noise}",
        "",
    ]
    lines[4:4] = _evidence(document)
    rows = [_HEADERS, _columns(document.whole_step)]
    for _, section in _sections(document):
        rows += [_columns(row) for row in section]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADERS))]
    lines += ["  ".join(value.ljust(width) for value, width in zip(row, widths)).rstrip() for row in rows]
    lines += [f"warning: {warning}" for warning in document.warnings]
    return "\n".join(escape_control_characters(line) for line in lines) + "\n"


def junit(document: CheckDocument) -> str:
    """The check as JUnit XML, for CI systems that read test reports (GitLab, Jenkins,
    Azure): one test case a gated op and one for the whole step; a case fails where its
    verdict is ``slower``, and the suite's properties carry the verdict and the power. An
    op outside the gate is not a test."""
    from xml.sax.saxutils import escape, quoteattr

    def case(row: CheckRow) -> str:
        name = quoteattr(escape_control_characters(row.key))
        detail = (
            f"{row.verdict}: speedup {format_speedup(row.speedup)}, adjusted {format_speedup(row.adjusted_speedup)}, "
            f"interval {format_interval(row.speedup_low, row.speedup_high, row.interval_level)}; baseline "
            f"{format_time(row.baseline_mean_us)}, target {format_time(row.target_mean_us)}"
        )
        body = (
            f"<failure message={quoteattr(f'significantly slower beyond {format_percent(document.threshold)}')}>"
            f"{escape(detail)}</failure>"
            if row.verdict == "slower"
            else f"<system-out>{escape(detail)}</system-out>"
        )
        return f'    <testcase classname="tb-opcompare.check" name={name}>{body}</testcase>'

    gated = [document.whole_step, *(row for row in document.rows if row.gated)]
    failures = sum(row.verdict == "slower" for row in gated)
    properties = {
        "verdict": document.headline,
        "enough_evidence": str(document.enough_evidence).lower(),
        "detectable_change": "" if document.detectable_change is None else f"{document.detectable_change:.4f}",
        "baseline": ", ".join(document.baseline) + _stored(document),
        "target": ", ".join(document.target),
    }
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<testsuites name="tb-opcompare check" tests="{len(gated)}" failures="{failures}">',
        f'  <testsuite name="tb-opcompare check" tests="{len(gated)}" failures="{failures}" errors="0">',
        "    <properties>",
        *(
            f"      <property name={quoteattr(key)} value={quoteattr(escape_control_characters(value))}/>"
            for key, value in properties.items()
        ),
        "    </properties>",
        *(case(row) for row in gated),
        "  </testsuite>",
        "</testsuites>",
    ]
    return "\n".join(lines) + "\n"
