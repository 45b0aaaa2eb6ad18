"""The call boundary keeps Python's meaning: a test's callbacks called from the candidate's
own threads and through recursion that crosses the boundary several times; candidate classes
built on by the test (a subclass, a decorator, a factory, ``functools.total_ordering``, a
dataclass subclass); the candidate module's state read after calls (``solution.count``);
patches of builtins and the standard library made by the test and seen by the candidate
(``builtins.print``/``open``, ``time.sleep``, ``sys.argv``, ``random.seed``), and its output
under ``capsys``; coroutines run by the test (``asyncio.run``) and ``zoneinfo`` in the
candidate; and workloads of many calls, long generators and big results."""

from __future__ import annotations

from .corpus import family

THREADS = {
    "ok": """
        import threading
        from concurrent.futures import ThreadPoolExecutor


        def run_in_thread(fn, *args):
            box = []
            t = threading.Thread(target=lambda: box.append(fn(*args)))
            t.start()
            t.join()
            return box[0]


        def map_parallel(fn, items):
            with ThreadPoolExecutor(max_workers=4) as pool:
                return list(pool.map(fn, items))


        def notify_all(callbacks, value):
            threads = [threading.Thread(target=cb, args=(value,)) for cb in callbacks]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return len(threads)


        def apply_twice(fn, x):
            return fn(fn(x))


        def countdown(n, step):
            return [] if n <= 0 else [n] + step(n - 1)
    """,
    "wrong": """
        import threading
        from concurrent.futures import ThreadPoolExecutor


        def run_in_thread(fn, *args):
            box = []
            t = threading.Thread(target=lambda: box.append(fn(*args[:-1] or args)))
            t.start()
            t.join()
            return box[0] if len(args) < 2 else None


        def map_parallel(fn, items):
            with ThreadPoolExecutor(max_workers=4) as pool:
                return sorted(pool.map(fn, items), reverse=True)


        def notify_all(callbacks, value):
            for cb in callbacks[1:]:
                cb(value)
            return len(callbacks)


        def apply_twice(fn, x):
            return fn(x)


        def countdown(n, step):
            return [] if n <= 1 else [n] + step(n - 1)
    """,
}

THREAD_TESTS = {
    "thread": """
        def test_callback_in_thread():
            assert run_in_thread(lambda a, b: a * b, 6, 7) == 42
    """,
    "pool": """
        def test_pool_map():
            assert map_parallel(lambda x: x * x, [1, 2, 3, 4, 5]) == [1, 4, 9, 16, 25]
    """,
    "notify": """
        def test_every_callback_hears():
            heard = []
            assert notify_all([heard.append, heard.append, heard.append], 5) == 3
            assert heard == [5, 5, 5]
    """,
    "recurse": """
        import solution


        def test_mutual_recursion_through_the_test():
            def step(n):
                return solution.countdown(n, step)

            assert step(5) == [5, 4, 3, 2, 1]


        def test_nested_callbacks():
            assert apply_twice(lambda x: apply_twice(lambda y: y + 1, x), 0) == 4
    """,
}

BUILT = {
    "ok": """
        from dataclasses import dataclass


        class Shape:
            sides = 0

            def __init__(self, size):
                self.size = size

            def area(self):
                return self.size * self.size

            def describe(self):
                return f"{type(self).__name__} {self.area()}"


        @dataclass
        class Item:
            name: str
            price: float

            def total(self, qty):
                return self.price * qty


        class Version:
            def __init__(self, major, minor):
                self.major, self.minor = major, minor

            def __eq__(self, other):
                return (self.major, self.minor) == (other.major, other.minor)

            def __lt__(self, other):
                return (self.major, self.minor) < (other.major, other.minor)


        def make_counter(start=0):
            class Counter:
                def __init__(self):
                    self.value = start

                def tick(self):
                    self.value += 1
                    return self.value

            return Counter


        def with_greeting(text):
            def deco(cls):
                cls.greeting = text
                return cls
            return deco
    """,
    "wrong": """
        from dataclasses import dataclass


        class Shape:
            sides = 0

            def __init__(self, size):
                self.size = size

            def area(self):
                return self.size * 2

            def describe(self):
                return f"shape {self.area()}"


        @dataclass
        class Item:
            name: str
            price: float

            def total(self, qty):
                return self.price + qty


        class Version:
            def __init__(self, major, minor):
                self.major, self.minor = major, minor

            def __eq__(self, other):
                return self.major == other.major

            def __lt__(self, other):
                return self.minor < other.minor


        def make_counter(start=0):
            class Counter:
                def __init__(self):
                    self.value = 0

                def tick(self):
                    self.value += 2
                    return self.value

            return Counter


        def with_greeting(text):
            def deco(cls):
                cls.greeting = text.upper()
                return cls
            return deco
    """,
}

