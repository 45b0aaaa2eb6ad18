"""The one exception type for bad configuration."""


class ConfigError(ValueError):
    """A config file, field or override is invalid; the message names key and value."""


def check(ok: bool, key: str, value: object, why: str) -> None:
    """Raise ``ConfigError`` naming ``key`` and ``value`` and why, unless ``ok``."""
    if not ok:
        raise ConfigError(f"{key}={value!r}: {why}")
