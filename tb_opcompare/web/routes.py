"""The tab's data routes, all under ``/data/plugin/op_compare/``: each parses its
parameters (a bad one answers 400) and returns what a service makes, encoded from the
contract's Structs. The routes, their parameters and their documents are listed in
``docs/http_api.md`` (generated from ``schema/contract.py``).

================  ===========================================================================
``runs``          ``service.runs.runs_document``
``compare``       ``service.compare.compared_rows``, rows narrowed and ordered by the view
                  (``analysis.row_view.view_from_params``), a page of them unless ``full=1``
``compare.csv``   every row the view keeps as a CSV download, written from the rows' table
``sweeps``        ``service.sweep.sweeps_document``
``sweep``         ``service.sweep.sweep_document``, with its plotly figures
``sweep.csv``     its fits as the tab's fits table shows them (``service.sweep.fits_table``)
``check``         ``service.check.check_document``: confidence per op between two groups of runs
``trend``         ``service.trend.trend_document``: top ops across many runs, in a chosen order
``trend.csv``     its rows as a CSV download
``matrix``        ``service.matrix.matrix_document``: latency and throughput per model, batch size,
                  device, precision and compiler
``matrix.csv``    its cells as a CSV download
``modules``       ``service.modules.modules_document``: two runs' module trees side by side
``modules.csv``   its nodes as a CSV download
``memory``        ``service.memory.memory_document``: two runs' peaks, memory over time and each op's
                  allocations
``memory.csv``    its op rows as a CSV download
``layers``        ``service.layers.layers_document``: two runs' application, framework, runtime and
                  device time, and the application's and runtime's rows
``layers.csv``    those rows as a CSV download
``roofline``      ``service.roofline.roofline_document``: each op's work, achieved rate and device
                  roof on both runs, and what the change did
``roofline.csv``  its op rows as a CSV download
================  ===========================================================================

The tab's first screen (``runs``, ``compare``) imports no pandas: the services that use it
are imported on the first request that needs them, so the first screen after TensorBoard
starts waits 0.2 s for imports rather than 0.6-0.9 s.

Errors are ``ErrorDocument``s: 400 bad parameters, 404 an unknown run or session (with the
known names), 422 a profile that cannot be read (with its path), 500 a bug (logged; no
internals in the answer).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import re
import zlib
from collections.abc import Iterator, Sequence

import msgspec
from tensorboard.backend import http_util
from werkzeug import wrappers

from tb_opcompare.analysis.row_view import view_from_params
from tb_opcompare.errors import ProfileError, UnknownRunError, UsageError
from tb_opcompare.ingest.formats import collecting_rarely
from tb_opcompare.schema.contract import (
    CompareDocument,
    Error,
    ErrorDocument,
    MatrixDocument,
    SweepDocument,
    TrendDocument,
)
from tb_opcompare.schema.dimensions import SERIES_DIMENSIONS
from tb_opcompare.schema.requests import (
    COMPARE_PAGE_ROWS,
    CheckRequest,
    CompareRequest,
    FitsTableRequest,
    MatrixRequest,
    PairRequest,
    RunsRequest,
    SweepRequest,
    TrendRequest,
    parse_request,
)
from tb_opcompare.service.compare import ComparedRows, compared_rows
from tb_opcompare.service.csv_export import (
    breakdown_csv,
    compare_csv,
    layers_csv,
    matrix_csv,
    memory_csv,
    modules_csv,
    roofline_csv,
    table_csv_chunks,
    trend_csv,
)
from tb_opcompare.service.matrix import matrix_document
from tb_opcompare.service.records import json_chunks
from tb_opcompare.service.runs import reads_document, runs_document
from tb_opcompare.store.catalog import Catalog
from tb_opcompare.store.run_groups import both_sides, expand_runs, split_runs
from tb_opcompare.store.settings import ReadSettings

_logger = logging.getLogger(__name__)
Buffer = bytes | memoryview  # a piece of an answer: a view into a piece made whole is not copied


def _json(request, document, code: int = 200):
    return http_util.Respond(request, msgspec.json.encode(document), "application/json", code=code)


def _error(request, code: int, message: str, **extra):
    return _json(request, ErrorDocument(error=Error(status=code, message=message, **extra)), code=code)


def _answer_errors(render, request):
    """``render(request)``, its errors answered as JSON the tab can show, never a traceback
    page: the one place every error type becomes a status."""
    try:
        return render(request)
    except UsageError as error:  # the one type every service and parameter check raises
        extra = {"parameter": error.parameter} if error.parameter else {}
        return _error(request, 400, str(error), **extra)
    except UnknownRunError as error:
        return _error(request, 404, error.message, known=error.known)
    except ProfileError as error:
        return _error(request, 422, f"cannot read {error.path}: {error.reason}", path=error.path, reason=error.reason)
    except Exception:  # a bug, not bad data: log it, answer without leaking internals
        _logger.exception("op_compare: %s failed", request.path)
        return _error(request, 500, "internal error in the Op Compare plugin; see the TensorBoard log")


class DataRoutes:
    """The plugin's data routes: one builder a document (parameters in, document out), each
    served as JSON at ``/<name>`` and, where it has a table, as CSV at ``/<name>.csv``: two
    renderings of one document, chosen here at the edge, as TensorBoard's scalars plugin
    serves its JSON and CSV. The compare document's two are made a piece at a time, and
    sent as they are made where they are big (``_compare_json``, ``_compare_csv_download``,
    ``_sent``): a million rows each."""

    def __init__(self, logdir: str, settings: ReadSettings):
        self.catalog = Catalog(
            logdir,
            cache_dir=settings.cache_dir,
            max_trace_bytes=settings.max_trace_bytes,
            cache_max_bytes=settings.cache_max_bytes,
        )
        # name -> (the document's builder, its CSV rendering: (document, args) -> (text, file name), or None)
        documents = {
            "runs": (self._runs, None),
            "reads": (lambda args: reads_document(), None),
            "sweeps": (self._sweeps, None),
            "sweep": (self._sweep_figures, None),
            "check": (self._check, None),
            "trend": (self._trend, _trend_csv),
            "matrix": (self._matrix, lambda document, args: (matrix_csv(document), "opcompare_matrix.csv")),
            "modules": (self._modules, _pair_csv("modules", modules_csv)),
            "memory": (self._memory, _pair_csv("memory", memory_csv, lambda d: (d.baseline.run, d.target.run))),
            "layers": (self._layers, _pair_csv("layers", layers_csv)),
            "roofline": (self._roofline, _pair_csv("roofline", roofline_csv, lambda d: (d.baseline.run, d.target.run))),
        }
        self.apps = {}
        for name, (build, csv) in documents.items():
            self.apps[f"/{name}"] = _served(lambda request, build=build: _json(request, build(request.args)))
            if csv is not None:
                self.apps[f"/{name}.csv"] = _served(
                    lambda request, build=build, csv=csv: _csv_download(
                        request, *csv(build(request.args), request.args)
                    )
                )
        # the sweep's table is its fits, without the figures the JSON carries
        self.apps["/sweep.csv"] = _served(self._sweep_csv)
        self.apps["/breakdown.csv"] = _served(self._breakdown_csv)
        # the compare document's two, made in pieces (a million rows each)
        self.apps["/compare"] = _served(self._compare_json)
        self.apps["/compare.csv"] = _served(self._compare_csv_download)

    def _runs(self, args):
        return runs_document(self.catalog, load=parse_request(RunsRequest, args).load)

    def _compare_json(self, request):
        """The JSON answer: a page of the view's rows (``COMPARE_PAGE_ROWS``) unless ``top``
        or ``full`` asks otherwise. A page (what the tab asks for) is encoded whole; more
        is made a page of records at a time and sent as it is made where it is big
        (``_sent``): one text of every record is one copy more of a page's 20 MB."""
        args = request.args
        view = view_from_params(args)
        if view.top is None and not parse_request(CompareRequest, args).full:
            view = dataclasses.replace(view, top=COMPARE_PAGE_ROWS)
        one_page = view.top is not None and view.top <= COMPARE_PAGE_ROWS
        compared = self._compare(args, view, records=one_page)
        if one_page:
            return _json(request, compared.document)
        return _sent(request, json_chunks(compared.document, "rows", compared.record_chunks()), "application/json")

    def _compare_csv_download(self, request):
        """Every row the view keeps as CSV, written from the comparison's table (no record
        per row), sent as it is made where it is big (``_sent``)."""
        compared = self._compare(request.args, view_from_params(request.args), records=False)
        summary = compared.document.summary
        pooled = len(summary.baseline_runs) > 1 or len(summary.target_runs) > 1
        filename = csv_filename(summary.baseline_runs[0], summary.target_runs[0], summary.group_by, pooled=pooled)
        chunks = (chunk.encode() for chunk in table_csv_chunks(compared.table, positions=compared.positions))
        return _sent(request, chunks, "text/csv; charset=utf-8", _attachment(filename))

    def _sweep_figures(self, args) -> SweepDocument:
        return self._sweep(args, figures=True)

    def _breakdown_csv(self, request):
        return _breakdown_download(request, self._compare(request.args, view_from_params(request.args), False).document)

    def _sweep_csv(self, request):
        from tb_opcompare.analysis.sweep import FIT_COLUMNS  # with pandas: on first use (module docstring)
        from tb_opcompare.service.sweep import fits_table

        table = parse_request(FitsTableRequest, request.args)  # first: a bad one costs no sweep
        document = self._sweep(request.args)
        rows = msgspec.to_builtins(fits_table(document, table.op_contains, table.sort, table.order == "desc"))
        return _csv_download(
            request, compare_csv(rows, FIT_COLUMNS), f"opcompare_sweep_{_safe_name(document.model)}.csv"
        )

    def _check(self, args):
        from tb_opcompare.service.check import check_document  # with pandas: on first use (module docstring)

        request = parse_request(CheckRequest, args)
        sides = both_sides(self.catalog, request.baseline, request.target, request.repeats)
        return check_document(
            self.catalog,
            *sides,
            threshold=request.max_regression,
            ops=request.ops,
            min_share=request.min_share,
            group_by=request.group_by,
            allow_one_run=request.allow_one_run,
        )

    def _trend(self, args) -> TrendDocument:
        from tb_opcompare.service.trend import trend_document  # with pandas: on first use (module docstring)

        request = parse_request(TrendRequest, args)
        runs = expand_runs(self.catalog, split_runs(request.runs))
        return trend_document(self.catalog, runs, order_by=request.order_by, top=request.top, group_by=request.group_by)

    # the pair pages' services use pandas: each is imported on its first request (module docstring)
    def _layers(self, args):
        from tb_opcompare.service.layers import layers_document

        return layers_document(self.catalog, *_pair(args))

    def _memory(self, args):
        from tb_opcompare.service.memory import memory_document

        return memory_document(self.catalog, *_pair(args))

    def _roofline(self, args):
        from tb_opcompare.service.roofline import roofline_document

        return roofline_document(self.catalog, *_pair(args))

    def _modules(self, args):
        from tb_opcompare.service.modules import modules_document

        return modules_document(self.catalog, *_pair(args))

    def _matrix(self, args) -> MatrixDocument:
        request = parse_request(MatrixRequest, args)
        return matrix_document(
            self.catalog,
            reference=request.reference,
            warmup=request.warmup,
            models=list(request.model) if request.model else None,
            part=request.part,
        )

    def _sweeps(self, args):
        from tb_opcompare.service.sweep import sweeps_document  # with pandas: on first use (module docstring)

        return sweeps_document(self.catalog)

    def _sweep(self, args, figures: bool = False) -> SweepDocument:
        from tb_opcompare.service.sweep import sweep_document  # with pandas: on first use (module docstring)

        request = parse_request(SweepRequest, args)
        held = {name: getattr(request, name) for name in SERIES_DIMENSIONS if getattr(request, name)}
        return sweep_document(
            self.catalog,
            request.model,
            top=request.top,
            ops=list(request.ops) if request.ops else None,
            group_by=request.group_by,
            figures=figures,
            series_by=request.series_by,
            held=held,
        )

    def _compare(self, args, view, records: bool = True) -> ComparedRows:
        request = parse_request(CompareRequest, args)
        baseline, target = both_sides(self.catalog, request.baseline, request.target, request.repeats)
        if request.significant:
            from tb_opcompare.service.check import significant_keys  # with pandas: only for this filter

            try:
                keys = significant_keys(self.catalog, request.baseline, request.target, request.group_by)
            except ValueError as error:  # UsageError too: the check's own words
                raise UsageError(str(error)) from None
            view = dataclasses.replace(view, keys=keys)
        return compared_rows(
            self.catalog,
            baseline,
            target,
            group_by=request.group_by,
            baseline_session=request.baseline_session,
            target_session=request.target_session,
            view=view,
            records=records,
        )


