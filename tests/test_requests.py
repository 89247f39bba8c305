"""The requests' rules (``schema/requests.py``): each parameter's bound and default written
once, read by the routes, the CLI's options and the API doc, so the three say the same."""

from __future__ import annotations

import contextlib
import io

import pytest
from in_process import PREFIX, plugin_client

from tb_opcompare.cli.main import _parser, main
from tb_opcompare.errors import UsageError
from tb_opcompare.schema import contract
from tb_opcompare.schema.requests import (
    CheckRequest,
    CompareRequest,
    MatrixRequest,
    SweepRequest,
    TrendRequest,
    ViewRequest,
    parameters,
    parse_request,
)


def test_left_out_or_empty_parameters_take_their_defaults():
    assert parse_request(TrendRequest, {"runs": "a*", "top": "", "group_by": ""}) == TrendRequest(
        runs="a*", order_by="recorded", top=10, group_by="name"
    )
    check = parse_request(CheckRequest, {"baseline": "a", "target": "b", "max_regression": "10%", "repeats": "1"})
    assert (check.max_regression, check.min_share, check.repeats, check.allow_one_run) == (0.1, 0.01, True, False)


def test_repeated_parameters_keep_each_value_whole():
    view = parse_request(ViewRequest, {"key": ["conv, 3x3", "", "matmul"], "status": "matched,target_only"})
    assert view.key == ("conv, 3x3", "matmul") and view.status == ("matched", "target_only")
    assert parse_request(MatrixRequest, {"model": []}).model is None


@pytest.mark.parametrize(
    "request_type, params, parameter, message",
    [
        (TrendRequest, {}, "runs", "missing parameter: runs"),
        (CheckRequest, {"baseline": ""}, "baseline", "missing parameter: baseline, target"),
        (TrendRequest, {"runs": "*", "top": "0"}, "top", "top: expected an integer from 1 to 50, not '0'"),
        (SweepRequest, {"model": "m", "top": "51"}, "top", "top: expected an integer from 1 to 50, not '51'"),
        (ViewRequest, {"top": "-3"}, "top", "top: expected an integer of 1 or more, not '-3'"),
        (ViewRequest, {"min_us": "inf"}, "min_us", "min_us: expected a number of 0 or more, not 'inf'"),
        (ViewRequest, {"q": "x" * 501}, "q", "q: longer than 500 characters"),
        (ViewRequest, {"order": "up"}, "order", "order: expected one of desc, asc, not 'up'"),
        (ViewRequest, {"sort": "__class__"}, "sort", "sort: unknown column '__class__'; columns: key, "),
        (MatrixRequest, {"warmup": "1.5"}, "warmup", "warmup: expected an integer of 0 or more, not '1.5'"),
        (CompareRequest, {"baseline": "a", "target": "b", "repeats": "yes"}, "repeats", "repeats: expected 0 or 1"),
        (CheckRequest, {"baseline": "a", "target": "b", "min_share": "lots"}, "min_share", "expected a share such"),
        (TrendRequest, {"runs": "*", "group_by": "module"}, "group_by", "(modules are for the compare table"),
    ],
)
def test_a_bad_parameter_is_a_usage_error_naming_it(request_type, params, parameter, message):
    with pytest.raises(UsageError) as raised:
        parse_request(request_type, params)
    assert raised.value.parameter == parameter and message in str(raised.value)


def _cli_error(*argv: str) -> str:
    """What the CLI says of ``argv`` on stderr, having exited 2 (argparse's usage error)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exited:
        main(list(argv))
    assert exited.value.code == 2
    return err.getvalue().strip().splitlines()[-1]


@pytest.mark.parametrize("top", ["0", "51"])
def test_the_cli_and_the_route_refuse_a_bad_top_in_the_same_words(tmp_path, top):
    answer = plugin_client(tmp_path).get(f"{PREFIX}/trend?runs=*&top={top}")
    said = answer.get_json()["error"]
    assert answer.status_code == 400 and said["parameter"] == "top"
    assert said["message"] == f"top: expected an integer from 1 to 50, not '{top}'"
    cli = _cli_error("trend", str(tmp_path), "--runs", "*", "--top", top)
    assert cli == f"tb-opcompare trend: error: argument --top: {said['message'].removeprefix('top: ')}"


def test_the_cli_options_take_the_requests_defaults_and_bounds(tmp_path):
    parser = _parser()
    trend = parser.parse_args(["trend", str(tmp_path), "--runs", "a"])
    check = parser.parse_args(["check", str(tmp_path), "--baseline", "a", "--target", "b"])
    sweep = parser.parse_args(["sweep", str(tmp_path)])
    declared = {field.name: field.default for field in parameters(TrendRequest)}
    assert (trend.top, trend.order_by, trend.group_by) == (declared["top"], declared["order_by"], "name")
    assert (check.max_regression, check.min_share) == (CheckRequest.max_regression, CheckRequest.min_share)
    assert (sweep.top, sweep.series_by) == (SweepRequest.top, SweepRequest.series_by)
    # compare's rows have no upper bound: a long text table or CSV is the user's to ask for
    assert parser.parse_args(["compare", str(tmp_path), "--top", "200"]).top == 200
    assert "expected an integer of 1 or more, not '0'" in _cli_error("compare", str(tmp_path), "--top", "0")


def test_the_api_doc_lists_every_parameter_a_route_reads():
    documented = {route: text for route, _, text in contract.ROUTES}
    for route, requests in {
        "compare": (CompareRequest, ViewRequest),
        "trend": (TrendRequest,),
        "sweep": (SweepRequest,),
        "check": (CheckRequest,),
        "matrix": (MatrixRequest,),
    }.items():
        for field in (field for request in requests for field in parameters(request)):
            assert f"`{field.name}" in documented[route], (route, field.name)
    assert "`top` (an integer from 1 to 50, default 10)" in documented["trend"]
