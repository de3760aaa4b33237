"""Applies pyiceberg's partition transforms to values, for the transform test (issue 30).

  echo '[{"type": "long", "transform": "bucket[16]", "value": "42"}]' | \
      .venv-readers/bin/python test/readers/transforms.py

Input (stdin): a JSON list of cases {"type", "transform", "value"}; values as the test sends them:
int and date (days) as numbers; long, time and timestamp(tz) (microseconds) and a decimal's
unscaled value as decimal strings; string as is; binary, fixed and uuid as hex; null as null.
Output: a JSON list of the partition values pyiceberg's transform gives, in the same order:
ints as numbers (long results as strings), a decimal as its unscaled value (string), bytes as hex.
"""

from __future__ import annotations

import decimal
import json
import sys
import uuid

from pyiceberg.transforms import parse_transform
from pyiceberg.types import (
    BinaryType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

SIMPLE = {
    "int": IntegerType(),
    "long": LongType(),
    "date": DateType(),
    "time": TimeType(),
    "timestamp": TimestampType(),
    "timestamptz": TimestamptzType(),
    "string": StringType(),
    "binary": BinaryType(),
    "uuid": UUIDType(),
}


def type_of(name: str):
    if name.startswith("decimal("):
        p, s = name[len("decimal(") : -1].split(",")
        return DecimalType(int(p), int(s))
    return SIMPLE[name]


def value_in(t, v):
    if v is None:
        return None
    if isinstance(t, DecimalType):
        return decimal.Decimal(int(v)).scaleb(-t.scale)
    if isinstance(t, (LongType, TimeType, TimestampType, TimestamptzType)):
        return int(v)
    if isinstance(t, UUIDType):
        return uuid.UUID(bytes=bytes.fromhex(v))
    if isinstance(t, BinaryType):
        return bytes.fromhex(v)
    return v


def value_out(t, v):
    if v is None or isinstance(v, (str, bool)):
        return v
    if isinstance(v, decimal.Decimal):
        return str(int(v.scaleb(t.scale)))
    if isinstance(v, int):
        return v if isinstance(t, IntegerType) or abs(v) < 2**31 else str(v)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if isinstance(v, uuid.UUID):
        return v.bytes.hex()
    raise TypeError(f"unexpected partition value {v!r}")


def main() -> int:
    # decimal(38, s) has 38 digits; Python's default context keeps 28.
    decimal.getcontext().prec = 100
    out = []
    for case in json.load(sys.stdin):
        t = type_of(case["type"])
        fn = parse_transform(case["transform"]).transform(t)
        result = fn(value_in(t, case["value"]))
        out.append(value_out(t, result))
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
