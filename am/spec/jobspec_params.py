"""OpenPAI's ``<% $parameters.x %>`` references in commands.

OpenPAI job files name values once under ``parameters:`` and use them in commands
as ``<% $parameters.batchsize %>``; secrets work the same way as
``<% $secrets.token %>``. We resolve parameters always (an undefined one is an
error at submission, not a literal string in a running command) and secrets only
when the caller hands them over: secrets from the file are never printed, so by
default a secret reference is kept verbatim. References to OpenPAI prerequisites
(``$data``, ``$script``, ``$output``) only mean something on an OpenPAI cluster
and are kept verbatim as well.

>>> substitute("train --bs=<% $parameters.bs %>", {"bs": 32})
('train --bs=32', [])
"""
from __future__ import annotations

import json
import re
from typing import Any, Mapping

#: ``<% $scope.dotted.name %>``, spaces inside the brackets optional.
REFERENCE = re.compile(r"<%\s*\$(?P<scope>[A-Za-z_]\w*)\.(?P<name>[A-Za-z0-9_.\-]+?)\s*%>")

RESOLVED_SCOPES = ("parameters", "secrets")


def format_value(value: Any) -> str:
    """A parameter value as OpenPAI (JavaScript) would print it in a command."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, (str, int, float)):
        return str(value)
    return json.dumps(value, sort_keys=True)


def _lookup(values: Mapping[str, Any], dotted: str) -> tuple[bool, Any]:
    """Walk ``a.b.c`` into nested mappings; (found, value)."""
    current: Any = values
    for part in dotted.split("."):
        if not isinstance(current, Mapping) or part not in current:
            return False, None
        current = current[part]
    return True, current


def substitute(text: str, parameters: Mapping[str, Any],
               secrets: Mapping[str, Any] | None = None) -> tuple[str, list[str]]:
    """Replace parameter (and, when given, secret) references in ``text``.

    Returns the new text and the references that could not be resolved, as
    ``"$parameters.x"`` strings (an unresolved reference stays in the text). A
    secret reference with ``secrets=None`` is kept on purpose and not reported."""
    missing: list[str] = []

    def replace(match: re.Match[str]) -> str:
        scope, name = match.group("scope"), match.group("name")
        if scope == "secrets" and secrets is None:
            return match.group(0)
        if scope not in RESOLVED_SCOPES:
            return match.group(0)
        found, value = _lookup(parameters if scope == "parameters" else secrets or {}, name)
        if not found:
            missing.append(f"${scope}.{name}")
            return match.group(0)
        return format_value(value)

    return REFERENCE.sub(replace, text), missing


def references(text: str) -> list[str]:
    """Every ``$scope.name`` referenced in ``text``, in order."""
    return [f"${m.group('scope')}.{m.group('name')}" for m in REFERENCE.finditer(text)]
