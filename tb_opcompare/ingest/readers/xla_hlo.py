"""What the XLA programs of a profile say about its precision (and, kept for
``xla_cost``, the programs themselves by id).

With XLA, TensorFlow's ops become compiled programs whose allocations carry no dtype,
so the precision is read where XLA keeps it: the ``HloProto`` of each program, which the
profiler stores in the ``/host:metadata`` plane (stat ``Hlo Proto``). The evidence is the
element type of every floating-point value the programs compute (each instruction once,
fused computations included); the convolutions' and dots' own types are named beside it,
as XLA may compute them wider than the model stores its values (on a CPU, a bf16 model's
convolutions are converted to fp32 and computed there).
"""

from __future__ import annotations

import collections
import re

from google.protobuf.message import DecodeError

from tb_opcompare.ingest.readers.xplane_schema import HloProto
from tb_opcompare.schema.events import precision_from_dtypes

METADATA_PLANE = "/host:metadata"
_HLO_STAT = "Hlo Proto"
PROGRAM_STAT = "program_id"  # on a program's metadata and on each event of its ops
_COMPUTE_OPCODES = frozenset({"convolution", "dot"})
# xla_data.proto's PrimitiveType, for the floating types a model computes in: F16 10, F32 11,
# F64 12, BF16 16, the fp8 kinds (F8E5M2 19, F8E4M3FN 20, F8E4M3B11FNUZ 23, F8E5M2FNUZ 24,
# F8E4M3FNUZ 25, F8E4M3 28, F8E3M4 29, F8E8M0FNU 33) and F4E2M1FN 32; 21 and 22 are 4-bit integers
_ELEMENT_TYPES = {
    10: "fp16",
    11: "fp32",
    12: "fp64",
    16: "bf16",
    **dict.fromkeys((19, 20, 23, 24, 25, 28, 29, 33), "fp8"),
    32: "fp4",
}


_INTEGERS = ("int64_value", "uint64_value")
_NAMED_ID = re.compile(r"\((\d{1,19})\)$")


class HloEvidence:
    """Element types counted over the XLA programs of a profile's metadata planes."""

    def __init__(self) -> None:
        self.values: collections.Counter = collections.Counter()  # every floating-point instruction
        self.compute: collections.Counter = collections.Counter()  # convolutions and dots
        self.programs = 0
        self.modules: dict[int, object] = {}  # program id -> its HloModuleProto, for the ops' work

    def add(self, plane) -> None:
        """Count the programs of a metadata plane and keep each by its program id. One that
        does not parse is left out: the precision then rests on the others, or on the
        sidecar, and its ops' work is unknown."""
        names = {entry.key: entry.value.name for entry in plane.stat_metadata}
        stat_ids = {key for key, name in names.items() if name == _HLO_STAT}
        if not stat_ids:
            return
        for entry in plane.event_metadata:
            program_id, data = None, b""
            for stat in entry.value.stats:
                if stat.metadata_id in stat_ids and stat.bytes_value:
                    data = stat.bytes_value
                elif names.get(stat.metadata_id) == PROGRAM_STAT and stat.WhichOneof("value") in _INTEGERS:
                    program_id = getattr(stat, stat.WhichOneof("value"))
            if program_id is None:  # TensorFlow names the program's id only in its name: ``name(72)``
                named = _NAMED_ID.search(entry.value.name)
                program_id = int(named.group(1)) if named else None
            if data:
                self._add_program(data, program_id)

    def _add_program(self, data: bytes, program_id: int | None) -> None:
        program = HloProto()
        try:
            program.ParseFromString(data)
        except DecodeError:
            return
        self.programs += 1
        if program_id is not None:
            self.modules[program_id] = program.hlo_module
        for computation in program.hlo_module.computations:
            for instruction in computation.instructions:
                precision = _ELEMENT_TYPES.get(instruction.shape.element_type)
                if precision:
                    self.values[precision] += 1
                    if instruction.opcode in _COMPUTE_OPCODES:
                        self.compute[precision] += 1

    def precision(self) -> tuple[str, str] | None:
        """(precision, its source) as ``precision_from_dtypes`` gives them; None without a
        floating-point instruction."""
        programs = f"{self.programs} XLA program{'s' if self.programs != 1 else ''}"
        found = precision_from_dtypes(
            dict(self.values), f"element types of {{total}} floating-point instructions of {programs}"
        )
        if found and self.compute:
            compute = ", ".join(f"{count} {name}" for name, count in self.compute.most_common())
            found = found[0], f"{found[1]}; convolutions and dots output {compute}"
        return found
