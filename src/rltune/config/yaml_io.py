"""Read YAML while remembering the line of every key, so errors can point at ``job.yaml:12``.

Example:
    >>> doc = read_yaml_text("a:\\n  b: [1, 2]\\n", source="x.yaml")
    >>> doc.data, doc.line_of(("a", "b", 1))
    ({'a': {'b': [1, 2]}}, 2)
"""

from __future__ import annotations

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


def read_yaml_text(text: str, *, source: str | None = None) -> YamlDocument:
    """Parse YAML text; a syntax error becomes a ``ConfigError`` with its line."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source or '<yaml>'}:{mark.line + 1}" if mark else source
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(
            f"not valid YAML: {problem}", where=where,
            hint="check indentation and quoting near that line",
        ) from None
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
