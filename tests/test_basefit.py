"""A fitted base (pipeline/basefit.py): a model folder like its source with new weights and a
record of the fit, deterministic, never fitted on held-out problems, never written over."""

from __future__ import annotations

import json

import pytest

from pipeline.basefit import BASE_FIT_FILE, BaseFit, fit_base, main
from pipeline.warmstart import CODE_WEIGHT

SOURCE = "family:guards:warmstart"


def _weights(folder):
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_a_fit_writes_a_loadable_base_with_its_record_and_repeats_exactly(tiny_model_dir,
                                                                          tmp_path):
    from models.tiny import is_tiny_model_dir

    fit = BaseFit(source=SOURCE, steps=3, batch_size=2, limit=4)
    record = fit_base(tiny_model_dir, tmp_path / "a", fit)
    again = fit_base(tiny_model_dir, tmp_path / "b", fit)
    saved = json.loads((tmp_path / "a" / BASE_FIT_FILE).read_text())
    assert saved == json.loads(json.dumps(record))
    assert saved["source"] == SOURCE and saved["steps"] == 3 and saved["problems"] == 4
    # per problem: the generator's five stages (its code thrice, CODE_WEIGHT) and the
    # discriminator's five
    assert saved["examples"] == 4 * (5 + CODE_WEIGHT - 1 + 5)
    assert is_tiny_model_dir(tmp_path / "a")  # its tokenizer loads as the source's did
    before, a, b = _weights(tiny_model_dir), _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert set(a) == set(before)
    assert any(not a[k].equal(before[k]) for k in a)      # the weights moved ...
    assert all(a[k].equal(b[k]) for k in a)               # ... the same way twice
    assert again["last_loss"] == record["last_loss"]


def test_an_existing_folder_is_never_written_over(tiny_model_dir, tmp_path):
    out = tmp_path / "kept"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="exists"):
        fit_base(tiny_model_dir, out, BaseFit(source=SOURCE, steps=1, limit=1))
    assert [p.name for p in out.iterdir()] == ["mine.txt"]


@pytest.mark.parametrize("kwargs, message", [
    ({"source": "family:guards:heldout"}, "held-out problems are never trained on"),
    ({"source": "family:piecewise"}, "held-out problems are never trained on"),  # every split
    ({"source": SOURCE, "steps": 0}, "must be >= 1"),
    ({"source": SOURCE, "learning_rate": 0.0}, "learning_rate"),
    ({"source": SOURCE, "max_context_tokens": 32}, "at least 64"),
])
def test_bad_fits_are_refused_by_name(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BaseFit(**kwargs)


def test_the_command_line_refuses_a_heldout_source(tiny_model_dir, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--model", str(tiny_model_dir), "--source", "family:piecewise:heldout",
              "--out", str(tmp_path / "x")])
    assert exit_.value.code == 2
    assert "held-out problems are never trained on" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