# A test's subclass of a candidate class cannot be instantiated (the candidate's class lives
# in the other process): the judge says so by name (``proxies._no_subclass``), so these stay
# out of the corpus, where pytest would pass them.
SUBCLASS_TESTS = {
    "subclass": """
        import solution


        class Square(solution.Shape):
            sides = 4


        class Rect(Shape):
            def __init__(self, w, h):
                super().__init__(w)
                self.h = h

            def area(self):
                return self.size * self.h


        def test_subclass_inherits():
            s = Square(3)
            assert s.area() == 9
            assert s.sides == 4
            assert isinstance(s, Shape)
            assert s.describe() == "Square 9"


        def test_subclass_overrides():
            assert Rect(2, 5).area() == 10
            assert Rect(2, 5).describe() == "Rect 10"
    """,
    "dataclass": """
        from dataclasses import dataclass, asdict


        @dataclass
        class Discounted(Item):
            off: float = 0.0

            def net(self):
                return self.price - self.off


        def test_dataclass_subclass():
            d = Discounted("pen", 2.0, 0.5)
            assert d.net() == 1.5
            assert d.total(3) == 6.0
            assert asdict(d) == {"name": "pen", "price": 2.0, "off": 0.5}
    """,
}

BUILT_TESTS = {
    "ordering": """
        import functools


        Ordered = functools.total_ordering(Version)


        def test_total_ordering():
            assert Ordered(1, 2) <= Ordered(1, 3)
            assert Ordered(2, 0) > Ordered(1, 9)
            assert Ordered(1, 2) >= Ordered(1, 2)
            assert sorted([Ordered(2, 1), Ordered(1, 5)])[0].major == 1
    """,
    "factory": """
        def test_factory_class():
            C = make_counter(10)
            c = C()
            assert c.tick() == 11
            assert c.tick() == 12


        def test_decorated_test_class():
            @with_greeting("hello")
            class Plugin:
                name = "p"

            assert Plugin.greeting == "hello"
            assert Plugin.name == "p"
    """,
}

STATE = {
    "ok": """
        count = 0
        history = []


        def increment(by=1):
            global count
            count += by
            history.append(by)
            return count


        def reset():
            global count
            count = 0
            history.clear()
    """,
    "wrong": """
        count = 0
        history = []


        def increment(by=1):
            total = count + by
            history.append(by)
            return total


        def reset():
            history.clear()
    """,
}

STATE_TESTS = {
    "attr": """
        import solution


        def test_count_after_calls():
            solution.reset()
            solution.increment()
            solution.increment(2)
            assert solution.count == 3
            assert solution.history == [1, 2]
    """,
    "star": """
        from solution import *
        import solution


        def test_star_then_module():
            reset()
            increment(5)
            assert solution.count == 5
            assert increment() == 6
            assert solution.count == 6
    """,
}

PATCHES = {
    "ok": """
        import builtins
        import random
        import sys
        import time


        def shout(msg):
            print(msg.upper())


        def read_first(path):
            with open(path) as f:
                return f.readline().strip()


        def wait_and_return(x):
            time.sleep(30)
            return x


        def first_arg():
            return sys.argv[1] if len(sys.argv) > 1 else None


        def draws(n):
            return [random.randint(1, 100) for _ in range(n)]


        def pick(items):
            return random.choice(items)


        def report(xs):
            print(f"n={len(xs)}")
            print("done", file=sys.stderr)
            return sum(xs)
    """,
    "wrong": """
        import random
        import sys
        import time


        def shout(msg):
            print(msg)


        def read_first(path):
            return path


        def wait_and_return(x):
            time.sleep(30)
            return x + 1


        def first_arg():
            return sys.argv[0]


        def draws(n):
            return [random.randint(1, 100) for _ in range(n + 1)]


        def pick(items):
            return items[0]


        def report(xs):
            print(f"count={len(xs)}")
            return sum(xs)
    """,
}

