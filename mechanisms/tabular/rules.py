"""The record-level rule language: a small, safe grammar, checked against the raw schema and
evaluated vectorised. :mod:`.constraints` uses the rules for raw cleaning and synthetic rejection.

A rule describes records to *remove*, e.g. ``"gestation_week < 29 and birth_weight > 2999"``
(Hod & Canetti 2024, Section 4.8: "records with a gestation_week smaller than 29 (strict) AND a
birth_weight greater than 2999 (strict)"). Grammar (keywords are case-insensitive)::

    rule       := or
    or         := and ("or" and)*
    and        := unary ("and" unary)*
    unary      := "not" unary | "(" rule ")" | comparison
    comparison := operand (("<" | "<=" | ">" | ">=" | "==" | "!=") operand)?
    operand    := column | number | "-" number | 'string' | "string" | true | false
    column     := identifier | `any name`

A column whose name is not an identifier (``marital-status``, ``hours per week``) is written
between backticks, as in ``pandas.DataFrame.query``: ```marital-status` == 'Divorced'``. A bare operand is only allowed for a boolean column (``not is_female``). Rules are parsed by
hand — never ``eval``/``exec`` — and checked against the raw schema when parsed: unknown columns,
chained comparisons, comparing two constants, ordering booleans or categories, categories the
schema does not declare, and dates that do not parse with the column's format are
:class:`SpecError` naming the rule and the position. Date literals are strings in the column's
format (``date_of_birth < '2019-07-01'``).

Evaluation is vectorised over a typed frame (as returned by :meth:`RawSchema.validate`, or by
:meth:`Transformation.decode` for synthetic codes) and returns a boolean mask.

References:
    Hod & Canetti (2024), Sections 4.8.1 (raw data constraints) and 4.8.2 (synthetic data
    constraints).
"""

from __future__ import annotations

import dataclasses
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from privlab.mechanisms.tabular.schema import RawColumn, RawSchema, parse_date
from privlab.platform.core.errors import SchemaError, SpecError


