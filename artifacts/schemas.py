"""Parquet schemas of the run store, declared once and versioned.

Every write and every read of the store passes one of these schemas (``artifacts.store``), so a
later row can never silently change a column's type the way schema inference does.

Partition columns: ``run_id`` and ``step`` live in the hive-style path
(``run_id=<id>/table=<name>/step=<NNNNNN>/``), not in the files. That is the hive convention:
``pyarrow.dataset`` and ``pandas.read_parquet`` refuse a column that is both in the path and in
the file with another type ("Unable to merge: Field step has incompatible types"). ``RunStore``
adds both columns back on read, so every frame it returns carries ``run_id, step, stage,
problem_id, sample_idx`` and tables join on them.

To change a table: edit its fields, bump its ``version``. Files written with another version are
refused on read with a message naming the file and both versions, unless the table declares how
to read them: ``upgrades={1: {"col": fill}}`` says version 2 only added ``col`` to version 1
(types of the other columns unchanged), and a version-1 file reads with ``col`` set to ``fill``
in every row. A fill may also be a ``Gathered``: the new column is built from columns of the
older file, which the new version no longer has. A chain of such entries reads any older
version; a version with no entry is refused. Use it when a change adds columns or gathers old
ones into one (so old runs still resume, replay and report).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from artifacts.updatestats import stat_columns
from configs.names import ROLES

PARTITION_FIELDS = (pa.field("run_id", pa.string(), nullable=False),
                    pa.field("step", pa.int64(), nullable=False))
META_TABLE = b"artifacts.table"
META_VERSION = b"artifacts.schema_version"


def _f(name: str, type_: pa.DataType, nullable: bool = False) -> pa.Field:
    return pa.field(name, type_, nullable=nullable)


_STR, _I32, _I64, _F64, _BOOL = pa.string(), pa.int32(), pa.int64(), pa.float64(), pa.bool_()
_KEYS = (_f("stage", _I32), _f("problem_id", _STR), _f("sample_idx", _I32))


@dataclass(frozen=True)
class Gathered:
    """An upgrade's fill for a map column, built from older columns of the same file: each
    row's map holds the non-null values of ``columns`` present in the file, keyed by column
    name in sorted order, and is null where the boolean column ``null_where`` is true.

    >>> old = pa.table({"b": [1.0, None, 2.0], "a": [0.5, None, None],
    ...                 "masked": [False, True, False]})
    >>> Gathered(("a", "b", "c"), "masked").array(old, pa.map_(_STR, _F64)).to_pylist()
    [[('a', 0.5), ('b', 1.0)], None, [('b', 2.0)]]
    """

    columns: tuple[str, ...]
    null_where: str

    def array(self, table: pa.Table, type_: pa.DataType) -> pa.Array:
        present = {c: table.column(c).to_pylist() for c in sorted(self.columns)
                   if c in table.column_names}
        nulls = table.column(self.null_where).to_pylist()
        return pa.array([None if null else [(c, v[i]) for c, v in present.items()
                                            if v[i] is not None]
                         for i, null in enumerate(nulls)], type_)


@dataclass(frozen=True)
class TableSchema:
    """One table: stored fields (file schema), version, allowed values of enum-like columns."""

    name: str
    version: int
    fields: tuple[pa.Field, ...]
    doc: str
    allowed: dict[str, tuple[str, ...]] = field(default_factory=dict)
    upgrades: dict[int, dict[str, Any]] = field(default_factory=dict)
    """``{v: {column: fill}}``: version ``v + 1`` only added these columns to version ``v``;
    files of version ``v`` read with each one filled with ``fill`` (a value, or a ``Gathered``
    built from the file's own columns)."""

    def columns_added_since(self, version: int) -> dict[str, Any] | None:
        """Columns (with their fill values) that a file of ``version`` lacks, ``{}`` for the
        current version, ``None`` when files of ``version`` cannot be read.

        >>> EXECUTIONS.columns_added_since(2), EXECUTIONS.columns_added_since(0)
        ({'executor': None, 'node': None}, None)
        """
        if version == self.version:
            return {}
        if not 0 < version < self.version:
            return None
        fill: dict[str, Any] = {}
        for v in range(version, self.version):
            if v not in self.upgrades:
                return None
            fill |= self.upgrades[v]
        return fill

    @property
    def arrow(self) -> pa.Schema:
        """The file schema, with the table name and version in its key-value metadata."""
        return pa.schema(list(self.fields), metadata={
            META_TABLE: self.name.encode(), META_VERSION: str(self.version).encode()})

    @property
    def full(self) -> pa.Schema:
        """What readers return: partition columns first, then the stored fields."""
        return pa.schema(list(PARTITION_FIELDS) + list(self.fields))

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    def row_errors(self, table: pa.Table) -> list[str]:
        """Semantic checks beyond types (enum values, matching list lengths); [] when valid."""
        errors = []
        for col, values in self.allowed.items():
            arr = table.column(col)
            bad = pc.and_(pc.is_valid(arr), pc.invert(pc.is_in(arr, value_set=pa.array(values))))
            if pc.any(bad).as_py():
                first = pc.index(bad, True).as_py()
                errors.append(f"column {col!r}: row {first} has {arr[first].as_py()!r}; "
                              f"allowed: {', '.join(values)}")
        if self.name == "chains":
            n_ids = pc.list_value_length(table.column("output_token_ids"))
            for other in ("output_logprobs",):
                same = pc.equal(n_ids, pc.list_value_length(table.column(other)))
                if not pc.all(same).as_py():
                    first = pc.index(same, False).as_py()
                    errors.append(f"column {other!r}: row {first} has a different length than "
                                  "'output_token_ids' (one log-prob per sampled token)")
            same = pc.equal(n_ids, pc.cast(table.column("output_tokens"), pa.int32()))
            if not pc.all(same).as_py():
                errors.append(f"column 'output_tokens': row {pc.index(same, False).as_py()} "
                              "differs from len(output_token_ids)")
        if self.name == "tests":
            dropped = pc.equal(table.column("parse_status"), "dropped")
            no_reason = pc.and_(dropped, pc.is_null(table.column("drop_reason")))
            if pc.any(no_reason).as_py():
                errors.append(f"column 'drop_reason': row {pc.index(no_reason, True).as_py()} "
                              "is dropped without a reason")
        return errors


CHAINS = TableSchema("chains", 1, (
    *_KEYS,
    _f("role", _STR),                       # who wrote it: generator stage text or the
                                            # discriminator's tests for that stage (PPO needs both)
    _f("prompt", _STR),
    _f("output_text", _STR),
    _f("prompt_token_ids", pa.list_(_I32)),
    _f("output_token_ids", pa.list_(_I32)),
    _f("output_logprobs", pa.list_(pa.float32())),  # log-prob of each sampled token (old policy)
    _f("prompt_tokens", _I32),
    _f("output_tokens", _I32),
    _f("finish_reason", _STR, nullable=True),  # "eos" or "length" (truncated)
    _f("latency_s", _F64),                  # this sequence's share of its generate() call
    _f("adapter_version", _STR),            # checkpoint/content hash the text was sampled from
    _f("seed", _I64),
), "One row per problem x sample x stage x role: prompt, text, tokens and log-probs.",
    allowed={"role": ROLES, "finish_reason": ("eos", "length", "stop")})

TESTS = TableSchema("tests", 1, (
    *_KEYS,                                 # stage = origin stage (0 for baseline tests)
    _f("test_idx", _I32),                   # position in the sample's accumulated suite
    _f("test_id", _STR),                    # stable id, joins with executions
    _f("origin", _STR),
    _f("snippet", _STR),
    _f("parse_status", _STR),
    _f("drop_reason", _STR, nullable=True),  # why a test was dropped (required when dropped)
    _f("is_duplicate", _BOOL),
    _f("duplicate_of", _STR, nullable=True),  # test_id of the first copy
), "One row per parsed test snippet, kept or dropped.",
    allowed={"origin": ("discriminator", "baseline"), "parse_status": ("ok", "dropped")})

EXECUTIONS = TableSchema("executions", 3, (
    *_KEYS,                                 # stage = origin stage of the test
    _f("test_id", _STR),
    _f("target_kind", _STR),
    _f("target_id", _STR),                  # "candidate", "reference" or the mutant's id
    _f("status", _STR),                     # passed / failed / error / timeout / ... (sandbox);
                                            # "infra": the harness failed, not the code
    _f("message", _STR, nullable=True),
    _f("duration_s", _F64),
    _f("isolation", _STR),                  # isolation level the sandbox actually used
    _f("limits", _STR, nullable=True),      # v2: limits the verdict ran under, compact JSON of
                                            # ExecutionResult.limits ("{}": not run or unknown;
                                            # null: written before v2)
    _f("executor", _STR, nullable=True),    # v3: where it ran, "local" or "ray" (null: not
                                            # run, or written before v3)
    _f("node", _STR, nullable=True),        # v3: host name (local) or Ray node id
), "One row per test x target (candidate code, reference solution, or a mutant of it).",
    allowed={"target_kind": ("candidate", "reference", "mutant")},
    upgrades={1: {"limits": None}, 2: {"executor": None, "node": None}})

REWARD_VALUES = pa.map_(_STR, _F64)
"""The ``reward`` column's type: reward name -> raw value (``rewards.functions.REGISTRY``)."""

_REWARD_COLUMNS = ("pass_rate", "shifted_pass_rate", "adversarial_validity",
                   "valid_invalid_bugcatch", "mutation_kill", "baseline_pass_rate",
                   "progressive", "all_pass", "baseline_all_pass")
"""The one-column-per-reward layout that files before version 7 store, gathered on read."""

REWARDS = TableSchema("rewards", 7, (
    *_KEYS,                                 # stage = training stage
    # Null exactly when ``masked``: a masked sample has no reward at all.
    _f("generator_reward", _F64, True),
    _f("discriminator_reward", _F64, True),
    # The raw value of each reward the config weights, by name (keys sorted); the totals
    # above are their weighted sums. A new reward is a new key, not a new column.
    _f("reward", REWARD_VALUES, True),
    _f("validity", _F64, True),
    _f("bug_catch", _F64, True),
    _f("n_tests", _I32),
    _f("n_valid", _I32),
    _f("n_invalid", _I32),
    _f("n_duplicates", _I32),
    _f("n_passed_valid", _I32),
    _f("n_baseline", _I32),
    _f("n_baseline_passed", _I32),
    _f("n_mutants", _I32),
    _f("n_mutants_killed", _I32),
    _f("generator_group_skipped", _BOOL),    # every scored sample of the problem scored the
    _f("discriminator_group_skipped", _BOOL),  # same (masked samples are not in the group)
    # An "infra" verdict (harness, not code) that some reward reads: the sample is not scored
    # (rewards, shares and ``reward`` null) and enters no update, either role
    # (rewards.SampleOutcome.masked). n_infra_tests: how many of its tests have such a verdict.
    _f("masked", _BOOL),
    _f("n_infra_tests", _I32),
    # Valid peer tests (rewards.peer_tests: written for the problem's other samples, they
    # judge the generator only) and how many of them the code passed; 0 without peers
    _f("n_peer", _I32, True),
    _f("n_peer_passed", _I32, True),
), "One row per sample: both rewards and every component that went into them.",
    upgrades={1: {"masked": False, "n_infra_tests": 0}, 2: {}, 3: {},
              4: {"n_peer": None, "n_peer_passed": None}, 5: {},
              6: {"reward": Gathered(_REWARD_COLUMNS, null_where="masked")}})


def _update_stats(since: int) -> tuple[pa.Field, ...]:
    """The updates table's statistics columns that its schema version ``since`` added: the
    fields of ``artifacts.updatestats.UpdateStats`` (documented there), in their order."""
    return tuple(_f(c.name, pa.type_for_alias(c.arrow), c.nullable) for c in stat_columns(since))


UPDATES = TableSchema("updates", 3, (
    _f("stage", _I32),
    _f("role", _STR),
    _f("update_idx", _I32),                 # order of the update within the step
    *_update_stats(since=1),                # loss ... n_tokens
    _f("duration_s", _F64),
    _f("adapter_version_before", _STR),
    _f("adapter_version_after", _STR),
    *_update_stats(since=2),                # kl_ref ... explained_variance (null before v2)
    *_update_stats(since=3),                # logprob_mismatch(_share) (null before v3)
), "One row per PPO update of one role's adapter (no problem_id/sample_idx: it spans a batch).",
    allowed={"role": ROLES},
    upgrades={1: {c.name: None for c in stat_columns(2)},
              2: {c.name: None for c in stat_columns(3)}})

EVALUATIONS = TableSchema("evaluations", 1, (
    *_KEYS,                                 # stage = 5 (the code stage); sample_idx per problem
    _f("mode", _STR),                       # "chain" (five stages) or "direct" (code at once)
    _f("model", _STR),                      # what was evaluated: registry alias, path or hub id
    _f("passed", _BOOL),                    # the code passed every baseline test (pass@k)
    _f("code_ok", _BOOL),                   # stage-5 output parsed to code defining the entry
    _f("n_baseline", _I32),
    _f("n_baseline_passed", _I32),
    _f("generation_s", _F64),               # this sample's share of the batched generate calls
    _f("code", _STR, True),
    # Test-side columns: null for the direct baseline (no discriminator involved).
    _f("n_parsed", _I32, True),             # discriminator tests parsed (duplicates included)
    _f("n_tests", _I32, True),              # ... deduplicated
    _f("n_dropped", _I32, True),            # unparsable test snippets
    _f("n_valid", _I32, True),              # deduplicated tests the reference passes
    _f("n_mutants", _I32, True),
    _f("n_mutants_killed", _I32, True),
    _f("n_distinct_inputs", _I32, True),    # distinct argument tuples passed to the entry point
    _f("failure_rate", _F64, True),         # share of valid tests the code fails
    _f("coherence", _F64, True),            # named edge-case classes that the tests exercise
    _f("n_edge_named", _I32, True),
    _f("n_edge_tested", _I32, True),
    _f("generator_reward", _F64, True),
    _f("discriminator_reward", _F64, True),
), "One row per evaluated sample (flows/evaluate.py): pass/fail and test-side measurements.",
    allowed={"mode": ("chain", "direct")})

STAGE_REPORTS = TableSchema("stage_reports", 2, (
    _f("stage", _I32),                      # the chain stage whose tests the row describes
    _f("written", _I32),
    _f("parsed", _I32),
    _f("distinct", _I32),
    _f("valid", _I32),
    _f("mutant_kill_rate", _F64),
    _f("bugs_caught", _I32),
    _f("repeated", _I32, True),             # v2: copies of an earlier valid test (null before)
    _f("first_caught", _I32, True),         # v2: samples first rejected by this stage's tests
), "One row per chain stage per step: what its discriminator tests did "
   "(pipeline/stagereport.py), written with the step before its manifest.",
    upgrades={1: {"repeated": None, "first_caught": None}})

SCHEMAS: dict[str, TableSchema] = {s.name: s for s in (CHAINS, TESTS, EXECUTIONS, REWARDS,
                                                         UPDATES, EVALUATIONS, STAGE_REPORTS)}


def get_schema(table: str) -> TableSchema:
    """The schema of ``table``; the error lists the known tables."""
    try:
        return SCHEMAS[table]
    except KeyError:
        raise KeyError(f"unknown table {table!r}; tables: {', '.join(SCHEMAS)}") from None
