"""pygls' protocol, made to answer every request, even one whose parameters cannot be read.

pygls reads a message's parameters while decoding its JSON; when they are invalid (a negative
position, a missing field) it logs the error and drops the message, so the client waits for
an answer forever. Here such a request gets a JSON-RPC "invalid params" error response.
"""

from __future__ import annotations

import logging
from typing import Any

from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.protocol import LanguageServerProtocol

logger = logging.getLogger(__name__)

#: What a message whose parameters could not be read decodes to; nothing handles it.
_UNREADABLE = object()


class TorchlintProtocol(LanguageServerProtocol):
    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            method = data.get("method")
            if "id" in data and method is not None:
                error = JsonRpcInvalidParams(f"invalid parameters for {method}: {_reason(exc)}")
                self._send_response(data["id"], error=error.to_response_error())
            else:
                logger.warning("ignored a %s notification with invalid parameters", method)
            return _UNREADABLE

    def handle_message(self, message: Any) -> None:
        if message is not _UNREADABLE:
            super().handle_message(message)


def _reason(exc: BaseException) -> str:
    """The first concrete validation failure behind `exc` (cattrs nests them in groups)."""
    current: BaseException = exc.__cause__ or exc
    while getattr(current, "exceptions", None):  # an exception group
        current = current.exceptions[0]  # type: ignore[attr-defined]
    return str(current)
