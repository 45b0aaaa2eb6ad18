"""Load ``TrainConfig`` from YAML files plus ``--set key=value`` overrides.

Values are checked against the dataclass annotations (``int``, ``float``, ``bool``, ``str``,
``tuple[...]``, ``dict[str, float]``, ``X | None``) before the dataclasses' own validation runs,
and every error names the dotted key and the bad value.

    >>> cfg = load_config(None, ["ppo.learning_rate=0.001", "schedule.stages=[1,2]"])
    >>> cfg.ppo.learning_rate, cfg.schedule.stages
    (0.001, (1, 2))
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from configs.errors import ConfigError
from configs.schema import TrainConfig

_NONE = type(None)


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Return ``value`` converted to annotation ``tp`` or raise a ConfigError naming ``key``."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and _NONE in args:
            return None
        errors = []
        for arg in args:
            if arg is _NONE:
                continue
            try:
                return _coerce(value, arg, key)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if errors else f"{key}={value!r}: must not be null")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{key}={value!r}: expected a mapping of {tp.__name__} fields")
        return _build(tp, value, key)
    if origin is tuple:
        if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
            raise ConfigError(f"{key}={value!r}: expected a list")
        (item_tp, _ellipsis) = typing.get_args(tp)
        return tuple(_coerce(v, item_tp, f"{key}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}={value!r}: expected a mapping")
        k_tp, v_tp = typing.get_args(tp)
        return {_coerce(_json_key(k, k_tp), k_tp, key): _coerce(v, v_tp, f"{key}.{k}")
                for k, v in value.items()}
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key}={value!r}: expected true or false")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"{key}={value!r}: expected an integer")
    if tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads "1e-5" as a string
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(f"{key}={value!r}: expected a number")
    if tp is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{key}={value!r}: expected a string")
    raise TypeError(f"unsupported annotation {tp!r} for {key}")  # a bug in schema.py


def _json_key(key: object, tp: object) -> object:
    """An integer key as JSON writes every key, a string (a run's stored ``config.json``):
    read back as the integer it was."""
    if tp is int and isinstance(key, str) and key.strip().lstrip("-").isdigit():
        return int(key)
    return key


def _build(cls: type, data: dict[str, Any], prefix: str) -> Any:
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        where = f"{prefix}." if prefix else ""
        near = difflib.get_close_matches(str(unknown[0]), sorted(names), n=1)
        hint = f" (did you mean {where}{near[0]}?)" if near else ""
        raise ConfigError(f"unknown key {where}{unknown[0]}{hint}; {cls.__name__} has: "
                          f"{', '.join(sorted(names))}")
    kwargs = {name: _coerce(value, hints[name], f"{prefix}.{name}" if prefix else name)
              for name, value in data.items()}
    return cls(**kwargs)


def _deep_merge(base: dict[str, Any], extra: dict[str, Any], cls: type) -> dict[str, Any]:
    """Merge ``extra`` into ``base`` section by section. Only dataclass-typed fields merge
    recursively; a mapping-valued field (reward weights) is replaced whole, so
    ``--set rewards.generator={shifted_pass_rate: 1}`` means exactly that."""
    hints = typing.get_type_hints(cls)
    out = dict(base)
    for key, value in extra.items():
        tp = hints.get(key)
        if (tp is not None and dataclasses.is_dataclass(tp) and isinstance(value, dict)
                and isinstance(out.get(key), dict)):
            out[key] = _deep_merge(out[key], value, tp)
        else:
            out[key] = value
    return out


def parse_override(item: str) -> dict[str, Any]:
    """``"ppo.learning_rate=1e-5"`` -> ``{"ppo": {"learning_rate": 1e-5}}`` (value read as YAML)."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override {item!r}: expected key=value, e.g. ppo.learning_rate=1e-5")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"override {item!r}: value is not valid YAML ({exc})") from None
    nested: dict[str, Any] = {}
    node = nested
    parts = key.strip().split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return nested


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read one config file; errors name the file."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got "
                          f"{type(data).__name__}")
    return data


def config_from_dict(data: dict[str, Any]) -> TrainConfig:
    return _build(TrainConfig, data, "")


def apply_overrides(data: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """``data`` (a plain config dict: a YAML file's, or a stored run's ``config_to_dict``) with
    each ``key=value`` override (the ``--set`` syntax, value read as YAML) merged in, in order.

    The result is checked as a whole against ``TrainConfig``, the check ``load_config`` makes
    (it goes through this function): an unknown key, a value of the wrong type or out of range
    raises ``ConfigError`` naming the dotted key. ``data`` itself is left unchanged, and values
    stay as YAML read them (``config_from_dict`` converts them to the fields' types).

    >>> apply_overrides({"ppo": {"epochs": 2}}, ["ppo.learning_rate=0.001", "name=x"])
    {'ppo': {'epochs': 2, 'learning_rate': 0.001}, 'name': 'x'}

    An error an override brings in names that override (``--set ...: ``), so a mistake in a
    command line is never blamed on the file:

    >>> apply_overrides({}, ["ppo.learnig_rate=1e-4"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    configs.errors.ConfigError: --set ppo.learnig_rate=1e-4: unknown key ppo.learnig_rate (did ...
    """
    if isinstance(overrides, str):  # one "key=value" would otherwise be read letter by letter
        raise TypeError("overrides: expected a list of 'key=value' strings, got one string")
    config_from_dict(data)  # the data's own errors first (the caller names where it is from)
    items = list(overrides)
    merged = _merged(data, items)
    try:
        config_from_dict(merged)  # checked as a whole: some overrides only hold together
    except ConfigError as exc:
        raise ConfigError(f"{_culprit(data, items, str(exc))}: {exc}") from None
    return merged


def _merged(data: dict[str, Any], items: list[str]) -> dict[str, Any]:
    merged = dict(data)
    for item in items:
        merged = _deep_merge(merged, parse_override(item), TrainConfig)
    return merged


def _culprit(data: dict[str, Any], items: list[str], message: str) -> str:
    """Which ``--set`` item brings in the error ``message`` (the data alone holds): the first
    one without which that error is gone; all of them together where none is alone."""
    for i, item in enumerate(items):
        try:
            config_from_dict(_merged(data, items[:i] + items[i + 1:]))
        except ConfigError as exc:
            if str(exc) == message:
                continue
        return f"--set {item}"
    return "--set " + " ".join(items)


def load_config(path: str | Path | None, overrides: Iterable[str] = ()) -> TrainConfig:
    """Defaults, then the YAML file at ``path`` (if any), then each ``key=value`` override
    (:func:`apply_overrides`); errors name ``path`` first."""
    data: dict[str, Any] = read_yaml(path) if path is not None else {}
    try:
        config_from_dict(data)
    except ConfigError as exc:
        where = f"{path}: " if path is not None else ""
        raise ConfigError(f"{where}{exc}") from None
    return config_from_dict(apply_overrides(data, overrides))  # errors name the --set item


def config_to_dict(cfg: Any) -> dict[str, Any]:
    """Plain nested dict (tuples as lists) suitable for YAML, JSON and MLflow params."""
    def plain(v: Any) -> Any:
        if isinstance(v, tuple):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v
    return plain(dataclasses.asdict(cfg))


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"ppo": {"epochs": 1}}`` -> ``{"ppo.epochs": 1}``."""
    out: dict[str, Any] = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value and all(isinstance(k, str) for k in value):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def config_hash(cfg: Any) -> str:
    """Short content hash of a config, stable across processes (tags runs in MLflow)."""
    blob = json.dumps(config_to_dict(cfg), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:12]