COMPARISONS: Mapping[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}
_EQUALITY = ("==", "!=")
_KEYWORDS = ("and", "or", "not", "true", "false")
_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<string>'[^']*'|"[^"]*")
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<quoted_name>`[^`]+`)
  | (?P<op><=|>=|==|!=|<|>)
  | (?P<paren>[()])
  | (?P<minus>-)
    """,
    re.VERBOSE,
)
_HINTS = {
    "=": "'=' is not an operator; use '==' to compare",
    "&": "use 'and' instead of '&'",
    "|": "use 'or' instead of '|'",
    "!": "use 'not' (or '!=') instead of '!'",
}


# ----------------------------------------------------------------------------------------------
# Syntax tree


@dataclasses.dataclass(frozen=True)
class ColumnRef:
    name: str
    position: int


@dataclasses.dataclass(frozen=True)
class Literal:
    value: Any
    position: int


@dataclasses.dataclass(frozen=True)
class Comparison:
    op: str
    left: ColumnRef | Literal
    right: ColumnRef | Literal
    position: int


@dataclasses.dataclass(frozen=True)
class Truth:
    """A bare boolean column used as a condition."""

    column: ColumnRef


@dataclasses.dataclass(frozen=True)
class Not:
    operand: Node


@dataclasses.dataclass(frozen=True)
class And:
    operands: tuple[Node, ...]


@dataclasses.dataclass(frozen=True)
class Or:
    operands: tuple[Node, ...]


Node = Comparison | Truth | Not | And | Or


@dataclasses.dataclass(frozen=True)
class _Token:
    kind: str  # number, string, name, keyword, op, paren, minus, end
    text: str
    position: int


def _error(text: str, problem: str, position: int) -> SpecError:
    caret = " " * position + "^"
    return SpecError(f"constraint {text!r}: {problem} at position {position}\n    {text}\n    {caret}")


def _tokenize(text: str) -> list[_Token]:
    tokens = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            char = text[position]
            if char in "'\"":
                raise _error(text, f"unterminated string starting with {char}", position)
            if char == "`":
                raise _error(text, "unterminated or empty `column name`", position)
            hint = _HINTS.get(char, "allowed are column names, numbers, quoted strings, true/false, "
                                    "< <= > >= == !=, and/or/not and parentheses")
            raise _error(text, f"unexpected character {char!r} ({hint})", position)
        kind = match.lastgroup or ""
        if kind != "space":
            value = match.group()
            follower = text[match.end():match.end() + 1]
            if kind == "name" and value.lower() in _KEYWORDS:
                kind, value = "keyword", value.lower()
            elif kind == "quoted_name":
                kind, value = "name", value[1:-1]
            elif kind == "name" and follower in ("-", ".") and text[match.end() + 1:match.end() + 2].isalnum():
                written = re.match(r"[^\s()<>=!]+", text[position:]).group()  # type: ignore[union-attr]
                raise _error(text, f"{written!r} is not a plain name; write a column name that is not an "
                                   f"identifier between backticks: `{written}`", position)
            if kind == "number" and (follower.isalpha() or follower == "_"):
                raise _error(text, f"a number cannot be followed by {text[match.end()]!r}", match.end())
            tokens.append(_Token(kind, value, position))
        position = match.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.index = 0

    @property
    def token(self) -> _Token:
        return self.tokens[self.index]

    def advance(self) -> _Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def fail(self, problem: str, token: _Token | None = None) -> SpecError:
        token = token or self.token
        return _error(self.text, problem, token.position)

    @staticmethod
    def describe(token: _Token) -> str:
        return "the end of the rule" if token.kind == "end" else repr(token.text)

    def parse(self) -> Node:
        if self.token.kind == "end":
            raise self.fail("the rule is empty")
        node = self.parse_or()
        if self.token.kind != "end":
            if self.token.kind == "paren" and self.token.text == ")":
                raise self.fail("unbalanced ')'")
            raise self.fail(f"expected 'and', 'or' or the end of the rule, found {self.describe(self.token)}")
        return node

    def parse_or(self) -> Node:
        operands = [self.parse_and()]
        while self.token.kind == "keyword" and self.token.text == "or":
            self.advance()
            operands.append(self.parse_and())
        return operands[0] if len(operands) == 1 else Or(tuple(operands))

    def parse_and(self) -> Node:
        operands = [self.parse_unary()]
        while self.token.kind == "keyword" and self.token.text == "and":
            self.advance()
            operands.append(self.parse_unary())
        return operands[0] if len(operands) == 1 else And(tuple(operands))

    def parse_unary(self) -> Node:
        token = self.token
        if token.kind == "keyword" and token.text == "not":
            self.advance()
            return Not(self.parse_unary())
        if token.kind == "paren" and token.text == "(":
            self.advance()
            if self.token.kind == "paren" and self.token.text == ")":
                raise self.fail("empty parentheses")
            node = self.parse_or()
            if not (self.token.kind == "paren" and self.token.text == ")"):
                raise self.fail(f"expected ')' to close the '(' at position {token.position}, "
                                f"found {self.describe(self.token)}")
            self.advance()
            return node
        return self.parse_comparison()

    def parse_operand(self) -> ColumnRef | Literal:
        token = self.token
        if token.kind == "name":
            self.advance()
            return ColumnRef(token.text, token.position)
        if token.kind == "number":
            self.advance()
            return Literal(_number(token.text), token.position)
        if token.kind == "minus":
            self.advance()
            if self.token.kind != "number":
                raise self.fail(f"expected a number after '-', found {self.describe(self.token)}")
            return Literal(-_number(self.advance().text), token.position)
        if token.kind == "string":
            self.advance()
            return Literal(token.text[1:-1], token.position)
        if token.kind == "keyword" and token.text in ("true", "false"):
            self.advance()
            return Literal(token.text == "true", token.position)
        raise self.fail(f"expected a column, a value or '(', found {self.describe(token)}")

    def parse_comparison(self) -> Node:
        left = self.parse_operand()
        if self.token.kind != "op":
            if isinstance(left, ColumnRef):
                return Truth(left)
            raise self.fail(
                f"expected a comparison operator after {self.text[left.position:self.token.position].strip()!r}, "
                f"found {self.describe(self.token)}"
            )
        op = self.advance()
        right = self.parse_operand()
        if self.token.kind == "op":
            raise self.fail("chained comparisons are not supported; combine two comparisons with 'and'")
        return Comparison(op.text, left, right, op.position)


