"""What a call into the candidate prints, logs and warns, carried back to the test process:
collected in the candidate process per request (``Capped`` streams, the log records of the
call, the warnings it issued), and replayed on the caller's side (``echo``) where pytest's
``capsys``, ``caplog``, ``pytest.warns`` and ``recwarn`` see them.

Stdlib-only: the jail runs it.
"""

from __future__ import annotations

import io
import logging
import sys
import warnings

MAX_OUTPUT = 1 << 20  # characters of printed output carried back per call
MAX_WARNINGS = 100    # warnings carried back per call
MAX_LOGS = 1000       # log records carried back per call
_REGISTRY: dict = {}  # the candidate module's warning registry ("default" shows once a place)


class Capped(io.TextIOBase):
    """A text stream that keeps the first ``MAX_OUTPUT`` characters written to it."""

    def __init__(self):
        self.parts: list[str] = []
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, text) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if self.size < MAX_OUTPUT:
            self.parts.append(text[: MAX_OUTPUT - self.size])
        self.size += len(text)
        return len(text)

    def value(self) -> str:
        return "".join(self.parts)

    def drain(self) -> str:
        """What was written since the last drain (still counted against the cap)."""
        text = self.value()
        self.parts = []
        return text


def text(obj: object) -> str:
    """``str(obj)``, short, whatever ``obj``'s ``__str__`` does."""
    try:
        return str(obj)[:2000]
    except BaseException:
        return f"<unprintable {type(obj).__name__}>"


def collect_warnings(codec, describe, caught) -> list:
    """The warnings caught during a call, as ``[category, message, filename, lineno]``."""
    sent = []
    for w in caught[:MAX_WARNINGS]:
        try:
            sent.append([codec.encode(w.category, describe), text(w.message),
                         str(w.filename), int(w.lineno)])
        except BaseException:
            continue
    return sent


def echo(codec, output, warned) -> None:
    """Replay a call's ``output`` (``[stdout, stderr]`` or ``[stdout, stderr, logs]``) and
    ``warned`` (see ``collect_warnings``) here; what is malformed is left out."""
    if type(output) is list and len(output) in (2, 3):
        for written, stream in zip(output, (sys.stdout, sys.stderr), strict=False):
            if type(written) is str and written:
                try:
                    stream.write(written)
                except Exception:
                    pass
        if len(output) == 3 and type(output[2]) is list:
            _log_again(output[2])
    if type(warned) is not list:
        return
    for entry in warned[:MAX_WARNINGS]:
        try:
            category, message, filename, lineno = entry
            category = codec.decode(category)
            if not (isinstance(category, type) and issubclass(category, Warning)):
                continue
            warnings.warn_explicit(str(message), category, str(filename), int(lineno),
                                   module="solution", registry=_REGISTRY)
        except (ValueError, TypeError):
            continue


def _log_again(records: list) -> None:
    """T: the candidate's log records of a call, handled again by the test's loggers (so
    ``caplog`` sees them), each where the test's logging configuration enables its level."""
    for entry in records[:MAX_LOGS]:
        if not (type(entry) is list and len(entry) == 6 and type(entry[0]) is str
                and type(entry[1]) is int and all(type(x) is str for x in entry[2:4])
                and type(entry[4]) is int and type(entry[5]) is str):
            continue
        name, level, message, path, line, func = entry
        logger = logging.getLogger(name)
        if logger.isEnabledFor(level):
            logger.handle(logging.LogRecord(name, level, path, line, message, None, None,
                                            func=func))
