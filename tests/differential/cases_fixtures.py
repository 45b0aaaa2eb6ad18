"""Fixtures: plain, yield (teardown), autouse, module scope, parametrized, ``usefixtures``,
``tmp_path`` (the candidate reads and writes the test's files), ``monkeypatch`` (on the
solution module's attributes, by object and by dotted name), ``capsys`` on a candidate that
prints, ``request``."""

from __future__ import annotations

from .corpus import family

FILES = {
    "ok": """
        from pathlib import Path


        def count_words(path):
            with open(path, encoding="utf-8") as f:
                return sum(len(line.split()) for line in f)


        def write_report(path, counts):
            Path(path).write_text("\\n".join(f"{k}: {v}" for k, v in sorted(counts.items())))
            return len(counts)
    """,
    "lines": """
        def count_words(path):
            with open(path) as f:
                return len(f.readlines())


        def write_report(path, counts):
            with open(path, "w") as f:
                for k, v in counts.items():
                    f.write(f"{k}: {v}\\n")
            return len(counts)
    """,
    "missing_ok": """
        import os


        def count_words(path):
            if not os.path.exists(path):
                return 0
            with open(path) as f:
                return len(f.read().split())


        def write_report(path, counts):
            with open(path, "w") as f:
                f.write("\\n".join(f"{k}: {v}" for k, v in sorted(counts.items())))
            return len(counts)
    """,
}
FILES_TESTS = {
    "tmp_path": """
        def test_count(tmp_path):
            p = tmp_path / "words.txt"
            p.write_text("one two three\\nfour five\\n")
            assert count_words(p) == 5
            assert count_words(str(p)) == 5
    """,
    "report": """
        def test_report(tmp_path):
            out = tmp_path / "report.txt"
            assert write_report(out, {"b": 2, "a": 1}) == 2
            assert out.read_text().splitlines() == ["a: 1", "b: 2"]
    """,
    "missing": """
        import pytest


        def test_missing_file(tmp_path):
            with pytest.raises(FileNotFoundError):
                count_words(tmp_path / "nope.txt")
    """,
    "yield_fixture": """
        import os

        import pytest


        @pytest.fixture
        def sample(tmp_path):
            path = tmp_path / "sample.txt"
            path.write_text("a b c")
            yield path
            os.remove(path)

        def test_sample(sample):
            assert count_words(sample) == 3
    """,
    "factory": """
        import pytest


        @pytest.fixture(scope="module")
        def make_file(tmp_path_factory):
            base = tmp_path_factory.mktemp("data")

            def make(name, text):
                path = base / name
                path.write_text(text)
                return path
            return make

        @pytest.mark.parametrize("text, n", [("", 0), ("x", 1), ("x y\\nz", 3)])
        def test_counts(make_file, text, n):
            assert count_words(make_file(f"f{n}.txt", text)) == n
    """,
}

PATCHED = {
    "ok": """
        import random


        def roll():
            return random.randint(1, 6)


        def fetch(url):
            raise ConnectionError("no network in tests")


        def get_status(url):
            try:
                return fetch(url)["status"]
            except ConnectionError:
                return "offline"


        def lucky():
            return roll() == 6


        THRESHOLD = 10


        def over(x):
            return x > THRESHOLD
    """,
    "inlined": """
        def fetch(url):
            raise ConnectionError("no network")


        def get_status(url):
            return "offline"


        def roll():
            return 4


        def lucky():
            return False


        THRESHOLD = 10


        def over(x, limit=THRESHOLD):
            return x > limit
    """,
}
PATCHED_TESTS = {
    "setattr_module": """
        import solution


        def test_fetch_patched(monkeypatch):
            monkeypatch.setattr(solution, "fetch", lambda url: {"status": 200})
            assert get_status("http://x") == 200

        def test_unpatched():
            assert get_status("http://x") == "offline"
    """,
    "setattr_string": """
        def test_roll_patched(monkeypatch):
            monkeypatch.setattr("solution.roll", lambda: 6)
            assert lucky() is True
    """,
    "setattr_constant": """
        import solution


        def test_threshold(monkeypatch):
            assert over(11)
            monkeypatch.setattr(solution, "THRESHOLD", 20)
            assert not over(11)
    """,
    "autouse": """
        import pytest

        import solution

        calls = []


        @pytest.fixture(autouse=True)
        def fake_fetch(monkeypatch):
            def fake(url):
                calls.append(url)
                return {"status": 404}
            monkeypatch.setattr(solution, "fetch", fake)
            yield
            calls.clear()

        def test_one():
            assert get_status("a") == 404
            assert calls == ["a"]

        def test_two():
            assert get_status("b") == 404
            assert calls == ["b"]
    """,
}

GREET = {
    "ok": """
        def greet(name):
            print(f"Hello, {name}!")


        def shout(msg):
            print(msg.upper())
            return len(msg)
    """,
    "returns": """
        def greet(name):
            return f"Hello, {name}!"


        def shout(msg):
            print(msg.upper(), end="")
            return len(msg)
    """,
    "stderr": """
        import sys


        def greet(name):
            print(f"Hello, {name}!", file=sys.stderr)


        def shout(msg):
            sys.stdout.write(msg.upper() + "\\n")
            return len(msg)
    """,
}
GREET_TESTS = {
    "capsys": """
        def test_greet(capsys):
            greet("World")
            captured = capsys.readouterr()
            assert captured.out == "Hello, World!\\n"
            assert captured.err == ""
    """,
    "capsys_twice": """
        def test_shout(capsys):
            assert shout("hi") == 2
            assert capsys.readouterr().out == "HI\\n"
            shout("yo")
            assert capsys.readouterr().out.strip() == "YO"
    """,
    "module_fixture_scope": """
        import pytest

        log = []


        @pytest.fixture(scope="module")
        def names():
            log.append("setup")
            return ["a", "b"]

        @pytest.mark.usefixtures("names")
        class TestGreeting:
            def test_a(self, names, capsys):
                greet(names[0])
                assert "a" in capsys.readouterr().out

            def test_b(self, names, capsys):
                greet(names[1])
                assert capsys.readouterr().out.startswith("Hello")
                assert log == ["setup"]
    """,
    "param_fixture": """
        import pytest


        @pytest.fixture(params=["x", "yy", "zzz"])
        def word(request):
            return request.param

        def test_shout_length(word, capsys):
            assert shout(word) == len(word)
            assert capsys.readouterr().out == word.upper() + "\\n"
    """,
}

PAIRS = (family("files", FILES, FILES_TESTS) + family("patched", PATCHED, PATCHED_TESTS)
         + family("greet", GREET, GREET_TESTS))
