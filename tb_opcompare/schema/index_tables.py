"""The tables of the shared index (``store.shared_index``) and of ``tb-opcompare export
--parquet``: their Parquet schema, made from the per-op table's dtypes and the run facts'
annotations (``schema.optable``), and their documentation, docs/index_schema.md, made
from the same declarations (``make contract``; a test fails when it drifts).

pyarrow is imported only where a schema is built: the plugin imports this module at
start-up through the contract.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
from typing import TYPE_CHECKING, Any

from tb_opcompare.schema.events import UNSTORED_FACTS, ProfileFacts

if TYPE_CHECKING:
    import pyarrow as pa

    from tb_opcompare.schema.table import Table

# table -> (its stored name: the key of ``store.cache.profile_columns`` holding it, the
# ``OpProfile`` attribute holding it), as ``schema.optable.TABLES`` names them
PROFILE_TABLES = {
    "ops": ("ops", "op_table"),
    "steps": ("step_ops", "step_table"),
    "modules": ("module_ops", "module_table"),
    "annotations": ("annotations", "annotation_table"),
    "memory": ("memory_timeline", "memory_table"),
    "step_breakdown": ("step_breakdown", "breakdown_table"),
    "op_work": ("op_work", "work_table"),
}
RUNS = "runs"


def empty_table(table: str) -> Table:
    """The per-op ``table`` (a key of ``PROFILE_TABLES``) with no rows, in a reader's dtypes."""
    from tb_opcompare.schema.optable import TABLES
    from tb_opcompare.schema.table import Table

    stored = PROFILE_TABLES[table][0]
    return Table.empty(next(dtypes for name, _, dtypes in TABLES if name == stored))


KEY_COLUMNS = ("run", "session")  # first in every table: which session a row belongs to
# Facts too nested for one Parquet type that every run shares (their keys differ by run):
# kept as JSON text, the column named so.
JSON_FACTS = ("peak_memory_bytes", "workers", "device_properties")
# The columns of ``runs`` that are no fact of the profile, and what ``export`` adds.
RUN_COLUMNS = {
    "run": "the run: its folder below the logdir",
    "session": "the capture (profile session) of the run; a distributed job's names its ranks",
    "files": "the session's profile files, relative to the logdir",
    "step_count": "profiled steps the rows of `steps` are placed in",
}
EXPORT_COLUMNS = {  # in an export only
    "model": "the model the run was grouped under (sidecar, run name, or found by its ops among the logdir's "
    "runs), with its precision and compiler where they are not the defaults: `resnet50 [bf16]`",
    "base_model": "the model without its precision and compiler",
    "model_source": "where `model` came from",
    "label": "the sidecar's label, if any",
    "repeat": "the repeat number of the run within its configuration, if it is one of several",
}


def _arrow_type(dtype: object) -> Any:
    import pyarrow as pa

    return {"int64": pa.int64(), "float64": pa.float64()}.get(str(dtype), pa.string())


def _fact_types() -> dict[str, Any]:
    """The ``runs`` table's fact columns and types, from ``ProfileFacts``'s annotations."""
    import pyarrow as pa

    types = {}
    for field in dataclasses.fields(ProfileFacts):
        if field.name in UNSTORED_FACTS:
            continue
        annotation = str(field.type)
        if field.name in JSON_FACTS:
            types[field.name + "_json"] = pa.string()
        elif annotation.startswith("list[float]"):
            types[field.name] = pa.list_(pa.float64())
        elif annotation.startswith("list[str]"):
            types[field.name] = pa.list_(pa.string())
        elif annotation.startswith("int"):
            types[field.name] = pa.int64()
        elif annotation.startswith("float"):
            types[field.name] = pa.float64()
        else:
            types[field.name] = pa.string()
    return types


