"""What every reader leaves (``schema.events.ParsedProfile``): no pandas, a small pickle,
and the same tables ``read_profile`` gives once ``OpProfile.from_parsed`` makes them."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pandas as pd
from conftest import FIXTURES, REPO

from tb_opcompare.ingest.formats import read_parsed, read_profile
from tb_opcompare.schema.optable import OpProfile

KERAS = next((FIXTURES / "logdir/tf_keras/cnn_cpu_bs8").glob("**/*.xplane.pb"))
# recorded on an H100 with stacks and memory: its module table and memory timeline are not empty
TORCH = next((FIXTURES / "gpu_h100/modules/mnist_cnn_torch_stack_gpu_bs16").glob("*.pt.trace.json*"))
TABLES = ("op_table", "step_table", "module_table", "annotation_table", "memory_table")


def test_the_readers_import_no_pandas():
    """A fresh interpreter reads an xplane and a PyTorch trace without pandas (or pyarrow,
    which pandas brings): the readers need numpy and themselves only."""
    code = (
        "import sys\n"
        "from tb_opcompare.ingest.formats import read_parsed\n"
        f"assert len(read_parsed('xplane', [{str(KERAS)!r}]).events)\n"
        f"assert len(read_parsed('pytorch', [{str(TORCH)!r}]).events)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pandas', 'pyarrow')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_parsed_session_pickled_makes_the_same_tables():
    """Handed to another process (pickled), a parsed session makes exactly the tables a
    read in that process makes, the PyTorch module table (a ``Recipe``) among them."""
    for file_format, path in (("xplane", KERAS), ("pytorch", TORCH)):
        parsed = read_parsed(file_format, [str(path)])
        moved = OpProfile.from_parsed(pickle.loads(pickle.dumps(parsed)))
        here = read_profile(file_format, [str(path)])
        for table in TABLES:
            pd.testing.assert_frame_equal(getattr(moved, table).frame(), getattr(here, table).frame(), check_exact=True)
        assert moved.facts == here.facts and moved.step_count == here.step_count
    assert len(here.module_table.frame()) and len(here.memory_table.frame())  # the trace has both: they were compared


def test_a_module_table_not_made_yet_still_counts_in_memory():
    """TensorBoard's memory cache bounds what it holds by each profile's ``memory_bytes``:
    a PyTorch module table is made on first use, and until then its recipe counts (within
    2x of the table it makes), not nothing, or traces recorded with stacks would overrun it."""
    profile = read_profile("pytorch", [str(TORCH)])
    before = profile.memory_bytes()
    made = profile.module_table.memory_bytes()
    rest = profile.memory_bytes() - made
    assert made > 0 and made / 2 <= before - rest <= made * 2