def _pair(args) -> tuple[str, str, str | None, str | None]:
    """The two runs a pair route names, and their sessions (None: each run's newest)."""
    request = parse_request(PairRequest, args)
    return request.baseline, request.target, request.baseline_session, request.target_session


def _served(render):
    """A WSGI app of ``render(request) -> response``, its errors answered as JSON.

    A document is thousands of small objects (a record a row) that all live until it is
    answered: with CPython's young threshold of 700, building one set off full collections
    of the whole server (TensorBoard's own objects too), 40-60 ms of a cold BERT compare's
    200. The request collects as a read does (``collecting_rarely``) until its answer is
    sent, so the collection it puts off comes after the answer, not before it."""

    @wrappers.Request.application
    def app(request):
        with contextlib.ExitStack() as stack:
            stack.enter_context(collecting_rarely())
            response = _answer_errors(render, request)
            response.call_on_close(stack.pop_all().close)
        return response

    return app


def _breakdown_download(request, document: CompareDocument):
    """Where the time went as CSV, named by the runs; a 400 that says why where the runs
    split no step."""
    summary = document.summary
    if summary.breakdown is None:
        raise UsageError(summary.breakdown_note or "No step breakdown for these runs.")
    name = f"opcompare_breakdown_{_safe_name(summary.baseline_runs[0])}_vs_{_safe_name(summary.target_runs[0])}.csv"
    return _csv_download(request, breakdown_csv(summary.breakdown), name)


