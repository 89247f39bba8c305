"""``schema.table.Table`` and the group helpers of ``schema.groups``, directly: what the
per-op tables are made, kept and compared in, without pandas."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from conftest import assert_built_and_switchable

from tb_opcompare import native
from tb_opcompare.schema import groups
from tb_opcompare.schema.groups import (
    among,
    first_appearance,
    first_appearance_ids,
    first_seen,
    group_counts,
    group_extremes,
    group_std,
    group_sums,
    integer_group_sums,
    known_sums,
    positions,
    starting_with,
)
from tb_opcompare.schema.table import LazyTable, Table, held_bytes, text_array


def ops() -> Table:
    return Table(
        {
            "op_name": text_array(["conv", "relu", "conv"]),
            "occurrences": np.array([2, 5, 3], dtype=np.int64),
            "self_us": np.array([10.0, 1.5, np.nan]),
        }
    )


def test_a_table_keeps_its_columns_in_order_and_refuses_ragged_ones():
    table = ops()
    assert table.names == ["op_name", "occurrences", "self_us"] and len(table) == 3
    assert "self_us" in table and "std_us" not in table
    with pytest.raises(ValueError, match="different lengths"):
        Table({"a": np.arange(2), "b": np.arange(3)})
    assert len(Table({})) == 0


def test_a_table_cannot_be_changed_but_the_callers_array_can():
    mine = np.array([1.0, 2.0])
    table = Table({"x": mine})
    with pytest.raises(ValueError):
        table["x"][0] = 5.0
    mine[0] = 7.0  # the caller's array stays writable (the table holds a read-only view)
    assert mine.flags.writeable


def test_take_select_assign_and_concat_make_new_tables():
    table = ops()
    taken = table.take(np.array([2, 0]))
    assert taken["op_name"].tolist() == ["conv", "conv"] and taken["occurrences"].tolist() == [3, 2]
    masked = table.take(table["op_name"] == "relu")
    assert masked["self_us"].tolist() == [1.5]
    assert table.select(["self_us", "op_name"]).names == ["self_us", "op_name"]
    replaced = table.assign(occurrences=np.zeros(3, dtype=np.int64), extra=np.ones(3))
    assert replaced.names == ["op_name", "occurrences", "self_us", "extra"]  # replaced in place, new at the end
    assert table["occurrences"].tolist() == [2, 5, 3]  # the first table is as it was
    both = Table.concat([table, taken], ["op_name", "occurrences"])
    assert both["op_name"].tolist() == ["conv", "relu", "conv", "conv", "conv"] and both.names == [
        "op_name",
        "occurrences",
    ]


def test_an_empty_table_has_its_columns_and_dtypes():
    empty = Table.empty({"op_name": "object", "occurrences": "int64", "self_us": "float64"})
    assert len(empty) == 0 and [values.dtype.kind for _, values in empty.items()] == ["O", "i", "f"]


def test_each_frame_is_a_new_one_and_round_trips():
    """A frame kept on a long-lived table gathered pandas' bookkeeping of every view made
    of it (tests/test_load.py): each call makes its own, and changing one leaves the next
    and the table as they were."""
    table = ops()
    frame = table.frame()
    frame["occurrences"] = 0
    assert table.frame()["occurrences"].tolist() == [2, 5, 3] and table["occurrences"].tolist() == [2, 5, 3]
    assert list(frame.columns) == table.names and frame["occurrences"].dtype == np.int64
    back = Table.from_frame(frame)
    assert back["op_name"].dtype == object and back["op_name"].tolist() == ["conv", "relu", "conv"]
    assert np.array_equal(back["self_us"], table["self_us"], equal_nan=True)


def test_a_table_pickles_with_its_columns():
    table = ops()
    again = pickle.loads(pickle.dumps(table))
    assert again.names == table.names and again["occurrences"].tolist() == [2, 5, 3]


def test_text_array_keeps_tuples_one_value_each():
    pairs = text_array([("conv", "Conv2D"), ("relu", "Relu")])
    assert pairs.shape == (2,) and pairs[0] == ("conv", "Conv2D")


def test_held_bytes_count_the_texts_of_text_columns():
    numbers = Table({"x": np.zeros(100)})
    texts = Table({"x": text_array(["a long op name " * 4] * 100)})
    assert held_bytes(numbers) == numbers.memory_bytes() == 800
    assert texts.memory_bytes() > 100 * 60


def test_a_lazy_table_is_made_once_on_first_use():
    made = []

    def make() -> Table:
        made.append(1)
        return ops()

    lazy = LazyTable(make)
    assert not made
    assert lazy.table() is lazy.table() and len(made) == 1


def test_group_sums_add_in_row_order_and_skip_unknowns():
    codes = np.array([0, 1, 0, 2])
    values = np.array([1.0, 2.0, np.nan, np.nan])
    assert group_counts(codes, 4).tolist() == [2, 1, 1, 0]
    assert group_sums(values, codes, 4).tolist() == [1.0, 2.0, 0.0, 0.0]  # NaN skipped, 0 for none
    known = known_sums(values, codes, 4)
    assert known[:2].tolist() == [1.0, 2.0] and np.isnan(known[2:]).all()  # unknown where none is known


def test_integer_group_sums_are_exact_past_a_float_s_digits():
    big = 2**53
    sums = integer_group_sums(np.array([big, 1, 1]), np.array([0, 0, 1]), 2)
    assert sums.tolist() == [big + 1, 1]  # a float64 sum would give 2**53


def test_group_spread_and_extremes():
    codes = np.array([0, 0, 1])
    values = np.array([1.0, 3.0, 5.0])
    assert group_std(values, codes, 3)[:2].tolist() == [1.0, 0.0] and np.isnan(group_std(values, codes, 3)[2])
    low, high = group_extremes(values, codes, 3)
    assert low.tolist() == [1.0, 5.0, np.inf] and high.tolist() == [3.0, 5.0, -np.inf]


def test_first_appearance_numbers_keys_in_the_order_met():
    codes, keys = first_appearance([("b", 1), ("a", 2), ("b", 1)])
    assert codes.tolist() == [0, 1, 0] and keys == [("b", 1), ("a", 2)]
    ids, first = first_appearance_ids([np.array([3, 1, 3, 2]), np.array([0, 0, 0, 1])])
    assert ids.tolist() == [0, 1, 0, 2] and first.tolist() == [0, 1, 3]


def test_among_and_positions_look_values_up():
    assert among(text_array(["a", "b", "c"]), ["c", "a"]).tolist() == [True, False, True]
    assert positions(["x", "z", "y"], ["y", "x"]).tolist() == [1, -1, 0]


def test_the_groups_helper_is_built_in_this_environment():
    assert_built_and_switchable(groups._NUMBERING, "tb_opcompare.schema._groups", "tb_opcompare.schema.groups")


def test_first_seen_stamps_each_key_with_the_count_it_was_first_met_at(both_ways):
    baseline, target = first_seen([["b", "a", "b", "é"], ["a", "層", "c", "層", "b"]])
    assert baseline.tolist() == [0, 1, 0, 3] and target.tolist() == [1, 5, 6, 5, 0]
    assert [stamps.tolist() for stamps in first_seen([[], ["x", "x"], []])] == [[], [0, 0], []]
    assert first_seen([]) == []
    assert first_seen([("a", "b", "a")])[0].tolist() == [0, 1, 0]  # a column not a list: the dict's way
    # keys that are not all text (tuples, None): numbered with Python's equality either way
    mixed = first_seen([[("a", 1), None, ("a", 1)], [None, "a"]])
    assert [stamps.tolist() for stamps in mixed] == [[0, 1, 0], [1, 4]]


def _python(function, *args):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(native.PURE_PYTHON_ENV, "1")
        return function(*args)


def test_first_seen_in_c_is_the_dicts_on_many_keys_of_every_width():
    """Random keys drawn from a pool with repeats (ASCII, Latin-1, the BMP, beyond it;
    equal texts in distinct objects; one length, differing in the last character), over
    several columns: the C stamps are the dict's."""
    rng = np.random.default_rng(57)
    pool = ["", "a", "é", "層", "\U0001f600", "aten::mm", "aten::mn", "op" * 40, "op" * 39 + "oq"]
    pool += [f"k{n}" for n in range(5000)]
    for sizes in ((0,), (1, 1), (3000, 7000), (20_000, 1, 50_000)):
        # equal texts in new objects each time: found by their text, not their identity
        columns = [[pool[i].encode().decode() for i in rng.integers(len(pool), size=size)] for size in sizes]
        made = first_seen(columns)
        expected = _python(first_seen, columns)
        assert [stamps.tolist() for stamps in made] == [stamps.tolist() for stamps in expected]


