"""Conversion of ``MESSAGES_SNAPSHOT`` wire messages to UIMessages (spec §9b),
after ``aguiSnapshotMessageToUIMessage`` and ``modelMessageToUIMessage``.

Messages are plain dicts here (``{..., "parts": [...]}``). Where the
reference would throw (a message that is not an object, parts that are not
an array, a tool call without ``function``) ``Abort`` is raised and the
snapshot handler leaves the message list as it was.
"""

from __future__ import annotations

import contextlib
from typing import Any

from agent_replay.projector.jsvalues import (
    UNDEF,
    JSONParseError,
    get,
    parse_date,
    parse_json,
    tanstack_bag,
    to_string,
    truthy,
)
from agent_replay.projector.processor import StreamState

Msg = dict[str, Any]


class Abort(Exception):
    """The reference would throw here: leave the message list as it is."""


def _nonempty(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _text_of(content: Any) -> Any:
    """``getTextContent``."""
    if content is None or content is UNDEF:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("content", "") if isinstance(p.get("content"), str) else ""
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    raise Abort


def _is_ui_resource(value: Any) -> bool:
    if not isinstance(value, dict) or value.get("type") != "ui-resource":
        return False
    resource = value.get("resource")
    return (
        isinstance(value.get("toolCallId"), str)
        and isinstance(value.get("toolName"), str)
        and isinstance(resource, dict)
        and isinstance(resource.get("uri"), str)
        and isinstance(resource.get("mimeType"), str)
    )


def _append_ui_resources(ui: Msg, resources: Any) -> Msg:
    if not isinstance(resources, list):
        return ui
    fresh = [r for r in resources if _is_ui_resource(r)]
    seen = {
        (p["toolCallId"], p["toolName"], p["resource"]["uri"])
        for p in ui["parts"]
        if _is_ui_resource(p)
    }
    extra = [r for r in fresh if (r["toolCallId"], r["toolName"], r["resource"]["uri"]) not in seen]
    return {**ui, "parts": ui["parts"] + extra} if extra else ui


def _structured(value: Any) -> Msg | None:
    """``snapshotStructuredOutput``."""
    if not isinstance(value, dict) or value.get("status") not in ("streaming", "complete", "error"):
        return None
    if not isinstance(value.get("raw"), str):
        return None
    part: Msg = {"type": "structured-output", "status": value["status"], "raw": value["raw"]}
    for key in ("partial", "data"):
        if key in value:
            part[key] = value[key]
    if truthy(value.get("reasoning")):
        part["reasoning"] = value["reasoning"]
    if "errorMessage" in value:
        part["errorMessage"] = value["errorMessage"]
    return part


def _from_model(model: Msg, ident: Any, st: StreamState) -> Msg:
    """``modelMessageToUIMessage`` for the assistant and tool shapes used here."""
    parts: list[Any] = []
    role = model["role"]
    content = model.get("content", UNDEF)
    created = parse_date(model.get("createdAt"))
    structured = model.get("structuredOutput")
    if role == "assistant" and structured is not None:
        if isinstance(content, str) and content and content != structured["raw"]:
            suffix = structured["raw"]
            text = content[: -len(suffix)] if suffix and content.endswith(suffix) else content
            if text:
                parts.append({"type": "text", "content": text})
        parts.append(structured)
    elif role == "tool" and truthy(model.get("toolCallId")):
        result: Msg = {
            "type": "tool-result",
            "toolCallId": model["toolCallId"],
            "content": content if isinstance(content, list) else _text_of(content),
            "state": "complete" if "error" not in model else "error",
        }
        for key in ("id", "name", "metadata"):
            if key in model:
                result[key] = model[key]
        if created is not None:
            result["createdAt"] = created
        if "error" in model:
            result["error"] = model["error"]
        parts.append(result)
    elif isinstance(content, list):
        parts.extend(content)
    else:
        text = _text_of(content)
        if text:
            parts.append({"type": "text", "content": text})
    for call in model.get("toolCalls") or []:
        function = get(call, "function")
        if not isinstance(function, dict):
            raise Abort
        arguments = function.get("arguments", UNDEF)
        part: Msg = {
            "type": "tool-call",
            "id": get(call, "id"),
            "name": function.get("name", UNDEF),
        }
        part.update(arguments=arguments, state="input-complete")
        with contextlib.suppress(JSONParseError):
            part["input"] = parse_json(arguments)
        if get(call, "metadata") is not UNDEF:
            part["metadata"] = call["metadata"]
        parts.append(part)
    ui: Msg = {
        "id": ident if truthy(ident) else st.generate_id(),
        "role": "assistant" if role == "tool" else role,
    }
    ui["parts"] = parts
    if "name" in model:
        ui["name"] = model["name"]
    if created is not None:
        ui["createdAt"] = created
    if "metadata" in model:
        ui["metadata"] = model["metadata"]
    return _append_ui_resources(ui, get(tanstack_bag(model), "uiResources"))


def _user_parts(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "content": content}] if content else []
    if not isinstance(content, list):
        raise Abort
    parts: list[Any] = []
    for part in content:
        kind = get(part, "type")
        if kind == "text":
            parts.append({"type": "text", "content": get(part, "text")})
        elif kind != "binary":
            parts.append(part)
    return parts


