"""Loading YAML into pydantic models with errors that name the file and every field path at fault."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from pedl.errors import InvalidArgument

M = TypeVar("M", bound=BaseModel)


class StrictModel(BaseModel):
    """Base of every config model: unknown keys are errors, not silent defaults."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ConfigError(InvalidArgument):
    """A config that failed to parse or validate; `fields` lists each problem."""


class FieldProblems(ValueError):
    """Raised by a validator that finds several problems, each at its own field path (a full
    path from the top of the document), so each is reported as a separate entry."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{field}: {message}" for field, message in problems))


def field_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            # pydantic puts union/tag names in the location; keep only real keys
            out += ("." if out else "") + str(part)
    return out or "<root>"


# pydantic puts the tag of a discriminated union into error locations ("provider.aws.image_id");
# users wrote "provider.image_id", so the tag is dropped after these keys.
_UNION_TAGS = {"provider": {"aws", "local"}, "checkpoint_storage": {"shared_fs", "s3", "directory"}}


def _drop_union_tags(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    out: list[Any] = []
    for part in loc:
        if out and isinstance(out[-1], str) and part in _UNION_TAGS.get(out[-1], ()):
            continue
        out.append(part)
    return tuple(out)


def describe_validation_error(exc: ValidationError, source: str) -> ConfigError:
    problems = []
    for err in exc.errors(include_url=False):
        loc = _drop_union_tags(tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))))
        path = field_path(loc)
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, FieldProblems):
            problems.extend({"field": f, "message": m} for f, m in cause.problems)
            continue
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        problems.append({"field": path, "message": msg})
    lines = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
    return ConfigError(f"invalid {source}: {lines}", fields=problems)


DEFAULT_MAX_CONFIG_BYTES = 256 * 1024
DEFAULT_MAX_NESTING_DEPTH = 32


class YamlBounds(Protocol):
    """What parsing needs of master.yaml's `limits:` (security_config.LimitsConfig has both)."""

    max_config_bytes: int
    max_nesting_depth: int


class _DefaultBounds:
    max_config_bytes = DEFAULT_MAX_CONFIG_BYTES
    max_nesting_depth = DEFAULT_MAX_NESTING_DEPTH


class _TooDeep(Exception):
    def __init__(self, line: int) -> None:
        self.line = line


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that stops composing past `max_depth` nested collections, before the composer's
    recursion can exhaust the stack."""

    max_depth = 32

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def _nested(self, compose: Any, anchor: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > self.max_depth:
                raise _TooDeep(self.peek_event().start_mark.line + 1)
            return compose(anchor)
        finally:
            self._depth -= 1

    def compose_sequence_node(self, anchor: Any) -> Any:
        return self._nested(super().compose_sequence_node, anchor)

    def compose_mapping_node(self, anchor: Any) -> Any:
        return self._nested(super().compose_mapping_node, anchor)


def _expanded_measure(root: yaml.Node) -> tuple[int, int] | None:
    """(size in bytes, nesting depth) of the document once every alias is expanded, computed on the
    node graph, where an alias is the node it names: each node is measured once, so a billion-laughs
    bomb costs its text, not its expansion. None for a recursive alias (a node inside itself)."""
    done: dict[int, tuple[int, int]] = {}
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in done:
            continue
        if isinstance(node, yaml.ScalarNode):
            done[key] = (len(node.value) + 1, 0)  # +1: the separator a dump writes
            continue
        children = [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else node.value
        if children_done:
            measures = [done[id(c)] for c in children]
            done[key] = (2 + sum(m[0] for m in measures), 1 + max((m[1] for m in measures), default=0))
            open_.discard(key)
            continue
        if key in open_:  # reached again from inside its own subtree (LIFO: only its descendants ran)
            return None
        open_.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in done)
    return done[id(root)]


def _limit_error(source: str, message: str) -> ConfigError:
    return ConfigError(f"{source}: {message}", fields=[{"field": "<root>", "message": message}])


def parse_yaml_text(text: str, source: str, *, limits: YamlBounds | None = None) -> Any:
    """Parse YAML within `limits` (the master's, or the defaults): the text's size, its nesting
    depth and its size once anchors and aliases are expanded, all checked before anything is
    constructed from it."""
    limits = limits or _DefaultBounds()
    max_bytes, max_depth = limits.max_config_bytes, limits.max_nesting_depth
    # a text of more characters than the limit has more bytes too: not encoded to count them
    chars = len(text)
    size, unit = (chars, "characters") if chars > max_bytes else (len(text.encode("utf-8", "surrogatepass")), "bytes")
    if size > max_bytes:
        raise _limit_error(
            source, f"{size} {unit} is more than the limit of {max_bytes} bytes (limits.max_config_bytes)"
        )
    loader = None
    try:
        loader = _BoundedLoader(text)  # its reader refuses control characters (ReaderError) right here
        loader.max_depth = max_depth
        node = loader.get_single_node()
        if node is None:
            return None
        measure = _expanded_measure(node)
        if measure is None:
            raise _limit_error(source, "an alias refers to a node that contains it (recursive alias)")
        size, depth = measure
        if size > max_bytes:
            raise _limit_error(
                source,
                f"about {size} bytes once YAML aliases are expanded, more than the limit "
                f"of {max_bytes} (limits.max_config_bytes)",
            )
        if depth > max_depth:
            raise _limit_error(
                source,
                f"nested {depth} levels deep once YAML aliases are expanded, more than "
                f"the limit of {max_depth} (limits.max_nesting_depth)",
            )
        return loader.construct_document(node)
    except _TooDeep as exc:
        raise _limit_error(
            source, f"nested more than {max_depth} levels deep at line {exc.line} (limits.max_nesting_depth)"
        ) from None
    except RecursionError:  # a depth limit set above what the interpreter's stack allows
        raise _limit_error(source, "nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(
            f"malformed YAML in {source}{where}: {problem}",
            fields=[{"field": "<root>", "message": f"malformed YAML{where}"}],
        ) from None
    finally:
        if loader is not None:
            loader.dispose()


def validate_data(model: type[M], data: Any, source: str) -> M:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"invalid {source}: the top level must be a mapping, got {type(data).__name__}",
            fields=[{"field": "<root>", "message": "must be a mapping"}],
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise describe_validation_error(exc, source) from None


def load_yaml_file(model: type[M], path: str | Path) -> M:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    return validate_data(model, parse_yaml_text(text, str(path)), str(path))