def test_starting_with_is_str_startswith(both_ways):
    texts = ["aten::_foo", "aten::mm", "_x", "", "Mkl", "Mk", "層_", "aten::é", "\U0001f600aten::_"]
    prefixes = ("_", "Mkl", "aten::_")
    expected = [text.startswith(prefixes) for text in texts]
    assert starting_with(texts, prefixes).tolist() == expected
    assert starting_with(texts, ()).tolist() == [False] * len(texts)
    assert starting_with(texts, ("",)).tolist() == [True] * len(texts)
    assert starting_with([], prefixes).tolist() == []
    assert starting_with(texts, ("層", "aten")).tolist() == [text.startswith(("層", "aten")) for text in texts]


def test_starting_with_in_c_is_str_startswith_on_random_text():
    rng = np.random.default_rng(57)
    alphabet = list("_aten:Mklmé層\U0001f600")
    texts = ["".join(rng.choice(alphabet, size=int(rng.integers(0, 9)))) for _ in range(20_000)]
    prefixes = ("_", "Mkl", "aten::_", "aten::slow_conv", "a")
    assert starting_with(texts, prefixes).tolist() == _python(starting_with, texts, prefixes).tolist()
    assert starting_with(texts, prefixes).tolist() == [text.startswith(prefixes) for text in texts]


def test_a_gathered_column_is_sized_as_it_will_be_made():
    """A column not made yet counts what it will hold (counts made Python objects), and
    the positions its side's columns share once."""
    from tb_opcompare.schema.table import Gathered

    def objects(values, positions):
        return values[positions].astype(object)

    rows = 20_000
    positions = np.random.default_rng(57).permutation(rows)
    source = {"n": np.arange(rows, dtype=np.int64), "x": np.linspace(0.0, 1.0, rows)}
    lazy = Table({name: Gathered(values, positions, objects, objects) for name, values in source.items()})
    before = lazy.memory_bytes()
    made = Table(dict(lazy.items()))
    assert 0.8 <= before / (made.memory_bytes() + positions.nbytes) <= 1.25
    assert lazy["n"].tolist() == positions.tolist() and lazy.memory_bytes() == made.memory_bytes()
