"""Read YAML while remembering the line of every key, so errors can point at ``job.yaml:12``.

Hostile or careless YAML is refused before anything is built from it (``ConfigError`` with the
line): text over ``MAX_YAML_BYTES``, a document that would expand to more than
``MAX_YAML_NODES`` values through aliases (a "billion laughs" bomb), nesting deeper than
``MAX_DEPTH``, and a key given twice in one mapping (both lines named).

Example:
    >>> doc = read_yaml_text("a:\\n  b: [1, 2]\\n", source="x.yaml")
    >>> doc.data, doc.line_of(("a", "b", 1))
    ({'a': {'b': [1, 2]}}, 2)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rltune.sdk.errors import ConfigError


@dataclass
class YamlDocument:
    """Parsed YAML data plus the node tree used to find line numbers."""

    data: Any
    node: yaml.Node | None
    source: str | None

    def line_of(self, path: tuple[Any, ...]) -> int | None:
        """1-based line of the deepest node along ``path`` that exists in the file."""
        node = self.node
        if node is None:
            return None
        line = node.start_mark.line + 1
        for part in path:
            nxt = None
            if isinstance(node, yaml.MappingNode):
                for key_node, value_node in node.value:
                    if getattr(key_node, "value", None) == str(part):
                        nxt = value_node
                        line = key_node.start_mark.line + 1
                        break
            elif (
                isinstance(node, yaml.SequenceNode)
                and isinstance(part, int)
                and 0 <= part < len(node.value)
            ):
                nxt = node.value[part]
                line = nxt.start_mark.line + 1
            if nxt is None:
                # Keys added by normalisation (or unknown ones) stop here: the parent's line.
                break
            node = nxt
        return line


#: Largest YAML text accepted, bytes.
MAX_YAML_BYTES = 1_000_000
#: Most values a document may hold once its aliases are expanded.
MAX_YAML_NODES = 100_000
#: Deepest nesting of mappings and lists (YAML and JSON).
MAX_DEPTH = 64


# Flow brackets outside quoted strings and comments (the scanner is quadratic in flow depth, so
# deep ``[[[[…`` is refused before PyYAML sees it).
_FLOW = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\n]|\'\')*\'|(?:^|(?<=\s))#[^\n]*|[\[\]{}]')


def _check_flow_depth(text: str, source: str | None) -> None:
    depth = 0
    for m in _FLOW.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                line = text.count("\n", 0, m.start()) + 1
                raise ConfigError(f"the YAML is nested more than {MAX_DEPTH} levels deep",
                                  where=f"{source or '<yaml>'}:{line}",
                                  hint="flatten the structure")
        elif c in "]}":
            depth = max(0, depth - 1)


def nesting_depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """Depth of nested dicts/lists in parsed JSON/YAML (stops counting past ``limit``)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict)
                                                 else item))
    return deepest


def check_depth(value: Any, where: str) -> None:
    """``ConfigError`` when parsed JSON/YAML nests deeper than ``MAX_DEPTH``."""
    if nesting_depth(value) > MAX_DEPTH:
        raise ConfigError(f"the input is nested more than {MAX_DEPTH} levels deep",
                          where=where, hint="flatten the structure")


def _where(source: str | None, node: yaml.Node) -> str:
    return f"{source or '<yaml>'}:{node.start_mark.line + 1}"


def check_node_tree(root: yaml.Node, source: str | None) -> None:
    """Refuse alias bombs, deep nesting and duplicate keys without expanding anything."""
    sizes: dict[int, int] = {}  # id(node) -> values it expands to (aliases share nodes)
    # An explicit stack (no recursion): (node, depth, children done?)
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        if id(node) in sizes and not done:
            continue
        kids = _children(node)
        if not done:
            if depth > MAX_DEPTH:
                raise ConfigError(f"the YAML is nested more than {MAX_DEPTH} levels deep",
                                  where=_where(source, node), hint="flatten the structure")
            if isinstance(node, yaml.MappingNode):
                _check_duplicates(node, source)
            stack.append((node, depth, True))
            stack.extend((k, depth + 1, False) for k in kids if id(k) not in sizes)
            continue
        sizes[id(node)] = total = 1 + sum(sizes.get(id(k), 1) for k in kids)
        if total > MAX_YAML_NODES:
            raise ConfigError(
                f"the YAML expands to more than {MAX_YAML_NODES} values (aliases repeat "
                "anchored content)", where=_where(source, node),
                hint="write the values out or use fewer aliases; an alias bomb is refused")


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_duplicates(node: yaml.MappingNode, source: str | None) -> None:
    seen: dict[str, yaml.Node] = {}
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
            continue
        if key.value in seen:
            first = seen[key.value].start_mark.line + 1
            raise ConfigError(
                f"key {key.value!r} is given twice (lines {first} and "
                f"{key.start_mark.line + 1})", where=_where(source, key),
                hint="keep one of them; YAML would silently use the last")
        seen[key.value] = key


def read_yaml_text(text: str, *, source: str | None = None) -> YamlDocument:
    """Parse YAML text; a syntax error or an unsafe document is a ``ConfigError`` with its line."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_YAML_BYTES:
        raise ConfigError(f"the YAML is {size} bytes; the limit is {MAX_YAML_BYTES}",
                          where=source or "<yaml>", hint="a job config is a few kilobytes; "
                          "put data in datasets, not in the config")
    _check_flow_depth(text, source)
    loader = None
    try:
        loader = yaml.SafeLoader(text)  # a control character is refused here already
        node = loader.get_single_node()
        if node is not None:
            check_node_tree(node, source)
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source or '<yaml>'}:{mark.line + 1}" if mark else source
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(
            f"not valid YAML: {problem}", where=where,
            hint="check indentation and quoting near that line",
        ) from None
    except RecursionError:
        raise ConfigError(f"the YAML is nested more than {MAX_DEPTH} levels deep",
                          where=source or "<yaml>", hint="flatten the structure") from None
    finally:
        if loader is not None:
            loader.dispose()
    return YamlDocument(data=data, node=node, source=source)


def read_yaml_file(path: str | Path) -> YamlDocument:
    """Read a YAML file (a missing or unreadable file is a ``ConfigError``)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"config file not found: {p}", where=str(p), hint="check the path passed with -c"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file: {exc}", where=str(p),
                          hint="pass a readable UTF-8 YAML file") from None
    return read_yaml_text(text, source=str(p))


def dump_yaml(data: Any) -> str:
    """YAML text with keys in model order (not sorted) and block style."""
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)
