"""Structured JSON logs for the webhook server.

One JSON object per line on standard error: ``time``, ``level``, ``logger``, ``msg`` and the
fields a call passes as ``extra={"fields": {...}}``. Callers pass only identifying facts (webhook,
uid, kind, namespace, name, verdict, field paths, rule ids): never an admitted object, a patch or
a status message, so neither Secret data nor environment values can reach the log.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import sys
import traceback
from collections.abc import Mapping
from typing import Any, TextIO

#: Name of the package logger; every module logs below it.
LOGGER_NAME = "gpustack_webhook"

#: ``LogRecord`` attribute that carries the structured fields of one line.
FIELDS_ATTR = "fields"


class JSONFormatter(logging.Formatter):
    """Formats a record as one compact JSON object."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, FIELDS_ATTR, None)
        if isinstance(fields, Mapping):
            for key, value in fields.items():
                line.setdefault(str(key), value)
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, separators=(",", ":"), default=str, ensure_ascii=False)


def configure(level: str = "info", *, stream: TextIO | None = None) -> None:
    """Send every log record (ours, aiohttp's, the client's) as JSON lines to ``stream``."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JSONFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # The client library logs request bodies at debug level; keep it quiet whatever the level.
    logging.getLogger("kubernetes_asyncio").setLevel(logging.WARNING)


def frames(exc: BaseException, *, limit: int = 30) -> list[str]:
    """Where ``exc`` was raised, as ``file:line in function`` (innermost last), without its
    message: an exception raised while reading an object may quote the object (a validation
    error quotes the input value), and the log must not."""
    out = [
        f"{os.path.basename(frame.filename)}:{frame.lineno} in {frame.name}"
        for frame in traceback.extract_tb(exc.__traceback__)
    ]
    return out[-limit:]


def fields(**values: Any) -> dict[str, Any]:
    """The ``extra`` argument for a structured line: ``log.info("msg", extra=fields(a=1))``."""
    return {FIELDS_ATTR: values}