def _trend_csv(document: TrendDocument, args) -> tuple[str, str]:
    return trend_csv(document), f"opcompare_trend_{_safe_name(document.order_by)}.csv"


def _pair_csv(page: str, render, runs=lambda document: (document.baseline, document.target)):
    """The CSV of a two-run page (modules, memory, layers), named by its runs."""

    def csv(document, args) -> tuple[str, str]:
        baseline, target = runs(document)
        return render(document), f"opcompare_{page}_{_safe_name(baseline)}_vs_{_safe_name(target)}.csv"

    return csv


def _csv_download(request, text: str, filename: str):
    return http_util.Respond(request, text, "text/csv", headers=_attachment(filename))


def _attachment(filename: str) -> list[tuple[str, str]]:
    return [("Content-Disposition", f'attachment; filename="{filename}"')]


# An Accept-Encoding that takes gzip (``x-gzip``, ``*``; not ``gzip;q=0``): TensorBoard's
# ``Respond``'s own rule (RFC 7231 5.3.4), for the answers it does not make
_TAKES_GZIP = re.compile(r"(?:^|,|\s)(?:(?:x-)?gzip|\*)(?!;q=0)(?:\s|,|$)")


# An answer up to this size is made whole and sent as TensorBoard's ``Respond`` sends one,
# with its length: the tab's page (20,000 rows of about 1 KB of JSON each) sent in pieces
# took 20-30 ms longer over loopback than whole. A bigger one is sent as it is made
# (``_streamed``), in pieces of at least ``_PIECE_BYTES``.
WHOLE_ANSWER_BYTES = 64 << 20
_PIECE_BYTES = 1 << 20


