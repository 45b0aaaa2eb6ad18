"""The one exception type for bad configuration."""


class ConfigError(ValueError):
    """A config file, field or override is invalid; the message names key and value."""
