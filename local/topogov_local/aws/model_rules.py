"""A request judged by the rules of botocore's service model, as an AWS service judges it before it
acts: required members, string and list lengths, number ranges, enum values and patterns — the
constraints botocore's own client-side validation mostly leaves to the service (it checks
required members, types and minimums, not maximums, enums or patterns).

Messages take the form AWS's JSON services answer with ``ValidationException``: "1 validation error
detected: Value 'a_b' at 'name' failed to satisfy constraint: Member must satisfy regular expression
pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}" ("N validation errors detected: ...; ..." for several),
the member path in lower camel case, a list member as ``<list>.<n>.member`` (1-based). This is the
form SageMaker's refusals print, as public reports quote them (e.g. data-dot-all/dataall#177,
aws-samples/sagemaker-ml-workflow-with-apache-airflow#3: "Value '...' at 'modelName' failed to
satisfy constraint: Member must have length less than or equal to 63"); the order of several errors
is the model's member order. Patterns are matched whole (the service anchors them; its messages
show the ``^``); ``\\p{L}``-style classes need the ``regex`` module.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import regex


@functools.cache
def service_model(service: str) -> Any:
    import botocore.session

    return botocore.session.get_session().get_service_model(service)


@functools.cache
def _compiled(pattern: str) -> Any:
    return regex.compile(pattern)


def _camel(name: str) -> str:
    return name[:1].lower() + name[1:]


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _constraint(shape: Any, value: Any) -> list[str]:
    """The constraints of ``shape`` that ``value`` (present, of the right JSON type) breaks."""
    meta, out = shape.metadata, []
    if shape.type_name in ("string", "list", "map"):
        size = len(value)
        if "min" in meta and size < meta["min"]:
            out.append(f"Member must have length greater than or equal to {meta['min']}")
        if "max" in meta and size > meta["max"]:
            out.append(f"Member must have length less than or equal to {meta['max']}")
    if shape.type_name in ("integer", "long", "float", "double"):
        if "min" in meta and value < meta["min"]:
            out.append(f"Member must have value greater than or equal to {meta['min']}")
        if "max" in meta and value > meta["max"]:
            out.append(f"Member must have value less than or equal to {meta['max']}")
    if shape.type_name == "string" and shape.enum and value not in shape.enum:
        out.append(f"Member must satisfy enum value set: [{', '.join(shape.enum)}]")
    pattern = meta.get("pattern")
    if shape.type_name == "string" and pattern and _compiled(pattern).fullmatch(value) is None:
        shown = pattern if pattern.startswith("^") else f"^{pattern}"
        out.append(f"Member must satisfy regular expression pattern: {shown}")
    return out


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "long": (int,),
    "float": (int, float),
    "double": (int, float),
    "boolean": (bool,),
    "structure": (dict,),
    "list": (list,),
    "map": (dict,),
    "timestamp": (int, float, str),
    "blob": (str,),
}


def _typed(value: Any) -> Any:
    """``value`` as ``Any`` again (an ``isinstance`` against a tuple of types narrows it to ``object``)."""
    return value


class WrongType(ValueError):
    """A member of the wrong JSON type: the JSON protocol answers SerializationException."""


def _walk(shape: Any, value: Any, path: str, errors: list[str]) -> None:
    kinds = _JSON_TYPES.get(shape.type_name, (object,))
    if not isinstance(value, kinds) or (isinstance(value, bool) and shape.type_name != "boolean"):
        raise WrongType(f"{path or 'the request'}: expected {shape.type_name}, got {type(value).__name__}")
    value = _typed(value)
    errors += [
        f"Value '{_shown(value)}' at '{path}' failed to satisfy constraint: {c}"
        for c in _constraint(shape, value)
    ]
    if shape.type_name == "structure":
        for name in shape.required_members:
            if value.get(name) is None:
                member = f"{path}.{_camel(name)}" if path else _camel(name)
                errors.append(
                    f"Value null at '{member}' failed to satisfy constraint: Member must not be null"
                )
        for name, member_shape in shape.members.items():
            if value.get(name) is not None:
                _walk(member_shape, value[name], f"{path}.{_camel(name)}" if path else _camel(name), errors)
    elif shape.type_name == "list":
        for i, item in enumerate(value, start=1):
            _walk(shape.member, item, f"{path}.{i}.member", errors)
    elif shape.type_name == "map":
        for key, item in value.items():
            _walk(shape.value, item, f"{path}.{key}", errors)


def request_errors(service: str, operation: str, params: dict[str, Any]) -> list[str]:
    """What the service's validation refuses in ``params`` (the request's JSON body), one message a
    constraint; raises :class:`WrongType` for a member of the wrong type."""
    errors: list[str] = []
    _walk(service_model(service).operation_model(operation).input_shape, params, "", errors)
    return errors


def validation_message(errors: list[str]) -> str:
    """``ValidationException``'s message for these errors."""
    count = len(errors)
    return f"{count} validation error{'s' if count > 1 else ''} detected: " + "; ".join(errors)
