"""The XSpace wire format (``*.xplane.pb``), declared here so reading needs no TensorFlow.

The field numbers mirror ``tsl/profiler/protobuf/xplane.proto``, and for the XLA programs
an XSpace's ``/host:metadata`` plane holds (``HloProto``), the few fields of
``xla/service/hlo.proto`` and ``xla/xla_data.proto`` the readers use. The descriptor is
built at import time into a private pool, so it never clashes with TensorFlow's own
``tensorflow.profiler.XSpace`` when both are loaded in one process, and it does not
depend on a ``protoc`` version matching the installed protobuf runtime.

Maps (``event_metadata``, ``stat_metadata``) are declared as repeated key/value
entry messages: that is exactly their wire encoding, and iterating a repeated field
is cheaper than building a dict we do not need.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_PACKAGE = "tb_opcompare.xplane"

_I64 = descriptor_pb2.FieldDescriptorProto.TYPE_INT64
_I32 = descriptor_pb2.FieldDescriptorProto.TYPE_INT32
_U64 = descriptor_pb2.FieldDescriptorProto.TYPE_UINT64
_F64 = descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE
_STR = descriptor_pb2.FieldDescriptorProto.TYPE_STRING
_BYTES = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
_MSG = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
_OPT = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
_REP = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED

# message name -> [(field name, number, type, label, message type or None)]
_MESSAGES: dict[str, list[tuple[str, int, int, int, str | None]]] = {
    "XStat": [
        ("metadata_id", 1, _I64, _OPT, None),
        ("double_value", 2, _F64, _OPT, None),
        ("uint64_value", 3, _U64, _OPT, None),
        ("int64_value", 4, _I64, _OPT, None),
        ("str_value", 5, _STR, _OPT, None),
        ("bytes_value", 6, _BYTES, _OPT, None),
        ("ref_value", 7, _U64, _OPT, None),
    ],
    "XEvent": [
        ("metadata_id", 1, _I64, _OPT, None),
        ("offset_ps", 2, _I64, _OPT, None),
        ("duration_ps", 3, _I64, _OPT, None),
        ("stats", 4, _MSG, _REP, "XStat"),
        ("num_occurrences", 5, _I64, _OPT, None),
    ],
    "XLine": [
        ("id", 1, _I64, _OPT, None),
        ("name", 2, _STR, _OPT, None),
        ("timestamp_ns", 3, _I64, _OPT, None),
        ("events", 4, _MSG, _REP, "XEvent"),
        ("duration_ps", 9, _I64, _OPT, None),
        ("display_id", 10, _I64, _OPT, None),
        ("display_name", 11, _STR, _OPT, None),
    ],
    "XEventMetadata": [
        ("id", 1, _I64, _OPT, None),
        ("name", 2, _STR, _OPT, None),
        ("metadata", 3, _BYTES, _OPT, None),
        ("display_name", 4, _STR, _OPT, None),
        ("stats", 5, _MSG, _REP, "XStat"),
        ("child_id", 6, _I64, _REP, None),
    ],
    "XStatMetadata": [
        ("id", 1, _I64, _OPT, None),
        ("name", 2, _STR, _OPT, None),
        ("description", 3, _STR, _OPT, None),
    ],
    "EventMetadataEntry": [
        ("key", 1, _I64, _OPT, None),
        ("value", 2, _MSG, _OPT, "XEventMetadata"),
    ],
    "StatMetadataEntry": [
        ("key", 1, _I64, _OPT, None),
        ("value", 2, _MSG, _OPT, "XStatMetadata"),
    ],
    "XPlane": [
        ("id", 1, _I64, _OPT, None),
        ("name", 2, _STR, _OPT, None),
        ("lines", 3, _MSG, _REP, "XLine"),
        ("event_metadata", 4, _MSG, _REP, "EventMetadataEntry"),
        ("stat_metadata", 5, _MSG, _REP, "StatMetadataEntry"),
        ("stats", 6, _MSG, _REP, "XStat"),
    ],
    "XSpace": [
        ("planes", 1, _MSG, _REP, "XPlane"),
        ("errors", 2, _STR, _REP, None),
        ("warnings", 3, _STR, _REP, None),
        ("hostnames", 4, _STR, _REP, None),
    ],
    # XLA: a compiled program, its computations (fused ones included) and their instructions
    "ShapeProto": [
        ("element_type", 2, _I32, _OPT, None),  # the PrimitiveType enum: F32 = 11, BF16 = 16 ...
        ("dimensions", 3, _I64, _REP, None),
        ("tuple_shapes", 4, _MSG, _REP, "ShapeProto"),
    ],
    # a windowed op's window (a convolution's, a reduce-window's): one entry a spatial dimension
    "WindowDimension": [
        ("size", 1, _I64, _OPT, None),
        ("stride", 2, _I64, _OPT, None),
        ("padding_low", 3, _I64, _OPT, None),
        ("padding_high", 4, _I64, _OPT, None),
        ("window_dilation", 5, _I64, _OPT, None),
        ("base_dilation", 6, _I64, _OPT, None),
    ],
    "Window": [("dimensions", 1, _MSG, _REP, "WindowDimension")],
    "ConvolutionDimensionNumbers": [
        ("kernel_spatial_dimensions", 6, _I64, _REP, None),
        ("input_batch_dimension", 7, _I64, _OPT, None),
        ("input_feature_dimension", 8, _I64, _OPT, None),
        ("output_feature_dimension", 10, _I64, _OPT, None),
        ("input_spatial_dimensions", 11, _I64, _REP, None),
        ("output_spatial_dimensions", 12, _I64, _REP, None),
    ],
    "DotDimensionNumbers": [("lhs_contracting_dimensions", 1, _I64, _REP, None)],
    # the framework op an instruction was made from: TF's node path or JAX's transform and op
    "OpMetadata": [
        ("op_type", 1, _STR, _OPT, None),
        ("op_name", 2, _STR, _OPT, None),
    ],
    "HloInstructionProto": [
        ("name", 1, _STR, _OPT, None),
        ("opcode", 2, _STR, _OPT, None),
        ("shape", 3, _MSG, _OPT, "ShapeProto"),
        ("metadata", 7, _MSG, _OPT, "OpMetadata"),
        ("window", 15, _MSG, _OPT, "Window"),
        ("convolution_dimension_numbers", 16, _MSG, _OPT, "ConvolutionDimensionNumbers"),
        ("custom_call_target", 28, _STR, _OPT, None),
        ("dot_dimension_numbers", 30, _MSG, _OPT, "DotDimensionNumbers"),
        ("fft_length", 32, _I64, _REP, None),
        ("id", 35, _I64, _OPT, None),
        ("operand_ids", 36, _I64, _REP, None),
        ("called_computation_ids", 38, _I64, _REP, None),
        ("feature_group_count", 50, _I64, _OPT, None),
        ("batch_group_count", 58, _I64, _OPT, None),
    ],
    "HloComputationProto": [
        ("name", 1, _STR, _OPT, None),
        ("instructions", 2, _MSG, _REP, "HloInstructionProto"),
        ("id", 5, _I64, _OPT, None),
        ("root_id", 6, _I64, _OPT, None),
    ],
    "HloModuleProto": [
        ("name", 1, _STR, _OPT, None),
        ("computations", 3, _MSG, _REP, "HloComputationProto"),
    ],
    "HloProto": [
        ("hlo_module", 1, _MSG, _OPT, "HloModuleProto"),
    ],
}


# Fields that share a ``oneof`` in xplane.proto: declaring it lets readers ask which
# value a stat holds (``WhichOneof``), since proto3 cannot tell 0 from "unset".
_ONEOFS: dict[str, tuple[str, set[str]]] = {
    "XStat": ("value", {"double_value", "uint64_value", "int64_value", "str_value", "bytes_value", "ref_value"}),
    "XEvent": ("data", {"offset_ps", "num_occurrences"}),
}


def _build_file() -> descriptor_pb2.FileDescriptorProto:
    file_proto = descriptor_pb2.FileDescriptorProto(name="tb_opcompare/xplane.proto", package=_PACKAGE, syntax="proto3")
    for message_name, fields in _MESSAGES.items():
        message = file_proto.message_type.add(name=message_name)
        oneof_name, oneof_members = _ONEOFS.get(message_name, ("", set()))
        if oneof_name:
            message.oneof_decl.add(name=oneof_name)
        for field_name, number, field_type, label, type_name in fields:
            field = message.field.add(name=field_name, number=number, type=field_type, label=label)
            if field_name in oneof_members:
                field.oneof_index = 0
            if type_name:
                field.type_name = f".{_PACKAGE}.{type_name}"
    return file_proto


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_build_file())
XSpace = message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{_PACKAGE}.XSpace"))
XPlane = message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{_PACKAGE}.XPlane"))
XLine = message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{_PACKAGE}.XLine"))
XEvent = message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{_PACKAGE}.XEvent"))
HloProto = message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{_PACKAGE}.HloProto"))
