"""``tb-opcompare check``: the regression gate (its reports: ``cli.check_report``)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from tb_opcompare.cli.common import (
    EXIT_NOT_ENOUGH_EVIDENCE,
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_USAGE,
    add_request_option,
    add_run_list_option,
    escape_controls,
    json_text,
    open_catalog,
    percent_escaped,
    write_text,
)
from tb_opcompare.errors import ProfileError
from tb_opcompare.schema.dimensions import DETECTION_POWER, FALSE_DISCOVERY_RATE, evidence_rule
from tb_opcompare.schema.requests import CheckRequest

if TYPE_CHECKING:
    pass


def _add_check_reports(check: argparse.ArgumentParser) -> None:
    """Where the check's report goes: its format, a file, and the CI job's summary."""
    check.add_argument(
        "--format",
        choices=("text", "markdown", "json", "csv", "junit"),
        default="text",
        help="the report: text, Markdown (a pull-request comment), JSON, CSV, or JUnit XML (a test report for "
        "CI systems: a test case a gated op, failed where significantly slower)",
    )
    check.add_argument("--output", metavar="FILE", help="write the report to FILE as well as deciding the exit code")
    check.add_argument(
        "--no-job-summary",
        action="store_true",
        help="under GitHub Actions, do not append the Markdown report to the job's summary ($GITHUB_STEP_SUMMARY)",
    )


def add(commands: argparse._SubParsersAction, reading: argparse.ArgumentParser) -> None:
    check = commands.add_parser(
        "check",
        parents=[reading],
        help="fail (exit 1) when an op got significantly slower: a gate for CI",
        # not %-formatted by argparse (only help strings are): plain percent signs
        description="Compares two groups of runs (two or more each) op by op with 95% confidence intervals "
        "(Welch's t on the log of each run's typical time, the median of its steps, with each run's "
        f"overall speed taken out of its ops) and holds the chance of a false alarm at {FALSE_DISCOVERY_RATE:.0%} "
        "(the false discovery rate among the ops). Exits 0 when "
        "no op above --min-share (and not the whole step) is significantly slower by more than "
        "--max-regression, 1 when one is, 2 on usage errors, and with --strict 3 when nothing is flagged "
        f"but the runs could not have shown {evidence_rule('--max-regression')}, flagged in "
        f'{DETECTION_POWER:.0%} of checks ("not enough evidence": the report gives the smallest detectable change).',
    )
    check.add_argument("logdir")
    add_run_list_option(
        check, "--baseline", "baseline runs, comma-separated; shell patterns such as 'base_cpu_bs32_rep*' work"
    )
    add_run_list_option(check, "--target", "target runs, as --baseline")
    add_request_option(check, CheckRequest, "repeats")
    add_request_option(check, CheckRequest, "max_regression", metavar="SHARE")
    add_request_option(check, CheckRequest, "ops", metavar="REGEX")
    add_request_option(check, CheckRequest, "min_share", metavar="SHARE")
    add_request_option(check, CheckRequest, "group_by")
    check.add_argument(
        "--baseline-logdir",
        metavar="LOGDIR",
        help="read the --baseline runs from this logdir instead: a stored baseline, such as the main branch's runs "
        "in a bucket (s3://team/baselines/main) or a CI artifact folder, checked against runs just recorded in LOGDIR",
    )
    add_request_option(check, CheckRequest, "allow_one_run")
    check.add_argument(
        "--strict",
        action="store_true",
        help="exit 3 when nothing is flagged but the runs could not have shown "
        f"{percent_escaped(evidence_rule('--max-regression'))} (not enough evidence)",
    )
    _add_check_reports(check)
    check.set_defaults(handler=_check)


def _check(args) -> int:
    catalog = open_catalog(args)
    stored = open_catalog(args, logdir=args.baseline_logdir) if args.baseline_logdir else None
    from tb_opcompare.cli import check_report
    from tb_opcompare.service.check import check_document
    from tb_opcompare.service.csv_export import check_csv
    from tb_opcompare.store.run_groups import expand_runs

    try:
        document = check_document(
            catalog,
            expand_runs(stored or catalog, args.baseline, args.repeats),
            expand_runs(catalog, args.target, args.repeats),
            threshold=args.max_regression,
            ops=args.ops,
            min_share=args.min_share,
            group_by=args.group_by,
            allow_one_run=args.allow_one_run,
            baseline_catalog=stored,
        )
    except ProfileError as error:  # exit 1 means a regression here: an unreadable run is a usage error
        print(f"error: cannot read {escape_controls(error.path)}: {escape_controls(error.reason)}", file=sys.stderr)
        return EXIT_USAGE
    report = {
        "json": json_text,
        "csv": check_csv,
        "junit": check_report.junit,
        "markdown": check_report.markdown,
        "text": check_report.text,
    }[args.format](document)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary and not args.no_job_summary:  # GitHub Actions shows this file on the run's page
        with open(summary, "a", encoding="utf-8") as page:
            page.write(check_report.markdown(document) + "\n")
    if args.output:
        write_text(args.output, report)
        print(escape_controls(document.headline))
    else:
        sys.stdout.write(report)
    if not document.passed:
        return EXIT_REGRESSION
    return EXIT_NOT_ENOUGH_EVIDENCE if args.strict and not document.enough_evidence else EXIT_OK