def _sent(request, chunks: Iterator[Buffer], content_type: str, headers: Sequence[tuple[str, str]] = ()):
    """An answer made of ``chunks``: whole where it is small, else streamed. Either way its
    first ``WHOLE_ANSWER_BYTES`` are made before anything is sent, so a failure there is
    still an error answer (``_answer_errors``)."""
    held: list[Buffer] = []
    size = 0
    for chunk in chunks:
        held.append(chunk)
        size += len(chunk)
        if size > WHOLE_ANSWER_BYTES:
            return _streamed(request, itertools.chain(held, chunks), content_type, headers)
    body = b"".join(held)
    del held  # the chunks go before Respond's gzip makes its copy
    return http_util.Respond(request, body, content_type, headers=list(headers))


def _streamed(request, chunks: Iterator[Buffer], content_type: str, headers: Sequence[tuple[str, str]] = ()):
    """An answer sent as it is made, with the headers TensorBoard's ``Respond`` gives one
    made whole, and gzipped (as it would) a piece at a time where the client takes gzip:
    a million-row compare made whole held 2.5 GB of TensorBoard's memory (its records, the
    JSON, then its gzip). A failure once it is under way, which can no longer be an error
    answer, cuts it short and is logged."""
    chunks = _logged(chunks, request.path)
    headers = [
        *headers,
        ("X-Content-Type-Options", "nosniff"),
        ("Expires", "0"),
        ("Cache-Control", "no-cache, must-revalidate"),
    ]
    if _TAKES_GZIP.search(request.headers.get("Accept-Encoding", "")):
        chunks = _gzipped(chunks)
        headers.append(("Content-Encoding", "gzip"))
    return wrappers.Response(_pieces(chunks), content_type=content_type, headers=headers)


