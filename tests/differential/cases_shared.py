"""What a test and its candidate share in one process, and tests change for the candidate to
see: the environment (``monkeypatch.setenv``), ``input()`` and ``sys.stdin`` (patched by
``monkeypatch`` or ``unittest.mock``, or left to pytest's capture), logging (``caplog``), and
the candidate's classes and functions patched and restored (``monkeypatch``,
``mock.patch``/``patch.object``, ``monkeypatch.context``)."""

from __future__ import annotations

from .corpus import family

IO = {
    "ok": """
        import logging
        import os
        import sys

        log = logging.getLogger(__name__)


        def get_mode():
            return os.environ.get("APP_MODE", "dev")


        def ask_sum():
            a = int(input("a? "))
            b = int(input("b? "))
            return a + b


        def read_numbers():
            return [int(line) for line in sys.stdin if line.strip()]


        def first_line():
            return sys.stdin.readline().strip()


        def greet_user():
            print("Welcome")
            name = input("Name: ")
            print(f"Hi {name}")


        def process(items):
            if not items:
                log.warning("empty input")
                return 0
            log.info("processing %d items", len(items))
            return sum(items)
    """,
    "wrong": """
        import os
        import sys

        MODE = os.environ.get("APP_MODE", "dev")


        def get_mode():
            return MODE


        def ask_sum():
            return int(input()) * int(input())


        def read_numbers():
            return [int(sys.stdin.readline())]


        def first_line():
            return sys.stdin.read()


        def greet_user():
            name = input()
            print("Hi", name)


        def process(items):
            print("processing")
            return sum(items)
    """,
}
IO_TESTS = {
    "setenv": """
        def test_prod(monkeypatch):
            monkeypatch.setenv("APP_MODE", "prod")
            assert get_mode() == "prod"

        def test_default(monkeypatch):
            monkeypatch.delenv("APP_MODE", raising=False)
            assert get_mode() == "dev"
    """,
    "input_monkeypatch": """
        def test_sum(monkeypatch):
            answers = iter(["2", "3"])
            monkeypatch.setattr("builtins.input", lambda prompt="": next(answers))
            assert ask_sum() == 5
    """,
    "input_mock": """
        from unittest.mock import patch


        def test_sum():
            with patch("builtins.input", side_effect=["4", "5"]) as fake:
                assert ask_sum() == 9
            assert fake.call_count == 2
    """,
    "input_uncaptured": """
        import pytest


        def test_reading_stdin_under_capture_fails():
            with pytest.raises(OSError):
                ask_sum()
    """,
    "stdin_lines": """
        import io


        def test_numbers(monkeypatch):
            monkeypatch.setattr("sys.stdin", io.StringIO("1\\n2\\n\\n3\\n"))
            assert read_numbers() == [1, 2, 3]
    """,
    "stdin_readline": """
        import io
        import sys


        def test_first(monkeypatch):
            monkeypatch.setattr(sys, "stdin", io.StringIO("hello\\nworld\\n"))
            assert first_line() == "hello"
    """,
    "prompt_order": """
        import io


        def test_dialogue(monkeypatch, capsys):
            monkeypatch.setattr("sys.stdin", io.StringIO("Ann\\n"))
            greet_user()
            assert capsys.readouterr().out == "Welcome\\nName: Hi Ann\\n"
    """,
    "caplog_warning": """
        def test_empty_warns(caplog):
            assert process([]) == 0
            assert "empty input" in caplog.text
            assert [r.levelname for r in caplog.records] == ["WARNING"]
    """,
    "caplog_levels": """
        import logging


        def test_info_needs_level(caplog):
            assert process([1, 2]) == 3
            assert caplog.messages == []
            caplog.set_level(logging.INFO)
            assert process([4]) == 4
            assert caplog.messages == ["processing 1 items"]
    """,
}

PATCH = {
    "ok": """
        class Service:
            LIMIT = 3

            def fetch(self):
                return "real"

            def describe(self):
                return f"{self.fetch()}/{self.LIMIT}"

            @staticmethod
            def version():
                return 1

            @classmethod
            def create(cls):
                return cls()


        def helper(x):
            return x + 1


        def compute(x):
            return helper(x) * 2


        def use():
            return Service.create().describe() + f"@{Service.version()}"
    """,
    "inlined": """
        class Service:
            LIMIT = 3

            def fetch(self):
                return "real"

            def describe(self):
                return "real/3"

            @staticmethod
            def version():
                return 1

            @classmethod
            def create(cls):
                return Service()


        def helper(x):
            return x + 1


        def compute(x):
            return (x + 1) * 2


        def use():
            return "real/3@1"
    """,
}
PATCH_TESTS = {
    "method_then_real": """
        import solution


        def test_patched(monkeypatch):
            monkeypatch.setattr(solution.Service, "fetch", lambda self: "fake")
            assert use() == "fake/3@1"

        def test_real_again():
            assert use() == "real/3@1"
            assert Service().fetch() == "real"
    """,
    "class_attr_and_static": """
        def test_limit(monkeypatch):
            monkeypatch.setattr(Service, "LIMIT", 9)
            monkeypatch.setattr(Service, "version", staticmethod(lambda: 7))
            assert use() == "real/9@7"

        def test_restored():
            assert Service.LIMIT == 3
            assert Service.version() == 1
            assert use() == "real/3@1"
    """,
    "patch_object": """
        from unittest.mock import patch

        import solution


        def test_patch_object():
            with patch.object(solution.Service, "fetch", return_value="mocked") as fake:
                assert Service().describe() == "mocked/3"
            fake.assert_called_once()
            assert Service().describe() == "real/3"
    """,
    "patch_function": """
        from unittest.mock import patch

        import solution


        def test_patch():
            with patch("solution.helper", return_value=10) as fake:
                assert compute(3) == 20
            fake.assert_called_once_with(3)
            assert compute(3) == 8

        @patch.object(solution, "helper")
        def test_decorator(fake):
            fake.return_value = 0
            assert compute(1) == 0
    """,
    "instance_context": """
        def test_instance_patch(monkeypatch):
            s = Service()
            with monkeypatch.context() as m:
                m.setattr(s, "fetch", lambda: "inst")
                assert s.describe() == "inst/3"
            assert s.describe() == "real/3"
    """,
}

PAIRS = family("io", IO, IO_TESTS) + family("patch", PATCH, PATCH_TESTS)