def table_schema(table: str, export: bool = False) -> Any:
    """The Parquet schema of ``table``; ``export``: with the columns ``export`` adds to runs."""
    import pyarrow as pa

    if table == RUNS:
        fields = [
            ("run", pa.string()),
            ("session", pa.string()),
            ("files", pa.list_(pa.string())),
            ("step_count", pa.int64()),
            *_fact_types().items(),
        ]
        if export:
            fields += [
                ("model", pa.string()),
                ("base_model", pa.string()),
                ("model_source", pa.string()),
                ("label", pa.string()),
                ("repeat", pa.int64()),
            ]
        return pa.schema(fields)
    empty = empty_table(table)
    return pa.schema(
        [(column, pa.string()) for column in KEY_COLUMNS]
        + [(column, _arrow_type(values.dtype)) for column, values in empty.items()]
    )


def session_columns(
    stored: dict[str, Any], run: str, session: str, files: list[str], **export: object
) -> dict[str, dict[str, list[Any]]]:
    """One session's rows of every table, as columns: ``stored`` is a profile as plain
    columns (``store.cache.profile_columns``); ``export``: the model columns of runs."""
    row = {"run": run, "session": session, "files": files, "step_count": stored["step_count"]}
    for name, value in stored["facts"].items():
        if name in UNSTORED_FACTS:
            continue
        row[name + "_json" if name in JSON_FACTS else name] = (
            json.dumps(value, sort_keys=True) if name in JSON_FACTS else value
        )
    tables = {RUNS: {name: [value] for name, value in {**row, **export}.items()}}
    for table, (stored_name, _) in PROFILE_TABLES.items():
        columns = stored[stored_name]
        rows = len(next(iter(columns.values()))) if columns else 0
        tables[table] = {"run": [run] * rows, "session": [session] * rows, **columns}
    return tables


def parquet_bytes(table: str, columns: dict[str, list[Any]], export: bool = False) -> bytes:
    """``table``'s rows (as columns) as a Parquet file, in the documented schema."""
    return arrow_bytes(arrow_table(table, columns, export))


