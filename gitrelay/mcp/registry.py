"""What the MCP server offers, as registered by :mod:`gitrelay.mcp.tools`,
:mod:`gitrelay.mcp.prompts` and :mod:`gitrelay.mcp.resources`: each tool with the
pydantic model its arguments are checked against and the schemas it publishes, each
prompt with its arguments, each resource with its URI or URI template.

A tool is a plain function whose parameters are its arguments (``Annotated`` with a
pydantic ``Field`` for the description) plus one parameter annotated
:class:`~gitrelay.mcp.state.ServerState`, through which it reaches the session; its
docstring is its description. :meth:`Registry.call_arguments` turns a call's JSON
arguments into that function's keyword arguments, or refuses them with every problem
named (:class:`InvalidArguments`).
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, create_model
from pydantic.fields import FieldInfo

from gitrelay.mcp.output_schema import lean_input_schema, lean_output_schema
from gitrelay.mcp.state import ServerState

__all__ = ["InvalidArguments", "PromptEntry", "Registry", "ResourceEntry", "ToolEntry",
           "ToolHints", "validation_problems"]


@dataclass(frozen=True)
class ToolHints:
    """What a tool does, for a host deciding whether to ask its person first."""

    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool

    def wire(self) -> dict[str, bool]:
        return {"destructiveHint": self.destructive, "idempotentHint": self.idempotent,
                "openWorldHint": self.open_world, "readOnlyHint": self.read_only}


class InvalidArguments(Exception):
    """A call's arguments, refused: ``problems`` as ``where: what`` lines."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class _Arguments(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)


@dataclass
class ToolEntry:
    name: str
    description: str
    fn: Callable[..., Any]
    hints: ToolHints
    arguments: type[BaseModel]
    state_param: str | None
    output: type[BaseModel] | None
    input_schema: dict[str, Any] = field(init=False)
    lean_input: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.input_schema = self.arguments.model_json_schema(by_alias=True)
        self.lean_input = lean_input_schema(self.input_schema)

    @functools.cached_property
    def output_schema(self) -> dict[str, Any] | None:
        """The output schema a ``--structured`` server publishes: built on the first
        tools/list that asks, not at start-up."""
        if self.output is None:
            return None
        return lean_output_schema(TypeAdapter(self.output).json_schema())

    def wire(self, *, structured: bool) -> dict[str, Any]:
        """The tool as tools/list sends it."""
        out: dict[str, Any] = {"annotations": self.hints.wire(),
                               "description": self.description,
                               "inputSchema": self.lean_input, "name": self.name}
        schema = self.output_schema if structured else None
        if schema is not None:
            out["outputSchema"] = schema
        return out


@dataclass(frozen=True)
class PromptEntry:
    name: str
    title: str
    description: str
    fn: Callable[..., str]
    arguments: tuple[tuple[str, str | None, bool], ...]  # name, description, required

    def wire(self) -> dict[str, Any]:
        return {"arguments": [{"description": d, "name": n, "required": r}
                              for n, d, r in self.arguments],
                "description": self.description, "name": self.name, "title": self.title}


@dataclass(frozen=True)
class ResourceEntry:
    uri: str
    name: str
    mime_type: str
    description: str
    read: Callable[..., str]

    @property
    def templated(self) -> bool:
        return "{" in self.uri

    def match(self, uri: str) -> dict[str, str] | None:
        """The template's parameters in ``uri``, or None when it is not this resource's."""
        if not self.templated:
            return {} if uri == self.uri else None
        pattern = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(self.uri))
        found = re.fullmatch(pattern, uri)
        return found.groupdict() if found else None

    def wire(self) -> dict[str, Any]:
        key = "uriTemplate" if self.templated else "uri"
        return {"description": self.description, "mimeType": self.mime_type,
                "name": self.name, key: self.uri}


def _description(fn: Callable[..., Any]) -> str:
    return " ".join(inspect.cleandoc(fn.__doc__ or "").split())


def _parameters(fn: Callable[..., Any]) -> tuple[dict[str, Any], str | None]:
    """``fn``'s arguments as pydantic fields, and the name of its state parameter."""
    hints = typing.get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    state_param = None
    for name, param in inspect.signature(fn).parameters.items():
        annotation = hints.get(name, Any)
        if annotation is ServerState:
            state_param = name
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[name] = (annotation, default)
    return fields, state_param