def _number(text: str) -> int | float:
    if re.fullmatch(r"\d+", text):
        return int(text)
    return float(text)


# ----------------------------------------------------------------------------------------------
# Binding to a schema (type checks, date literals) and evaluation


def _bind(node: Node, *, text: str, schema: RawSchema) -> Node:
    """Check every column and comparison against ``schema``; convert date literals."""
    if isinstance(node, (And, Or)):
        return type(node)(tuple(_bind(o, text=text, schema=schema) for o in node.operands))
    if isinstance(node, Not):
        return Not(_bind(node.operand, text=text, schema=schema))
    if isinstance(node, Truth):
        column = _column(node.column, text=text, schema=schema)
        if column.type != "boolean":
            raise _error(
                text,
                f"column {column.name!r} is {column.type}, so it must be compared with a value "
                "(only boolean columns can stand alone)",
                node.column.position,
            )
        return node
    left, right = node.left, node.right
    if isinstance(left, Literal) and isinstance(right, Literal):
        raise _error(text, "the comparison compares two constants; one side must be a column", node.position)
    if isinstance(left, ColumnRef) and isinstance(right, ColumnRef):
        a = _column(left, text=text, schema=schema)
        b = _column(right, text=text, schema=schema)
        if _family(a) != _family(b):
            raise _error(text, f"cannot compare {a.type} column {a.name!r} with {b.type} column {b.name!r}",
                         node.position)
        if a.type in ("boolean", "categorical") and node.op not in _EQUALITY:
            raise _error(text, f"{a.type} columns can only be compared with == or !=", node.position)
        if a.type == "categorical" and tuple(a.categories or ()) != tuple(b.categories or ()):
            raise _error(text, f"categorical columns {a.name!r} and {b.name!r} have different categories",
                         node.position)
        return node
    if isinstance(left, ColumnRef) and isinstance(right, Literal):
        column = _column(left, text=text, schema=schema)
        return Comparison(node.op, left, Literal(_literal_for(column, right, op=node.op, text=text), right.position),
                          node.position)
    if isinstance(left, Literal) and isinstance(right, ColumnRef):
        column = _column(right, text=text, schema=schema)
        return Comparison(node.op, Literal(_literal_for(column, left, op=node.op, text=text), left.position), right,
                          node.position)
    raise _error(text, "malformed comparison", node.position)


def _family(column: RawColumn) -> str:
    return "number" if column.numeric else column.type


def _column(ref: ColumnRef, *, text: str, schema: RawSchema) -> RawColumn:
    if ref.name not in schema:
        raise _error(text, f"unknown column {ref.name!r}; the schema has: {', '.join(schema.names)}", ref.position)
    return schema[ref.name]


def _literal_for(column: RawColumn, literal: Literal, *, op: str, text: str) -> Any:
    value, position = literal.value, literal.position
    if column.numeric:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _error(text, f"{column.type} column {column.name!r} must be compared with a number, "
                               f"not {value!r}", position)
        return value
    if column.type == "boolean":
        if not isinstance(value, bool):
            raise _error(text, f"boolean column {column.name!r} must be compared with true or false, "
                               f"not {value!r}", position)
        if op not in _EQUALITY:
            raise _error(text, "boolean columns can only be compared with == or !=", position)
        return value
    if column.type == "categorical":
        if op not in _EQUALITY:
            raise _error(text, "categorical columns can only be compared with == or !=", position)
        categories = tuple(column.categories or ())
        for category in categories:
            if type(category) is type(value) and category == value:
                return category
        raise _error(text, f"{value!r} is not a category of column {column.name!r}; categories: "
                           f"{', '.join(map(repr, categories))}", position)
    # date
    if not isinstance(value, str):
        raise _error(text, f"date column {column.name!r} must be compared with a quoted date "
                           f"in the format {column.format!r}, not {value!r}", position)
    try:
        return parse_date(value, fmt=column.format or "", what="date")
    except SpecError:
        raise _error(text, f"{value!r} is not a date in the format {column.format!r} of column "
                           f"{column.name!r}", position) from None