def arrow_table(table: str, columns: dict[str, list[Any]], export: bool = False) -> pa.Table:
    """``table``'s rows (as columns) as a pyarrow Table in the documented schema."""
    import pyarrow as pa

    schema = table_schema(table, export)
    arrays = [pa.array(columns[field.name], type=field.type, from_pandas=True) for field in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def arrow_bytes(frame: pa.Table) -> bytes:
    """A pyarrow Table as a Parquet file."""
    import pyarrow.parquet as pq

    out = io.BytesIO()
    pq.write_table(frame, out, compression="zstd")
    return out.getvalue()


def _docstring_meanings() -> dict[str, dict[str, str]]:
    """Each per-op table's column meanings, from the tables of ``schema.optable``'s
    docstring (the one place they are written)."""
    meanings, table = {}, None
    attribute_of = {attribute: table for table, (_, attribute) in PROFILE_TABLES.items()}
    from tb_opcompare.schema import optable

    for block in re.split(r"\n(?=Schema of )", optable.__doc__):
        named = re.match(r"Schema of ``OpProfile\.(\w+)``", block)
        if not named:
            continue
        table = attribute_of[named.group(1)]
        rows, column = {}, None
        for line in block.split("=\n", 2)[-1].splitlines():
            if line.startswith("=="):
                break
            if line[:1].strip():
                column, _, text = line.partition(" ")
                rows[column] = text.strip().split(None, 1)[1] if len(text.split()) > 1 else ""
            elif column:
                rows[column] += " " + line.strip()
        meanings[table] = rows
    return meanings


# What the index is, file by file: docs/index_schema.md's first paragraphs
_INDEX_INTRO = [
    "`tb-opcompare index LOGDIR` keeps every session's parsed tables in `LOGDIR/.opcompare/` (index schema 2):",
    "",
    "- `manifest.json`: one entry a session, which says which profile files (size, modification time or ETag, "
    "a hash of their whole content) it was read from, and holds all a listing shows of it (its facts, its ops' "
    "names, a copy of its run's sidecar with the sidecar's version), with the JSON files of the logdir found to "
    "be no profile. Listing an indexed logdir reads this one file: in a bucket, the manifest and the bucket's "
    "listing, whatever the number of runs.",
    "- `bundles/<batch>.bundle`: the tables of every session of a batch (the sessions one `index` read), each "
    "table a Parquet file, a session's next to each other; its entry says where (`batch`, and each table's "
    "byte range). Reading one run is one range read.",
    "- `<table>/<batch>.parquet`: each table of the batch's sessions, a row group a session: the dataset below, "
    "which DuckDB and pandas read as `.opcompare/<table>/*.parquet`.",
    "",
    "Indexing new sessions writes a batch of their own and the manifest, nothing else; a batch that loses a "
    "session (its profile changed, or is gone) is written anew with the others, as are the smallest past 16 "
    "batches, so the dataset holds each session once. An index of schema 1 (a file a session and table) is "
    "not used, and said so in the listing's notices; the next `index` rewrites it and deletes its files.",
    "",
    "`tb-opcompare export LOGDIR --parquet DIR` writes the same tables for a whole logdir into "
    "`DIR/<table>/`, with each run's facts settled (sidecar, run name) and its model. Every table starts with "
    "`run` and `session`; times are in µs and sizes in bytes, as the column names say.",
    "",
]


def index_schema_markdown(fact_meanings: dict[str, str]) -> str:
    """docs/index_schema.md; ``fact_meanings``: the run facts' meanings as the HTTP API
    documents them (its RunRecord)."""
    meanings = _docstring_meanings()
    lines = [
        "# The index as a dataset",
        "",
        "<!-- Generated from tb_opcompare/schema/index_tables.py by `make contract`; do not edit. -->",
        "",
        *_INDEX_INTRO,
        "Which op regressed across the runs of a model, with DuckDB:",
        "",
        "```sql",
        "SELECT o.op_name, r.run, o.mean_us",
        "FROM 'DIR/ops/*.parquet' o JOIN 'DIR/runs/*.parquet' r USING (run, session)",
        "WHERE r.base_model = 'resnet50' AND o.side = 'device'",
        "ORDER BY o.op_name, r.run;",
        "```",
        "",
        "The same with pandas: `ops = pd.read_parquet('DIR/ops')`, then "
        "`ops.pivot_table(index='op_name', columns='run', values='mean_us')`.",
    ]
    for table in (RUNS, *PROFILE_TABLES):
        schema = table_schema(table, export=True)
        if table == RUNS:
            text = (
                "One row a session: the run's facts. In the index they are the profile's own (sidecars and run "
                "names are applied when it is read, so a corrected sidecar needs no new index); in an export "
                "they are settled, with the model columns filled."
            )
            table_meanings = {
                **RUN_COLUMNS,
                **{name: "(export only) " + text for name, text in EXPORT_COLUMNS.items()},
                **{name + "_json": "JSON text: " + fact_meanings.get(name, "") for name in JSON_FACTS},
                "step_times_us": "wall time of each profiled step, µs, in the order they started",
                "memory_events": "allocations and frees the profile recorded (null: memory not profiled)",
            }
            table_meanings.update({name: text for name, text in fact_meanings.items() if name not in table_meanings})
        else:
            text = f"`OpProfile.{PROFILE_TABLES[table][1]}` of each session (schema.optable)."
            table_meanings = {**RUN_COLUMNS, **meanings.get(table, {})}
        lines += ["", f"## {table}", "", text, "", "| column | type | meaning |", "|---|---|---|"]
        for field in schema:
            meaning = " ".join(table_meanings.get(field.name, "").split()).replace("|", "\\|").replace("``", "`")
            lines.append(f"| `{field.name}` | {field.type} | {meaning} |")
    return "\n".join(lines) + "\n"