def _returned_model(fn: Callable[..., Any]) -> type[BaseModel] | None:
    declared = typing.get_type_hints(fn, include_extras=True).get("return")
    if typing.get_origin(declared) is Annotated:  # Annotated[Answer, Model]
        declared = typing.get_args(declared)[1]
    return declared if isinstance(declared, type) and issubclass(declared, BaseModel) else None


def _parse_json_strings(model: type[BaseModel], arguments: dict[str, Any]) -> dict[str, Any]:
    """Arguments some hosts send as JSON inside a string (a list as ``'["a"]'``) parsed,
    for every argument that is not a plain string; scalars stay as they came."""
    out = dict(arguments)
    for key, value in arguments.items():
        info = model.model_fields.get(key)
        if info is None or not isinstance(value, str) or info.annotation is str:
            continue
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            continue
        if not isinstance(parsed, str | int | float):
            out[key] = parsed
    return out


def validation_problems(exc: ValidationError) -> list[str]:
    """A validation error's problems as ``where: what`` (:class:`InvalidArguments`)."""
    return [f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
            for e in exc.errors(include_url=False)]


def _lenient_problem(schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """What lax validation would let through: an argument the tool does not have (a
    misspelt ``reason`` would be dropped and the write done without it) and true/false
    for a number (which would count as 1 or 0)."""
    props: dict[str, Any] = schema.get("properties", {})
    unknown = sorted(set(arguments) - set(props))
    if unknown:
        return (f"{', '.join(unknown)}: not an argument of this tool (its arguments are "
                f"{', '.join(props) or 'none'})")
    for key, value in arguments.items():
        if not isinstance(value, bool):
            continue
        prop = props[key]
        types = {prop.get("type"), *(alt.get("type") for alt in prop.get("anyOf", []))}
        if "boolean" not in types and types & {"integer", "number"}:
            return f"{key}: {json.dumps(value)} is not a number"
    return None


class Registry:
    """The tools, prompts and resources one server offers, in the order registered."""

    def __init__(self) -> None:
        self.tools: dict[str, ToolEntry] = {}
        self.prompts: dict[str, PromptEntry] = {}
        self.resources: list[ResourceEntry] = []

    def tool(self, hints: ToolHints) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Registers a tool body (see the module's docstring)."""
        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            fields, state_param = _parameters(fn)
            model = create_model(f"{fn.__name__}Arguments", __base__=_Arguments, **fields)
            self.tools[fn.__name__] = ToolEntry(
                name=fn.__name__, description=_description(fn), fn=fn, hints=hints,
                arguments=model, state_param=state_param, output=_returned_model(fn))
            return fn
        return register

    def prompt(self, *, name: str, title: str, description: str
               ) -> Callable[[Callable[..., str]], Callable[..., str]]:
        """Registers a prompt; its parameters (``Annotated`` with a ``Field`` description)
        are its arguments, required when they have no default."""
        def register(fn: Callable[..., str]) -> Callable[..., str]:
            hints = typing.get_type_hints(fn, include_extras=True)
            args = []
            for pname, param in inspect.signature(fn).parameters.items():
                required = param.default is inspect.Parameter.empty
                info = FieldInfo.from_annotated_attribute(
                    hints.get(pname, Any), None if required else param.default)
                args.append((pname, info.description, required))
            self.prompts[name] = PromptEntry(name, title, description, fn, tuple(args))
            return fn
        return register

    def resource(self, uri: str, *, name: str, mime_type: str, description: str
                 ) -> Callable[[Callable[..., str]], Callable[..., str]]:
        """Registers a resource: a function of the session's state and, for a URI with
        ``{param}`` (a template), of each parameter."""
        def register(fn: Callable[..., str]) -> Callable[..., str]:
            self.resources.append(ResourceEntry(uri, name, mime_type, description, fn))
            return fn
        return register

    def call_arguments(self, tool: ToolEntry, arguments: dict[str, Any],
                       state: ServerState | None) -> dict[str, Any]:
        """``tool``'s keyword arguments for a call with these JSON ``arguments``; raises
        :class:`InvalidArguments` naming every problem, before anything runs."""
        problem = _lenient_problem(tool.input_schema, arguments)
        if problem:
            raise InvalidArguments([problem])
        try:
            checked = tool.arguments.model_validate(_parse_json_strings(tool.arguments,
                                                                         arguments))
        except ValidationError as exc:
            raise InvalidArguments(validation_problems(exc)) from None
        kwargs = {key: getattr(checked, key) for key in type(checked).model_fields}
        if tool.state_param is not None:
            kwargs[tool.state_param] = state
        return kwargs