def _columns_of(node: Node) -> list[str]:
    if isinstance(node, (And, Or)):
        return [name for o in node.operands for name in _columns_of(o)]
    if isinstance(node, Not):
        return _columns_of(node.operand)
    if isinstance(node, Truth):
        return [node.column.name]
    return [side.name for side in (node.left, node.right) if isinstance(side, ColumnRef)]


def evaluate(node: Node, frame: pd.DataFrame, schema: RawSchema) -> np.ndarray:
    if isinstance(node, And):
        result = evaluate(node.operands[0], frame, schema)
        for operand in node.operands[1:]:
            result = result & evaluate(operand, frame, schema)
        return result
    if isinstance(node, Or):
        result = evaluate(node.operands[0], frame, schema)
        for operand in node.operands[1:]:
            result = result | evaluate(operand, frame, schema)
        return result
    if isinstance(node, Not):
        return ~evaluate(node.operand, frame, schema)
    if isinstance(node, Truth):
        return frame[node.column.name].to_numpy(dtype=bool)

    def side(operand: ColumnRef | Literal) -> Any:
        if isinstance(operand, Literal):
            return operand.value
        series = frame[operand.name]
        if schema[operand.name].type == "categorical":
            return series.astype(object)
        return series

    result = COMPARISONS[node.op](side(node.left), side(node.right))
    return np.asarray(result, dtype=bool)


def check_frame(frame: pd.DataFrame, columns: Sequence[str], schema: RawSchema, *, what: str) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"{what}: expected a pandas DataFrame, got {type(frame).__name__}")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise SchemaError(
            f"{what}: missing column(s) {', '.join(map(repr, missing))} used by the constraints; "
            f"the frame has: {', '.join(map(str, frame.columns))}",
            problem="missing_column", column=missing[0],
        )
    for name in columns:
        series = frame[name]
        kind = schema[name].type
        null = series.isna().to_numpy()
        if null.any():
            raise SchemaError(
                f"{what}: column {name!r} has {int(null.sum())} missing/NaN value(s) (first at row "
                f"{int(np.flatnonzero(null)[0])}); constraints need complete records",
                column=name, problem="missing",
            )
        dtype = series.dtype
        ok = {
            "integer": pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype),
            "float": pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype),
            "boolean": pd.api.types.is_bool_dtype(dtype),
            "date": pd.api.types.is_datetime64_any_dtype(dtype),
            "categorical": not pd.api.types.is_datetime64_any_dtype(dtype),
        }[kind]
        if not ok:
            raise SchemaError(
                f"{what}: column {name!r} is declared {kind} but the frame holds {dtype} values; "
                "evaluate constraints on a typed frame (RawSchema.validate or Transformation.decode)",
                column=name, problem="kind",
            )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Constraint:
    """One parsed rule; a record *matching* it is to be removed.

    Build with :meth:`parse`.

    Args:
        text: The rule as written in the spec.
        expression: Its syntax tree, bound to the schema.
        columns: The columns it reads, in first-use order.
    """

    text: str
    expression: Node
    columns: tuple[str, ...]

    @classmethod
    def parse(cls, text: str, *, schema: RawSchema) -> Constraint:
        """Parse and type-check ``text`` against ``schema``.

        Raises:
            TypeError: ``text`` is not a string.
            SpecError: A syntax error or a check against the schema failed; the message names
                the rule, the problem and the position (with a caret).
        """
        if not isinstance(text, str):
            raise TypeError(f"constraint ({text!r}) must be a string")
        expression = _bind(_Parser(text).parse(), text=text, schema=schema)
        columns = tuple(dict.fromkeys(_columns_of(expression)))
        return cls(text=text, expression=expression, columns=columns)

    def matches(self, frame: pd.DataFrame, *, schema: RawSchema) -> np.ndarray:
        """Boolean mask (one entry per row) of the records matching the rule."""
        check_frame(frame, self.columns, schema, what=f"constraint {self.text!r}")
        return evaluate(self.expression, frame, schema)
