"""The command line's exit codes (docs/contract/interfaces.md) and the error that means exit 2.

0 success or allowed; 1 a render error or a refusal; 2 bad usage, unreadable input, an unknown
kind, or no request object.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad usage or unreadable input: exit 2."""