PATCH_TESTS = {
    "print": """
        def test_print_patched(monkeypatch):
            said = []
            monkeypatch.setattr("builtins.print", lambda *a, **k: said.append(a))
            shout("hi")
            assert said == [("HI",)]
    """,
    "open": """
        import io
        from unittest import mock


        def test_open_patched():
            with mock.patch("builtins.open", return_value=io.StringIO("first\\nsecond\\n")):
                assert read_first("any.txt") == "first"
    """,
    "sleep_mp": """
        import time


        def test_sleep_patched(monkeypatch):
            slept = []
            monkeypatch.setattr(time, "sleep", slept.append)
            assert wait_and_return(7) == 7
            assert slept == [30]
    """,
    "sleep_mock": """
        from unittest.mock import patch


        def test_sleep_mocked():
            with patch("time.sleep") as sleep:
                assert wait_and_return(3) == 3
            sleep.assert_called_once_with(30)
    """,
    "argv": """
        import sys


        def test_argv(monkeypatch):
            monkeypatch.setattr(sys, "argv", ["prog", "input.txt"])
            assert first_arg() == "input.txt"
    """,
    "seed": """
        import random


        def test_seeded_draws():
            random.seed(0)
            first = draws(5)
            random.seed(0)
            assert draws(5) == first
            random.seed(0)
            expected = [random.randint(1, 100) for _ in range(5)]
            random.seed(0)
            assert draws(5) == expected


        def test_seeded_choice():
            random.seed(42)
            expected = random.choice("abcdef")
            random.seed(42)
            assert pick("abcdef") == expected
    """,
    "capsys": """
        def test_capsys(capsys):
            assert report([1, 2, 3]) == 6
            out, err = capsys.readouterr()
            assert out == "n=3\\n"
            assert err == "done\\n"
    """,
}

ASYNC = {
    "ok": """
        import asyncio
        from datetime import datetime
        from zoneinfo import ZoneInfo


        async def fetch(x, delay=0):
            await asyncio.sleep(delay)
            return x * 2


        async def gather_all(xs):
            return list(await asyncio.gather(*(fetch(x) for x in xs)))


        def to_zone(hour, zone):
            t = datetime(2024, 1, 15, hour, 0, tzinfo=ZoneInfo("UTC"))
            return t.astimezone(ZoneInfo(zone)).hour


        def zone_name(zone):
            return str(ZoneInfo(zone))
    """,
    "wrong": """
        import asyncio
        from datetime import datetime
        from zoneinfo import ZoneInfo


        async def fetch(x, delay=0):
            await asyncio.sleep(delay)
            return x + 2


        async def gather_all(xs):
            return [x * 2 for x in xs][::-1]


        def to_zone(hour, zone):
            return hour


        def zone_name(zone):
            return zone.lower()
    """,
}

ASYNC_TESTS = {
    "run": """
        import asyncio
        import solution


        def test_asyncio_run():
            assert asyncio.run(solution.fetch(21)) == 42


        def test_gather():
            assert asyncio.run(gather_all([1, 2, 3])) == [2, 4, 6]


        def test_await_in_test_coroutine():
            async def main():
                a = await fetch(1)
                b = await fetch(2, 0.001)
                return a + b
            assert asyncio.run(main()) == 6
    """,
    "zone": """
        from zoneinfo import ZoneInfo


        def test_zone_conversion():
            assert to_zone(12, "Asia/Tokyo") == 21
            assert zone_name("Europe/Paris") == "Europe/Paris"
    """,
}

LOAD = {
    "ok": """
        import itertools


        def inc(i):
            return i + 1


        def numbers(n):
            for i in range(n):
                yield i


        def perms(n):
            return list(itertools.permutations(range(n)))
    """,
    "wrong": """
        import itertools


        def inc(i):
            return i + 1 if i != 123456 else i


        def numbers(n):
            for i in range(n):
                yield i if i != 140000 else -1


        def perms(n):
            return list(itertools.permutations(range(n)))[:-1]
    """,
}

LOAD_TESTS = {
    "calls": """
        def test_many_calls():
            for i in range(200000):
                assert inc(i) == i + 1
    """,
    "generator": """
        def test_long_generator():
            total = 0
            for i, x in enumerate(numbers(150000)):
                assert x == i
                total += 1
            assert total == 150000
    """,
    "big_result": """
        def test_big_result():
            result = perms(9)
            assert len(result) == 362880
            assert result[-1] == (8, 7, 6, 5, 4, 3, 2, 1, 0)
    """,
}


