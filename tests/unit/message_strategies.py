"""Hypothesis strategies for kafka-python's schema-generated messages, read off the schema.

``message(cls, version)`` builds instances of any request or response class at any
version: every field present in that version gets a value of its wire type, nullable
fields are sometimes None, and tagged fields are sometimes left out.
"""
from hypothesis import strategies as st
from kafka.protocol.schemas.fields.array import ArrayField
from kafka.protocol.schemas.fields.simple import SimpleField
from kafka.protocol.schemas.fields.struct import StructField
from kafka.protocol.schemas.fields.struct_array import StructArrayField

_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_SMALL_LISTS = {"max_size": 3}


def _signed(bits: int):
    return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def _simple(type_str: str):
    if type_str in _INTS:
        return _signed(_INTS[type_str])
    return {
        "uint16": st.integers(0, 0xFFFF),
        "float64": st.floats(allow_nan=False),
        "bool": st.booleans(),
        # The all-zero UUID is the wire's null; version-4 UUIDs never are.
        "uuid": st.uuids(version=4),
        "string": st.text(max_size=20),
        "bytes": st.binary(max_size=40),
        "records": st.binary(max_size=40),
        "bitfield": st.sets(st.integers(0, 30), max_size=4),
    }[type_str]


def _field(field, version: int):
    if isinstance(field, StructArrayField):
        value = st.lists(_struct(field.array_of, version), **_SMALL_LISTS)
    elif isinstance(field, ArrayField):
        value = st.lists(_simple(field.array_of.type_str), **_SMALL_LISTS)
    elif isinstance(field, StructField):
        value = _struct(field, version)
    elif isinstance(field, SimpleField):
        value = _simple(field.type_str)
    else:
        raise TypeError(f"no strategy for {field!r}")
    nullable = field.nullable_for_version_q(version) or (field.type_str == "uuid")
    return st.none() | value if nullable else value


def _fields(struct, version: int):
    required, optional = {}, {}
    for field in struct._fields:
        if field.for_version_q(version):
            target = optional if field.tagged_field_q(version) else required
            target[field.name] = _field(field, version)
    return st.fixed_dictionaries(required, optional=optional)


def _struct(field: StructField, version: int):
    return _fields(field, version).map(lambda values: field.data_class(version=version, **values))


def message(cls, version: int):
    """Instances of ``cls`` (a kafka-python request or response class) at ``version``."""
    return _fields(cls._struct, version).map(lambda values: cls(version=version, **values))