def _pieces(chunks: Iterator[Buffer]) -> Iterator[bytes]:
    """``chunks`` joined into pieces of at least ``_PIECE_BYTES``: each piece is a write of
    the chunked encoding, and small ones wait on the client's acknowledgements."""
    held: list[Buffer] = []
    size = 0
    for chunk in chunks:
        held.append(chunk)
        size += len(chunk)
        if size >= _PIECE_BYTES:
            yield b"".join(held)
            held, size = [], 0
    if held:
        yield b"".join(held)


def _logged(chunks: Iterator[Buffer], path: str) -> Iterator[Buffer]:
    try:
        yield from chunks
    except Exception:  # a bug, as ``_answer_errors`` logs one; the client sees the answer cut short
        _logger.exception("op_compare: %s failed while it was sent", path)
        raise


def _gzipped(chunks: Iterator[Buffer]) -> Iterator[bytes]:
    packer = zlib.compressobj(3, zlib.DEFLATED, 31)  # level 3 and a gzip header, as ``Respond``
    for chunk in chunks:
        packed = packer.compress(chunk)
        if packed:
            yield packed
    yield packer.flush()


def _safe_name(name: str) -> str:
    """A run or model name reduced to characters safe in a header and a file name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:80] or "run"


def csv_filename(baseline: str, target: str, group_by: str, pooled: bool = False) -> str:
    suffix = ("_by-type" if group_by == "type" else "") + ("_pooled" if pooled else "")
    return f"opcompare_{_safe_name(baseline)}_vs_{_safe_name(target)}{suffix}.csv"