def _restore_tool_result(message: Msg) -> Msg:
    """``restoreToolResultOwnership``: ``bag.toolResult`` overrides id/createdAt/content."""
    owned = get(tanstack_bag(message), "toolResult")
    if not isinstance(owned, dict):
        return message
    content = owned.get("content", UNDEF)
    if content is not UNDEF and not _is_content_parts(content):
        return message
    out = dict(message)
    for key in ("id", "createdAt"):
        if key not in owned:
            out.pop(key, None)
    if isinstance(owned.get("id"), str):
        out["id"] = owned["id"]
    if isinstance(owned.get("createdAt"), str) and parse_date(owned["createdAt"]) is not None:
        out["createdAt"] = owned["createdAt"]
    if _is_content_parts(content):
        out["content"] = content
    metadata = message.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("tanstack"), dict):
        rest = {k: v for k, v in metadata["tanstack"].items() if k != "toolResult"}
        meta = {k: v for k, v in metadata.items() if k != "tanstack"}
        if rest:
            meta["tanstack"] = rest
        if meta:
            out["metadata"] = meta
        else:
            out.pop("metadata", None)
    return out


def _is_content_parts(value: Any) -> bool:
    if not isinstance(value, list) or not value:
        return False
    for part in value:
        kind = get(part, "type")
        if kind == "text":
            if not isinstance(part.get("content"), str):
                return False
        elif kind in ("image", "audio", "video", "document"):
            source = part.get("source")
            if not isinstance(source, dict) or not isinstance(source.get("value"), str):
                return False
            if not (
                source.get("type") == "url"
                or (source.get("type") == "data" and isinstance(source.get("mimeType"), str))
            ):
                return False
        else:
            return False
    return True


def convert(message: Any, st: StreamState) -> Msg:
    """``aguiSnapshotMessageToUIMessage``."""
    if not isinstance(message, dict):
        raise Abort
    ident = message.get("id", UNDEF)
    if "parts" in message:
        return _apply_metadata(
            message, {**message, "id": ident if truthy(ident) else st.generate_id()}
        )
    if not truthy(ident):
        ident = st.generate_id()
    role = message.get("role")
    content = message.get("content", UNDEF)
    if role == "user":
        return _apply_metadata(
            message, {"id": ident, "role": "user", "parts": _user_parts(content)}
        )
    if role == "assistant":
        bag = tanstack_bag(message)
        call_meta = get(bag, "toolCallMetadata")
        model: Msg = {"role": "assistant", "content": None if content is UNDEF else content}
        if "name" in message:
            model["name"] = message["name"]
        calls = message.get("toolCalls", UNDEF)
        if truthy(calls):
            if not isinstance(calls, list):
                raise Abort
            model["toolCalls"] = [_with_call_metadata(call, call_meta) for call in calls]
        model["structuredOutput"] = _structured(get(bag, "structuredOutput"))
        return _apply_metadata(message, _from_model(model, ident, st))
    if role == "tool":
        message = _restore_tool_result(message)
        created = parse_date(message.get("createdAt")) or parse_date(
            get(tanstack_bag(message), "createdAt")
        )
        model = {
            "role": "tool",
            "content": message.get("content", UNDEF),
            "toolCallId": message.get("toolCallId"),
        }
        for key in ("name", "id"):
            if isinstance(message.get(key), str):
                model[key] = message[key]
        if message.get("metadata") is not None and "metadata" in message:
            model["metadata"] = message["metadata"]
        if created is not None:
            model["createdAt"] = created
        if "error" in message:
            model["error"] = message["error"]
        return _apply_metadata(message, _from_model(model, ident, st))
    if role in ("system", "developer"):
        parts = [{"type": "text", "content": content}] if truthy(content) else []
        return _apply_metadata(message, {"id": ident, "role": "system", "parts": parts})
    if role == "reasoning":
        signature = (
            _nonempty(message.get("encryptedValue")) if "encryptedValue" in message else None
        )
        signature = signature or _nonempty(get(tanstack_bag(message), "signature"))
        text = content if isinstance(content, str) else ""
        thinking: Msg = {"type": "thinking", "content": text}
        if signature is not None:
            thinking["signature"] = signature
        parts = [thinking] if text or signature is not None else []
        return _apply_metadata(message, {"id": ident, "role": "assistant", "parts": parts})
    return _apply_metadata(message, {"id": ident, "role": "assistant", "parts": []})


def _with_call_metadata(call: Any, call_meta: Any) -> Any:
    meta = (
        call_meta.get(to_string(get(call, "id")), UNDEF) if isinstance(call_meta, dict) else UNDEF
    )
    return {**call, "metadata": meta} if meta is not UNDEF and isinstance(call, dict) else call


def _apply_metadata(source: Msg, ui: Msg) -> Msg:
    """``applySnapshotMetadata``: part dates, name, metadata, createdAt, ui resources."""
    parts = ui.get("parts")
    if not isinstance(parts, list):
        raise Abort
    ui = {**ui, "parts": [_normalize_part(p) for p in parts]}
    if isinstance(source.get("name"), str):
        ui["name"] = source["name"]
    metadata = source.get("metadata") if isinstance(source.get("metadata"), dict) else UNDEF
    if metadata is not UNDEF:
        ui["metadata"] = metadata
    created = parse_date(ui.get("createdAt"))
    if created is None and metadata is not UNDEF:
        created = parse_date(get(tanstack_bag(metadata), "createdAt"))
    if created is not None:
        ui["createdAt"] = created
    else:
        ui.pop("createdAt", None)
    return _append_ui_resources(ui, get(tanstack_bag(metadata), "uiResources"))


def _normalize_part(part: Any) -> Any:
    if part is None:
        raise Abort
    if not isinstance(part, dict) or part.get("type") != "tool-result":
        return part
    created = parse_date(part.get("createdAt"))
    rest = {k: v for k, v in part.items() if k != "createdAt"}
    if created is not None:
        rest["createdAt"] = created
    return rest
