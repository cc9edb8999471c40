"""What every module of the CLI stands on and that imports nothing of it: the exit codes, the local
stack's directory, and :class:`CliError` (so the HTTP client and the commands' shared helpers need
not import each other)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
LOCAL_DIR = Path(".topogov/local")


class CliError(Exception):
    """A failure the command reports as one line (plus details) and an exit code."""

    def __init__(
        self,
        exit_code: int,
        message: str,
        details: dict[str, Any] | None = None,
        body: Any = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.message = message
        self.details = details or {}
        self.body = body  # the API's answer, as JSON, for --output json
        self.code = code
