"""The one YAML loader behind every gangmaster reader (used through ``conf.fields``).

It keeps ``yaml.safe_load``'s semantics (the same types, tags, merge keys and
anchors) and refuses, with the line, what ``safe_load`` silently accepts or dies on:

* a key written twice in one mapping: YAML says keys are unique, PyYAML keeps the
  last one, so a typo'd second ``instances:`` silently wins. Both lines are named;
* collections nested deeper than ``MAX_YAML_DEPTH``: PyYAML's composer recurses
  (``RecursionError``) and libyaml's crashes the process (newer libyaml refuses past
  its own limit, which is reported the same way);
* more than ``MAX_YAML_ALIASES`` aliases, a document that expands past
  ``MAX_YAML_NODES`` nodes through aliases ("billion laughs"), and an alias inside
  its own anchor (a structure that contains itself, which no reader can walk);
* a value its constructor cannot build (``2001-13-01`` as a timestamp, an integer of
  more digits than Python converts) is a YAML error with its line, not a ValueError.

Events come from libyaml when PyYAML was built with it (:class:`CStrictLoader`, about
three times faster), else from PyYAML's Python parser (:class:`PythonStrictLoader`);
nodes are always built by PyYAML's Python composer, so the checks run while the
document is composed and nothing past a limit is ever built (libyaml's own composer
would recurse, and crash, before any check could run).
"""
from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.events import AliasEvent, MappingStartEvent, SequenceStartEvent
from yaml.nodes import ScalarNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from .limits import MAX_YAML_ALIASES, MAX_YAML_DEPTH, MAX_YAML_NODES

try:    # libyaml's event parser, when PyYAML was built with it
    from yaml._yaml import CParser
except ImportError:     # pragma: no cover - depends on how PyYAML was built
    CParser = None

_MERGE_TAG = "tag:yaml.org,2002:merge"


class YAMLRefused(yaml.MarkedYAMLError):
    """Well-formed YAML that gangmaster refuses; ``expected`` says what it takes instead."""

    def __init__(self, mark: yaml.Mark, expected: str):
        super().__init__(problem=expected, problem_mark=mark)
        self.expected = expected


class _StrictLoading(Composer, SafeConstructor, Resolver):
    """``yaml.SafeLoader`` with the refusals listed in the module docstring, over any
    source of parser events (:class:`PythonStrictLoader`, :class:`CStrictLoader`)."""

    def __init__(self, text: str):
        self._start_events(text)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self._depth = 0             # collections open around the node being composed
        self._nodes = 0             # nodes so far, every alias counted at its full size
        self._aliases = 0
        self._open_anchors: set[str] = set()
        self._anchor_sizes: dict[str, int] = {}

    def _start_events(self, text: str) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------ composing
    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, AliasEvent):
            self._count_alias(event)
            return super().compose_node(parent, index)
        collection = isinstance(event, (SequenceStartEvent, MappingStartEvent))
        if collection and self._depth >= MAX_YAML_DEPTH:
            raise _too_deep(event.start_mark)
        before = self._nodes
        self._count(1, event)
        anchor = event.anchor
        if anchor is not None:
            self._open_anchors.add(anchor)
        self._depth += collection
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= collection
        if anchor is not None:
            self._open_anchors.discard(anchor)
            self._anchor_sizes[anchor] = self._nodes - before
        return node

    def compose_mapping_node(self, anchor: Any) -> Any:
        node = super().compose_mapping_node(anchor)
        _refuse_duplicate_keys(node)
        return node

    def _count_alias(self, event: AliasEvent) -> None:
        self._aliases += 1
        if self._aliases > MAX_YAML_ALIASES:
            raise YAMLRefused(event.start_mark, f"at most {MAX_YAML_ALIASES} aliases in a document "
                                                "(MAX_YAML_ALIASES in conf/limits.py)")
        if event.anchor in self._open_anchors:
            raise YAMLRefused(event.start_mark, f"no alias inside its own anchor (*{event.anchor} "
                                                f"is inside &{event.anchor}: a structure that contains itself)")
        self._count(self._anchor_sizes.get(event.anchor, 1), event)

    def _count(self, nodes: int, event: Any) -> None:
        self._nodes += nodes
        if self._nodes > MAX_YAML_NODES:
            raise YAMLRefused(event.start_mark, f"a document of at most {MAX_YAML_NODES:,} values with "
                                                "its aliases expanded (MAX_YAML_NODES in conf/limits.py)")

    # ------------------------------------------------------------ constructing
    def construct_object(self, node: Any, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as exc:
            what = f"{_clip(node.value)!r}" if isinstance(node, ScalarNode) else "this value"
            raise ConstructorError(None, None, f"cannot read {what} as {node.tag.rsplit(':', 1)[-1]} "
                                               f"({exc})", node.start_mark) from None


def _too_deep(mark: yaml.Mark) -> YAMLRefused:
    return YAMLRefused(mark, f"at most {MAX_YAML_DEPTH} levels of nested lists and mappings "
                             "(MAX_YAML_DEPTH in conf/limits.py)")


def _refuse_duplicate_keys(node: Any) -> None:
    """A scalar key written the same way twice in one mapping (merge keys aside)."""
    seen: dict[tuple[str, str], Any] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, ScalarNode) or key_node.tag == _MERGE_TAG:
            continue
        first = seen.setdefault((key_node.tag, key_node.value), key_node)
        if first is not key_node:
            raise YAMLRefused(key_node.start_mark,
                              f'each key once in a mapping; "{_clip(key_node.value)}" is also on '
                              f"line {first.start_mark.line + 1}")


def _clip(text: str, keep: int = 60) -> str:
    return text if len(text) <= keep else f"{text[:keep]}... ({len(text):,} characters)"


class PythonStrictLoader(_StrictLoading, Reader, Scanner, Parser):
    """Events from PyYAML's pure-Python parser."""

    def _start_events(self, text: str) -> None:
        Reader.__init__(self, text)
        Scanner.__init__(self)
        Parser.__init__(self)


if CParser is not None:
    class CStrictLoader(_StrictLoading, CParser):
        """Events from libyaml (a 2 MB file parses about three times faster)."""

        def _start_events(self, text: str) -> None:
            CParser.__init__(self, text)

    StrictLoader: type[_StrictLoading] = CStrictLoader
else:   # pragma: no cover - depends on how PyYAML was built
    StrictLoader = PythonStrictLoader


def load(text: str, loader: type[_StrictLoading] | None = None) -> Any:
    """``yaml.safe_load(text)`` with the refusals above (``loader``: :data:`StrictLoader`)."""
    instance = (loader or StrictLoader)(text)
    try:
        return instance.get_single_data()
    except yaml.MarkedYAMLError as exc:
        # Newer libyaml (PyYAML 6.0.4's wheels) caps nesting itself, in its scanner, which
        # reads far ahead of the composer's own check in a run of opening brackets: the
        # same refusal, in the same words.
        if "maximum nesting depth" in (exc.problem or "") and exc.problem_mark is not None:
            raise _too_deep(exc.problem_mark) from None
        raise
    finally:
        instance.dispose()