MORE = {
    "ok": """
        import random
        import time
        from concurrent.futures import ThreadPoolExecutor

        calls = 0


        def roll_all(n):
            return [random.randint(1, 6) for _ in range(n)]


        def around(fn):
            return [random.randint(1, 100), fn(), random.randint(1, 100)]


        def shuffled(xs):
            xs = list(xs)
            random.shuffle(xs)
            return xs


        def timed(fn):
            start = time.time()
            fn()
            return time.time() - start


        def submit_all(fn, items):
            with ThreadPoolExecutor(max_workers=2) as pool:
                futures = [pool.submit(fn, x) for x in items]
                return [f.result() for f in futures]


        def counted(n):
            global calls
            for i in range(n):
                calls += 1
                yield i * i


        def hue_of(r, g, b):
            import colorsys
            return colorsys.rgb_to_hsv(r, g, b)
    """,
    "wrong": """
        import random
        import time
        from concurrent.futures import ThreadPoolExecutor

        calls = 0


        def roll_all(n):
            return [random.randint(1, 6) for _ in range(n - 1)] + [1]


        def around(fn):
            return [random.randint(1, 100), random.randint(1, 100), fn()]


        def shuffled(xs):
            return sorted(xs)


        def timed(fn):
            fn()
            return 0.0


        def submit_all(fn, items):
            with ThreadPoolExecutor(max_workers=2) as pool:
                return [pool.submit(fn, x).result() for x in items[1:]]


        def counted(n):
            global calls
            for i in range(n):
                yield i * i
            calls += n


        def hue_of(r, g, b):
            import colorsys
            return colorsys.rgb_to_hsv(r, g, b)[0]
    """,
}

MORE_TESTS = {
    "patch_randint": """
        from unittest.mock import patch


        def test_randint_patched_by_module_name():
            with patch("random.randint", return_value=3):
                assert roll_all(4) == [3, 3, 3, 3]
    """,
    "seed_shuffle": """
        import random


        def test_shuffle_under_seed():
            random.seed(7)
            got = shuffled(range(10))
            random.seed(7)
            xs = list(range(10))
            random.shuffle(xs)
            assert got == xs


        def test_two_calls_under_one_seed_draw_on():
            random.seed(3)
            first, second = roll_all(3), roll_all(3)
            random.seed(3)
            assert first + second == [random.randint(1, 6) for _ in range(6)]
    """,
    "seed_callback": """
        import random


        def test_callback_draws_from_the_tests_own_generator():
            random.seed(5)
            got = around(lambda: 7)
            random.seed(5)
            assert got == [random.randint(1, 100), 7, random.randint(1, 100)]
    """,
    "time_patched": """
        import time


        def test_clock_patched(monkeypatch):
            ticks = iter([100.0, 102.5])
            monkeypatch.setattr(time, "time", lambda: next(ticks))
            assert timed(lambda: None) == 2.5
    """,
    "submit": """
        def test_submit_callbacks():
            assert submit_all(lambda x: x + 100, [1, 2, 3]) == [101, 102, 103]


        def test_callback_error_reaches_the_test():
            import pytest

            def bad(x):
                raise KeyError(x)

            with pytest.raises(KeyError):
                submit_all(bad, [1])
    """,
    "late_import": """
        def test_patch_of_a_module_imported_by_the_test(monkeypatch):
            import colorsys

            assert shuffled([1]) == [1]
            monkeypatch.setattr(colorsys, "rgb_to_hsv", lambda r, g, b: "patched")
            assert hue_of(1, 0, 0) == "patched"
    """,
    "state_after_run": """
        import solution


        def test_module_state_after_many_items():
            gen = solution.counted(100)
            for i in range(40):
                assert next(gen) == i * i
            assert solution.calls == 40
    """,
    "state_between_items": """
        import solution


        def test_module_state_between_items():
            gen = solution.counted(30)
            for i in range(30):
                assert next(gen) == i * i
                assert solution.calls == i + 1
    """,
}

# Left out of the corpus, each for a reason of its own: ``SUBCLASS_TESTS`` (a test's subclass
# of a candidate class cannot be instantiated: a named TypeError) and ``ASYNC_TESTS["run"]``
# (``asyncio.run`` in the test process: its event loop needs a socket pair, which the jail
# denies).
PAIRS = [
    *family("boundary-threads", THREADS, THREAD_TESTS),
    *family("boundary-built", BUILT, BUILT_TESTS),
    *family("boundary-state", STATE, STATE_TESTS),
    *family("boundary-patches", PATCHES, PATCH_TESTS),
    *family("boundary-more", MORE, MORE_TESTS),
    *family("boundary-zone", ASYNC, {"zone": ASYNC_TESTS["zone"]}),
    *family("boundary-load", LOAD, {k: LOAD_TESTS[k] for k in ("generator", "big_result")}),
]
