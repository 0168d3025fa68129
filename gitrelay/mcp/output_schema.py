"""The output schemas the MCP server publishes: pydantic's, made cheap to check.

An MCP client validates every result against the tool's output schema (the
SDK's client does, with ``jsonschema``), so the shape of that schema is paid
for on every call. :func:`lean_output_schema` keeps what the schema says and
changes how it says it. Pure: dictionaries in, dictionaries out.
"""

from __future__ import annotations

from typing import Any

# Keywords that only describe; an output schema keeps descriptions (agents read them) and
# drops what pydantic derives mechanically from the Python names and defaults.
_DROPPED_ANNOTATIONS = frozenset({"title", "default"})
# Bounds that restate what this server guarantees anyway: checked on input, not on output.
_OUTPUT_BOUNDS = frozenset({"minLength", "maxLength", "pattern", "minItems", "maxItems",
                            "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
# Keywords that only apply to instances of one JSON type: schemas of different types
# that use nothing else can be merged into one schema with a list of types.
_TYPED_KEYWORDS = frozenset({"properties", "required", "additionalProperties", "items"})
_LOCAL_DEFS = "#/$defs/"


def lean_output_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The output schema an MCP client validates every result against, made cheap to check.

    The same fields, types, required fields and closed objects as the schema
    pydantic generates, in the shape a JSON Schema validator walks fastest:
    references to ``$defs`` inlined, ``X | None`` as ``"type": [X, "null"]``
    instead of ``anyOf`` (one branch fewer for every optional field of every
    item), a tagged union as ``if``/``then`` on its tag instead of ``oneOf``
    (which checks the value against every variant), and no titles, defaults
    or length bounds (docs/tools.md, "Every tool returns structured output").
    """
    defs: dict[str, Any] = schema.get("$defs", {})
    lean: dict[str, Any] = _lean({k: v for k, v in schema.items() if k != "$defs"}, defs, ())
    return lean


def _lean(node: Any, defs: dict[str, Any], seen: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_lean(v, defs, seen) for v in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(_LOCAL_DEFS):
        name = ref[len(_LOCAL_DEFS):]
        if name in seen:
            raise ValueError(f"output model {name} refers to itself; it cannot be inlined")
        target = _lean(defs[name], defs, (*seen, name))
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return {**target, **_lean(rest, defs, seen)}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED_ANNOTATIONS or key in _OUTPUT_BOUNDS or key == "discriminator":
            continue
        if key == "properties":
            out[key] = {name: _lean(sub, defs, seen) for name, sub in value.items()}
        else:
            out[key] = _lean(value, defs, seen)
    if "anyOf" in out:
        out = _merge_types(out)
    if "oneOf" in out and isinstance(node.get("discriminator"), dict):
        out = _dispatch_on_tag(out, str(node["discriminator"]["propertyName"]))
    return out


def _merge_types(node: dict[str, Any]) -> dict[str, Any]:
    """``anyOf`` of schemas of different JSON types as one schema with a list of types."""
    branches: list[dict[str, Any]] = node["anyOf"]
    kinds = [b.get("type") for b in branches]
    if not all(isinstance(k, str) for k in kinds) or len(set(kinds)) != len(kinds) \
            or {"integer", "number"} <= set(kinds):
        return node
    fixed = [b for b in branches if "enum" in b or "const" in b]
    if fixed and any("enum" not in b and "const" not in b and b["type"] != "null"
                     for b in branches):
        return node  # an enum would also bind the branch that has none
    merged: dict[str, Any] = {}
    for branch in branches:
        rest = {k: v for k, v in branch.items()
                if k not in ("type", "enum", "const", "description")}
        if not set(rest) <= _TYPED_KEYWORDS or set(rest) & set(merged):
            return node
        merged.update(rest)
    out: dict[str, Any] = {"type": kinds, **merged,
                           **{k: v for k, v in node.items() if k != "anyOf"}}
    described = [b["description"] for b in branches if "description" in b]
    if "description" not in out and described:
        out["description"] = described[0]
    if fixed:
        out["enum"] = [v for b in branches
                       for v in b.get("enum", [b["const"]] if "const" in b else [None])]
    return out


def _dispatch_on_tag(node: dict[str, Any], tag: str) -> dict[str, Any]:
    """A tagged ``oneOf`` as: the tag is one of the variants', and each tag's variant applies."""
    variants: list[dict[str, Any]] = node["oneOf"]
    tags: list[Any] = []
    rules = []
    for variant in variants:
        prop = variant.get("properties", {}).get(tag, {})
        if "const" not in prop or tag not in variant.get("required", []):
            return node
        tags.append(prop["const"])
        rules.append({"if": {"properties": {tag: {"const": prop["const"]}}}, "then": variant})
    rest = {k: v for k, v in node.items() if k != "oneOf"}
    return {**rest, "type": "object", "required": [tag],
            "properties": {tag: {"enum": tags}}, "allOf": rules}


# What a tool's input schema says that the model needs no words for: the server checks
# every argument against the full models anyway and refuses a wrong one with its field and
# reason, and a description says in words the bounds that matter ("1-200").
_INPUT_CHECKS = frozenset({"minLength", "maxLength", "pattern", "minItems", "maxItems",
                           "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                           "additionalProperties"})


def lean_input_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's input schema as the model reads it on every turn: the arguments, their
    types, enums, defaults, descriptions and which are required; without what tells a
    model nothing it needs to call the tool right: the titles pydantic derives from the
    Python names (``"title": "Thread Id"``), a ``"default": null``, the ``null`` branch of
    an optional argument (it is left out when not given), the OpenAPI ``discriminator``,
    and the checks the server makes anyway (lengths, patterns, bounds, closed objects:
    :data:`_INPUT_CHECKS`). References to ``$defs`` are inlined."""
    defs: dict[str, Any] = schema.get("$defs", {})
    out: dict[str, Any] = _untitled({k: v for k, v in schema.items() if k != "$defs"}, defs)
    return out


def _untitled(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_untitled(v, defs) for v in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(_LOCAL_DEFS):
        node = {**defs[ref[len(_LOCAL_DEFS):]], **{k: v for k, v in node.items() if k != "$ref"}}
    branches = node.get("anyOf")
    if isinstance(branches, list) and len(branches) == 2 and {"type": "null"} in branches:
        # An optional argument: absent when not given, so the null branch says nothing.
        (kept,) = [b for b in branches if b != {"type": "null"}]
        node = {**{k: v for k, v in node.items() if k != "anyOf"}, **kept}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if (key == "title" and isinstance(value, str)) or key == "discriminator" \
                or (key == "default" and value is None) or key in _INPUT_CHECKS:
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _untitled(sub, defs) for name, sub in value.items()}
        else:
            out[key] = _untitled(value, defs)
    return out
