"""Kubernetes resource quantities: parsing and the canonical string forms the project writes.

Every Quantity the project writes is a string (D18): CPU as whole cores (``"16"``) or millicores
(``"2400m"``); memory and storage in the largest binary unit that is exact (``"64Gi"``), rounded
down to 1m CPU and 1Mi memory.
"""

from __future__ import annotations

import re
from fractions import Fraction

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_RE = re.compile(QUANTITY_PATTERN)

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_MI = 1024 * 1024


#: The most digits (and the largest decimal exponent) a quantity is read with: far past any
#: resource a Pod takes, and small enough that exact arithmetic stays cheap (``1e9999999``
#: took seconds to expand, and a 5000-digit number is more than ``int()`` converts).
MAX_DIGITS = 1000
_MAX_EXPONENT_TEXT = 8


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def is_quantity(value: object) -> bool:
    """True for an int or a string in Kubernetes quantity syntax."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    # fullmatch: the pattern's ``$`` also matches before a trailing newline in Python, where
    # the API server's (Go) regular expression ends only at the end of the text.
    return isinstance(value, str) and _RE.fullmatch(value) is not None


def parse_quantity(value: str | int) -> Fraction:
    """The exact numeric value of a quantity (bytes for memory, cores for CPU)."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    m = _RE.match(value.strip() if isinstance(value, str) else "")
    if not m or not isinstance(value, str):
        raise QuantityError(f"{value!r} is not a quantity")
    sign = -1 if m.group(1) == "-" else 1
    suffix = m.group(6) or ""
    if len(m.group(2)) > MAX_DIGITS or len(suffix) > _MAX_EXPONENT_TEXT:
        raise QuantityError(f"{value[:40]!r}… is too long a quantity to read")
    number = Fraction(m.group(2))
    if suffix in _BINARY:
        return sign * number * Fraction(1024 ** _BINARY[suffix])
    exponent = _DECIMAL[suffix] if suffix in _DECIMAL else int(Fraction(suffix[1:]))
    if abs(exponent) > MAX_DIGITS:
        raise QuantityError(f"{value!r} has an exponent past ±{MAX_DIGITS}")
    return sign * number * _pow10(exponent)


def _pow10(exponent: int) -> Fraction:
    return Fraction(10**exponent) if exponent >= 0 else Fraction(1, 10**-exponent)


def is_binary(value: str | int) -> bool:
    return isinstance(value, str) and any(value.endswith(s) for s in _BINARY)


def format_cpu(cores: Fraction) -> str:
    """Whole cores as ``"16"``, otherwise millicores rounded down as ``"2400m"``."""
    milli = int(cores * 1000)  # int() truncates toward zero: rounds down for positive values
    if milli % 1000 == 0:
        return str(milli // 1000)
    return f"{milli}m"


def format_memory(amount: Fraction) -> str:
    """Bytes rounded down to 1Mi, written in the largest exact binary unit."""
    mib = int(amount / _MI)
    if mib == 0:
        return str(int(amount))
    for suffix, power in (("Ei", 6), ("Pi", 5), ("Ti", 4), ("Gi", 3)):
        unit = 1024 ** (power - 2)
        if mib % unit == 0:
            return f"{mib // unit}{suffix}"
    return f"{mib}Mi"


def format_decimal(amount: Fraction) -> str:
    """A decimal-SI canonical form: the largest suffix that keeps the number whole (zero is
    ``0``, as Kubernetes writes it, not ``0E``)."""
    if amount == 0:
        return "0"
    for suffix, exp in sorted(_DECIMAL.items(), key=lambda kv: -kv[1]):
        scaled = amount / _pow10(exp)
        if scaled.denominator == 1:
            return f"{scaled.numerator}{suffix}"
    return f"{int(amount * _pow10(9))}n"


def format_binary(amount: Fraction) -> str:
    """A binary-SI canonical form: whole bytes in the largest exact binary unit, anything else
    as :func:`format_decimal` writes it."""
    if amount.denominator != 1 or amount == 0:
        return format_decimal(amount)
    whole = int(amount)
    for suffix, power in sorted(_BINARY.items(), key=lambda kv: -kv[1]):
        unit = 1024**power
        if whole % unit == 0:
            return f"{whole // unit}{suffix}"
    return str(whole)


def canonical(value: str | int) -> str:
    """The canonical Kubernetes spelling of ``value``, keeping its binary or decimal family."""
    amount = parse_quantity(value)
    return format_binary(amount) if is_binary(value) else format_decimal(amount)


def whole_number(value: str | int) -> int | None:
    """The integer value of a quantity, or None when it is not a whole number."""
    try:
        amount = parse_quantity(value)
    except QuantityError:
        return None
    return int(amount) if amount.denominator == 1 else None
