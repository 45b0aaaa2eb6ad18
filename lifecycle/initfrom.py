"""Start a new run from trained adapters (``python -m flows.train --init-from SPEC``).

``SPEC`` is what ``serving.sources.resolve_source`` accepts: a registry alias or version
(``models:/tiny-generator@champion``, ``models:/tiny-generator/3``), a logged checkpoint
(``runs:/<mlflow run>/checkpoints/<role>/step-NNNNNN``) or a checkpoint folder. Every file is
checked against its checkpoint manifest's sha256 before anything is loaded. The spec's role is
the one its name or path says (``-discriminator``, ``/discriminator/``; else the generator); for
a generator alias the discriminator registered under the same alias is loaded too, otherwise
the other role keeps its fresh adapter (and the run says so). The run then skips the warm start.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from configs.errors import ConfigError
from configs.names import ROLES
from lifecycle.context import RunContext
from serving.sources import resolve_source, sibling


def spec_role(spec: str) -> str:
    """The role whose adapter ``spec`` names.

    >>> spec_role("models:/tiny-discriminator@champion"), spec_role("tiny-generator@candidate")
    ('discriminator', 'generator')
    >>> spec_role("runs:/abc/checkpoints/discriminator/step-000005")
    'discriminator'
    """
    name = spec.split("@")[0].rstrip("/")
    return "discriminator" if (name.endswith("-discriminator") or "/discriminator/" in spec
                               or name.split("/")[-2:-1] == ["discriminator"]) else "generator"


def init_adapters(ctx: RunContext, spec: str) -> dict[str, str]:
    """Load the adapters ``spec`` names into ``ctx`` (hash-verified); returns role -> where
    it came from and its ``adapter_version``."""
    specs = {spec_role(spec): spec}
    other = sibling(spec)
    if other is not None:
        specs["discriminator"] = other
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for role, one in specs.items():
            try:
                source = resolve_source(one, ctx.cfg, Path(tmp) / role, ctx.tracker)
            except ValueError as exc:
                if one is other:  # no discriminator under that alias: it starts fresh
                    print(f"--init-from: {exc}; the discriminator starts from a fresh adapter")
                    continue
                raise ConfigError(f"--init-from {one}: {exc}") from None
            if source.adapter_dir is None:
                raise ConfigError(f"--init-from {one}: {source.describe()} holds no adapter")
            ctx.roles[role].load(source.adapter_dir, None)
            out[role] = f"{source.describe()}, adapter_version {ctx.roles[role].version}"
    for role in ROLES:
        print(f"init from: {role} " + out.get(role, "fresh adapter"))
    return out
