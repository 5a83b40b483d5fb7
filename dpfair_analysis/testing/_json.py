"""JSON-ready values for the kit's reports (imports nothing: the pytest plugin uses it at collection time)."""

from __future__ import annotations

import math
from typing import Any


def jsonable(value: Any) -> Any:
    """``value`` with dicts, sequences, numpy arrays and scalars turned into JSON types; a non-finite float
    becomes its string ("inf", "nan"), anything else unknown its ``str``."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return jsonable(value.tolist())
    return str(value)
