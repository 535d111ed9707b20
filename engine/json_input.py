"""JSON from outside (scenario files, share links, uploaded result files): parsed with a bound on nesting, without
NaN/Infinity (not JSON: RFC 8259 section 6), and refused with one message instead of Python's RecursionError.

    doc = loads(text)               # JsonInputError(message) for anything that is not plain, shallow JSON

Every file the planner reads is at most a few levels deep (a scenario 4, a runner result 4, an MLPerf system
description 3), so MAX_DEPTH leaves a wide margin while keeping every later walk over the data far from the
interpreter's recursion limit.
"""
from __future__ import annotations

import json

MAX_DEPTH = 32                 # arrays and objects inside each other


class JsonInputError(ValueError):
    """Not usable JSON; str(err) says why, in words for the person who sent it."""


def _no_constant(name: str):
    raise JsonInputError(f"{name} is not a number JSON allows; write a finite number")


def depth(value, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of parsed JSON (a scalar is 0, [] is 1), counted without recursion; stops past `limit`."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        if not isinstance(node, (dict, list)):
            continue
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest
        stack.extend((child, level + 1) for child in (node.values() if isinstance(node, dict) else node)
                     if isinstance(child, (dict, list)))
    return deepest


def loads(data: str | bytes, max_depth: int = MAX_DEPTH):
    """Parse JSON text; JsonInputError for invalid JSON, NaN/Infinity, or nesting deeper than max_depth."""
    try:
        value = json.loads(data, parse_constant=_no_constant)
    except JsonInputError:
        raise
    except RecursionError:
        raise JsonInputError(f"nested more than {max_depth} levels deep; no file of this kind is") from None
    except UnicodeDecodeError as err:
        raise JsonInputError(f"not UTF-8 text (byte {err.start})") from None
    except ValueError as err:                      # JSONDecodeError, or an integer of more than 4,300 digits
        raise JsonInputError(f"not valid JSON: {err}") from None
    if depth(value, max_depth) > max_depth:
        raise JsonInputError(f"nested more than {max_depth} levels deep; no file of this kind is")
    return value
