"""The Compare view's "Significant changes only" filter in a real browser (Debian's
Chromium driven by Playwright) against a real TensorBoard: the op table and its CSV export
narrowed to the ops the check route finds significantly changed, read against the check
and compare routes' own documents."""

from __future__ import annotations

import csv
import io
import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from conftest import TAB_FRAME, open_op_compare, route, tab_state

from tb_opcompare.schema.contract import SIGNIFICANT_VERDICTS

PAIR = {"baseline": "cnn_cpu_bs16_rep1", "target": "cnnslow_cpu_bs16_rep1"}
SCREENSHOT = "/tmp/opcompare-significant.png"


def significant_keys(url: str, group_by: str = "name") -> list[str]:
    status, body = route(url, "check", {**PAIR, "repeats": "1", "group_by": group_by})
    assert status == 200, body
    rows = json.loads(body)["rows"]
    for row in rows:  # the server's mark is the rule: gated, and a change rather than noise
        assert row["significant"] == (row["gated"] and row["verdict"] in SIGNIFICANT_VERDICTS), row
    return [row["key"] for row in rows if row["significant"]]


def shown_keys(frame) -> list[str]:
    return frame.locator("tr.oc-row").evaluate_all("rows => rows.map(row => row.dataset.key)")


def test_significant_changes_only_narrows_the_table_and_its_export(page, repeats_tensorboard_url):
    url = repeats_tensorboard_url
    keys = significant_keys(url)
    assert keys  # the slow variant's head, at least
    every = json.loads(route(url, "compare", PAIR)[1])["rows"]
    # the compare route keeps exactly those keys, in its order (`key` repeated)
    narrowed = json.loads(route(url, "compare", [*PAIR.items(), *(("key", key) for key in keys)])[1])["rows"]
    assert sorted(row["key"] for row in narrowed) == sorted(set(keys) & {row["key"] for row in every})

    frame = open_op_compare(page, url, **PAIR)
    box = frame.locator("#oc-significant")
    frame.locator("#oc-significant:not([disabled])").wait_for(timeout=60_000)  # the check has come
    assert frame.locator("#oc-count").inner_text() == f"Showing {len(every)} of {len(every)} ops"
    assert str(len(keys)) in frame.locator("label.oc-significant").get_attribute("title")
    box.check()
    frame.locator("#oc-count", has_text=f"Showing {len(narrowed)} of {len(every)} ops").wait_for()
    assert shown_keys(frame) == [row["key"] for row in narrowed]
    state = tab_state(page)
    assert state == {**PAIR, "significant": "1"}  # the flag, never the keys
    frame.locator("section.oc-filters").evaluate("el => el.scrollIntoView({block: 'center'})")
    page.screenshot(path=SCREENSHOT)

    # the export is the table: the link asks the server for the significant ops (never their
    # keys: hundreds of long TF names would pass a request line's length), and the file is
    # the compare.csv route with those keys, byte for byte
    href = frame.locator("#oc-export").get_attribute("href")
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(href).query)
    assert query["significant"] == ["1"] and "key" not in query
    with page.expect_download() as download_info:
        frame.locator("#oc-export").click()
    downloaded = Path(download_info.value.path()).read_bytes()
    assert downloaded == route(url, "compare.csv", [*PAIR.items(), *(("key", key) for key in keys)])[1]
    assert [row["key"] for row in csv.DictReader(io.StringIO(downloaded.decode("utf-8")))] == shown_keys(frame)

    # with another filter on top: both hold, in the table and in the file
    frame.locator("th[data-column='speedup']").click()
    sorted_rows = json.loads(
        route(url, "compare", [*PAIR.items(), ("sort", "speedup"), ("order", "desc"), *(("key", key) for key in keys)])[
            1
        ]
    )["rows"]
    frame.locator("th[data-column='speedup'][aria-sort='descending']").wait_for()
    assert shown_keys(frame) == [row["key"] for row in sorted_rows]
    with page.expect_download() as download_info:
        frame.locator("#oc-export").click()
    rows = list(csv.DictReader(io.StringIO(Path(download_info.value.path()).read_text(encoding="utf-8"))))
    assert [row["key"] for row in rows] == shown_keys(frame)

    # a reload restores the flag; the keys come from the check again
    page.reload()
    frame = page.frame_locator(TAB_FRAME)
    frame.locator("#oc-significant:checked").wait_for(timeout=60_000)
    frame.locator("#oc-count", has_text=f"Showing {len(narrowed)} of {len(every)} ops").wait_for()
    assert sorted(shown_keys(frame)) == sorted(row["key"] for row in narrowed)

    # grouped by op type the check finds no significant change: nothing to narrow to
    by_type = significant_keys(url, "type")
    type_rows = json.loads(route(url, "compare", {**PAIR, "group_by": "type"})[1])["rows"]
    frame.locator("[data-group-by='type']").click()
    if by_type:
        frame.locator("#oc-significant:checked:not([disabled])").wait_for(timeout=60_000)
        expected = [row["key"] for row in type_rows if row["key"] in set(by_type)]
    else:
        frame.locator("#oc-significant[disabled]:not(:checked)").wait_for(timeout=60_000)
        expected = [row["key"] for row in type_rows]
    frame.locator("#oc-count", has_text=f"Showing {len(expected)} of {len(type_rows)} ops").wait_for()
    assert tab_state(page)["significant"] == "1"  # kept for the next pair that has some
    frame.locator("[data-group-by='name']").click()
    frame.locator("#oc-count", has_text=f"Showing {len(narrowed)} of {len(every)} ops").wait_for(timeout=60_000)

    # unticked: every op again, and the link forgets the flag
    frame.locator("#oc-significant").uncheck()
    frame.locator("#oc-count", has_text=f"Showing {len(every)} of {len(every)} ops").wait_for()
    assert "significant" not in tab_state(page)
    assert not page.page_errors


def test_an_op_key_holding_a_comma_is_one_key(repeats_tensorboard_url):
    url = repeats_tensorboard_url
    status, body = route(url, "compare.csv", [*PAIR.items(), ("key", "head"), ("key", "head,aten::mm")])
    assert status == 200
    assert [row["key"] for row in csv.DictReader(io.StringIO(body.decode("utf-8")))] == ["head"]


def test_significant_narrows_the_compare_routes_to_the_checks_changes(repeats_tensorboard_url):
    """`significant=1` keeps the rows the check (each side with its repeats) marks
    significant, as the repeated `key` would; with a side the check refuses, the reason."""
    url = repeats_tensorboard_url
    keys = significant_keys(url)
    for name in ("compare", "compare.csv"):
        status, narrowed = route(url, name, {**PAIR, "significant": "1"})
        assert status == 200, narrowed
        assert narrowed == route(url, name, [*PAIR.items(), *(("key", key) for key in keys)])[1]
    status, body = route(url, "compare", {**PAIR, "significant": "1", "group_by": "module"})
    assert status == 400 and "group_by" in json.loads(body)["error"]["message"], body
    status, body = route(url, "compare", {**PAIR, "significant": "yes"})
    assert status == 400 and "significant: expected 0 or 1" in json.loads(body)["error"]["message"], body
