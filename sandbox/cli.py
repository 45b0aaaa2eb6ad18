"""Argument types the command lines of this project share (``python -m sandbox``,
``python -m problems``)."""

from __future__ import annotations

import argparse
import math


def positive_seconds(text: str) -> float:
    """An argparse ``type`` for a duration in seconds (a timeout): a finite number > 0; anything
    else is an ``ArgumentTypeError`` argparse shows with the option's name."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds > 0, got {text}")
    return value
