"""Strict loading of TOML config files into dataclasses: unknown keys, wrong types and values out of
range are one-line errors.

A field states its range where it is declared (``bounded(1000, ge=1, hint=...)``), so a suite file
and the command line meet the same limits.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import tomllib
import types
import typing
from pathlib import Path
from typing import Any, TypeVar, cast

from benchmark.common.errors import BenchmarkError

T = TypeVar("T")


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _coerce(value: Any, tp: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        errors = []
        for option in typing.get_args(tp):
            if option is type(None):
                if value is None:
                    return None
                continue
            try:
                return _coerce(value, option, where)
            except BenchmarkError as exc:
                errors.append(exc)
        raise errors[0] if errors else BenchmarkError(f"{where} must not be empty")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise BenchmarkError(f"{where} must be a table, got {type(value).__name__} {value!r}")
        return from_dict(cast("type[Any]", tp), value, where)
    if origin is list:
        (item,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise BenchmarkError(f"{where} must be a list of {_type_name(item)}, got {type(value).__name__} {value!r}")
        return [_coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        key_t, val_t = typing.get_args(tp)
        if not isinstance(value, dict):
            raise BenchmarkError(f"{where} must be a table, got {type(value).__name__} {value!r}")
        return {k: _coerce(v, val_t, f"{where}.{k}") for k, v in value.items()}
    if tp is Any:
        return value
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in (int, float) and isinstance(value, bool):
        raise BenchmarkError(f"{where} must be {tp.__name__}, got bool {value!r}")
    if not isinstance(value, tp):
        raise BenchmarkError(
            f"{where} must be {_type_name(tp)}, got {type(value).__name__} {value!r}; fix the value's type"
        )
    return value


def bounded(
    default: Any = dataclasses.MISSING,
    *,
    ge: float | None = None,
    le: float | None = None,
    gt: float | None = None,
    hint: str = "",
) -> Any:
    """A dataclass field whose numeric value must lie in a range (None, when allowed, is left alone)."""
    return dataclasses.field(default=default, metadata={"ge": ge, "le": le, "gt": gt, "hint": hint})


#: float32's largest finite value and half its smallest subnormal: past them a value becomes inf or 0 in float32
FLOAT32_MAX = 3.4028234663852886e38
FLOAT32_ZERO = 7.006492321624085e-46


def float32_problem(value: Any) -> str | None:
    """Why a number cannot be used as written (not finite, or inf or 0 once the float32 tensors, Lucene's
    float similarity or the optimiser hold it), else None."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value):
        return "must be a finite number"
    if abs(value) > FLOAT32_MAX or 0 < abs(value) < FLOAT32_ZERO:
        if abs(value) > FLOAT32_MAX:
            return f"is inf in float32 (its largest magnitude is {FLOAT32_MAX:.4g})"
        return "is 0 in float32 (its smallest magnitude is 1.401e-45)"
    return None


def range_problem(where: str, value: Any, metadata: Any) -> str | None:
    """One line for a value outside its field's range (or not a finite float32), else None."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and (problem := float32_problem(value)):
        hint = metadata.get("hint")
        return f"{where} = {value!r} {problem}" + (f" ({hint})" if hint else "") + "; fix the value"
    ge, le, gt = metadata.get("ge"), metadata.get("le"), metadata.get("gt")
    ok = value == value and (ge is None or value >= ge) and (le is None or value <= le) and (gt is None or value > gt)
    if ok:
        return None
    parts = [
        f">= {ge}" if ge is not None else "",
        f"> {gt}" if gt is not None else "",
        f"<= {le}" if le is not None else "",
    ]
    kind = "an integer" if isinstance(value, int) else "a number"
    hint = metadata.get("hint")
    return (
        f"{where} = {value!r} must be {kind} {' and '.join(p for p in parts if p)}"
        + (f" ({hint})" if hint else "")
        + "; fix the value"
    )


def from_dict(cls: type[T], data: dict[str, Any], where: str) -> T:
    """Build ``cls`` from ``data``; ``where`` names the file/section in messages."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = [k for k in data if k not in fields]
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(key, fields, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise BenchmarkError(
            f"{where}: unknown key {key!r}{hint}; valid keys: {', '.join(fields)}. Remove or rename it"
        )
    kwargs = {}
    for name, f in fields.items():
        if name in data:
            kwargs[name] = _coerce(data[name], hints[name], f"{where}.{name}")
            problem = range_problem(f"{where}.{name}", kwargs[name], f.metadata)
            if problem:
                raise BenchmarkError(problem)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise BenchmarkError(f"{where}: missing required key {name!r}; add it")
    return cls(**kwargs)


def load_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise BenchmarkError(f"cannot read config file {str(path)!r} ({exc.strerror}); check the path") from None
    except tomllib.TOMLDecodeError as exc:
        raise BenchmarkError(f"config file {str(path)!r} is not valid TOML ({exc}); fix its syntax") from None


def parse_override(item: str, flag: str = "--set") -> tuple[list[str], Any]:
    """``key.sub=value`` → (["key", "sub"], value); the value is read as a TOML value (``0.5``, ``true``,
    ``[42, 43]``, ``"text"``), and a bare word that is not one stays a string (``bfloat16``)."""
    key, eq, raw = item.partition("=")
    path = [part.strip() for part in key.split(".")]
    if not eq or not all(path):
        raise BenchmarkError(f"{flag} {item!r} is not KEY=VALUE; write e.g. {flag} k=100 or {flag} recipe.max_steps=10")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return path, value


def apply_overrides(data: dict[str, Any], items: list[tuple[list[str], Any]], where: str) -> dict[str, Any]:
    """``data`` (a TOML document) with each dotted key set to its value; tables on the way are created.
    Unknown keys are left for ``from_dict`` to report with the valid ones."""
    import copy

    out = copy.deepcopy(data)
    for path, value in items:
        node = out
        for i, part in enumerate(path[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise BenchmarkError(
                    f"--set {'.'.join(path)}: {where} key {'.'.join(path[: i + 1])!r} is a "
                    f"{type(child).__name__}, not a table; set it whole, e.g. --set {'.'.join(path[: i + 1])}=[...]"
                )
            node = child
        node[path[-1]] = value
    return out


def with_overrides(exc: BenchmarkError, items: list[tuple[list[str], Any]]) -> BenchmarkError:
    """A config error, saying which ``--set`` values the checked document had (they may be the cause)."""
    if not items:
        return exc
    given = ", ".join(f"{'.'.join(path)}={value!r}" for path, value in items)
    return BenchmarkError(f"{exc} (with --set {given})")
