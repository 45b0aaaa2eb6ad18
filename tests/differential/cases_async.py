"""asyncio: candidate ``async def`` functions driven by ``asyncio.run`` in the test (at module
level and inside test functions, alone or gathered by the test's own coroutine), and plain
candidate functions that run an event loop themselves (``asyncio.run`` over ``gather``, tasks,
``as_completed``, ``wait_for`` timeouts, queues, async generators). The event loop's self-pipe
is a ``socketpair``, which the jail's seccomp filter allows for ``AF_UNIX`` stream sockets
only (``sandbox/jailside/seccomp.py``).

Left out (a known gap of the boundary, not of this theme): a candidate coroutine driven by the
test's event loop that awaits a real future (``asyncio.sleep`` of more than 0, a task, a
``gather``, ``wait_for``), and ``await`` on a candidate coroutine inside the test's own
coroutine: the coroutine runs in the candidate process, where the test's loop is not running
(``tests/test_sandbox_async.py`` keeps them as strict xfails)."""

from __future__ import annotations

from .corpus import family

ASYNC = {
    "ok": """
        import asyncio


        async def double(x):
            await asyncio.sleep(0)
            return 2 * x


        async def total(xs):
            s = 0
            for x in xs:
                s += await double(x)
            return s


        async def safe_div(a, b):
            await asyncio.sleep(0)
            if b == 0:
                raise ZeroDivisionError("division by zero")
            return a / b


        def run_doubles(xs):
            async def main():
                return await asyncio.gather(*(double(x) for x in xs))
            return list(asyncio.run(main()))


        def finish_order(delays):
            async def one(i, d):
                await asyncio.sleep(d)
                return i

            async def main():
                tasks = [asyncio.create_task(one(i, d)) for i, d in enumerate(delays)]
                return [await t for t in asyncio.as_completed(tasks)]
            return asyncio.run(main())


        def with_timeout(seconds, limit):
            async def main():
                try:
                    await asyncio.wait_for(asyncio.sleep(seconds), timeout=limit)
                    return "done"
                except asyncio.TimeoutError:
                    return "timeout"
            return asyncio.run(main())


        def squares(n):
            async def gen():
                for i in range(n):
                    await asyncio.sleep(0)
                    yield i * i

            async def main():
                return [v async for v in gen()]
            return asyncio.run(main())


        def pipeline(items):
            async def main():
                queue = asyncio.Queue()
                out = []

                async def consumer():
                    while True:
                        item = await queue.get()
                        if item is None:
                            return
                        out.append(item.upper())

                task = asyncio.create_task(consumer())
                for item in items:
                    await queue.put(item)
                await queue.put(None)
                await task
                return out
            return asyncio.run(main())
    """,
    "blocking": """
        import asyncio
        import time


        async def double(x):
            return x + x


        async def total(xs):
            return sum([await double(x) for x in xs])


        async def safe_div(a, b):
            return a / b


        def run_doubles(xs):
            return [asyncio.run(double(x)) for x in xs]


        def finish_order(delays):
            return [i for _, i in sorted((d, i) for i, d in enumerate(delays))]


        def with_timeout(seconds, limit):
            if seconds > limit:
                return "timeout"
            time.sleep(seconds)
            return "done"


        def squares(n):
            return [i * i for i in range(n)]


        def pipeline(items):
            async def main():
                return [item.upper() for item in items]
            return asyncio.run(main())
    """,
    "wrong": """
        import asyncio


        async def double(x):
            await asyncio.sleep(0)
            return x * x


        async def total(xs):
            return len(xs)


        async def safe_div(a, b):
            await asyncio.sleep(0)
            if b == 0:
                return None
            return a // b


        def run_doubles(xs):
            async def main():
                return await asyncio.gather(*(double(x) for x in xs))
            return asyncio.run(main())


        def finish_order(delays):
            async def one(i, d):
                await asyncio.sleep(d)
                return i

            async def main():
                return await asyncio.gather(*(one(i, d) for i, d in enumerate(delays)))
            return list(asyncio.run(main()))


        def with_timeout(seconds, limit):
            async def main():
                await asyncio.sleep(min(seconds, limit))
                return "done"
            return asyncio.run(main())


        def squares(n):
            async def gen():
                for i in range(1, n):
                    yield i * i

            async def main():
                return [v async for v in gen()]
            return asyncio.run(main())


        def pipeline(items):
            async def main():
                queue = asyncio.Queue()
                for item in items:
                    await queue.put(item)
                return [queue.get_nowait() for _ in range(queue.qsize())]
            return asyncio.run(main())
    """,
    "raises": """
        import asyncio


        async def double(x):
            await asyncio.sleep(0)
            raise NotImplementedError("double")


        async def total(xs):
            raise RuntimeError("total")


        async def safe_div(a, b):
            return a / b


        def run_doubles(xs):
            async def main():
                return await asyncio.gather(*(double(x) for x in xs))
            return asyncio.run(main())


        def finish_order(delays):
            raise asyncio.CancelledError()


        def with_timeout(seconds, limit):
            async def main():
                await asyncio.wait_for(asyncio.sleep(seconds), timeout=limit)
                return "done"
            return asyncio.run(main())


        def squares(n):
            return asyncio.run([i * i for i in range(n)])


        def pipeline(items):
            async def main():
                return [item.upper() for item in items]
            return asyncio.run(main)
    """,
}

ASYNC_TESTS = {
    "module_level": """
        import asyncio

        assert asyncio.run(double(3)) == 6
        assert asyncio.run(total([1, 2, 3])) == 12
        assert run_doubles([1, 2, 3]) == [2, 4, 6]
    """,
    "functions": """
        import asyncio

        import pytest


        def test_double():
            assert asyncio.run(double(4)) == 8


        def test_total():
            assert asyncio.run(total([1, 2, 3])) == 12


        def test_safe_div():
            assert asyncio.run(safe_div(7, 2)) == 3.5


        def test_safe_div_by_zero():
            with pytest.raises(ZeroDivisionError):
                asyncio.run(safe_div(1, 0))


        def test_gathered_by_the_test():
            async def main():
                return await asyncio.gather(double(1), double(2), double(3))
            assert asyncio.run(main()) == [2, 4, 6]


        def test_run_doubles():
            assert run_doubles([5, 6]) == [10, 12]
    """,
    "loops_inside": """
        def test_finish_order():
            assert finish_order([0.06, 0.0, 0.03]) == [1, 2, 0]


        def test_timeout():
            assert with_timeout(1.0, 0.01) == "timeout"


        def test_no_timeout():
            assert with_timeout(0.0, 1.0) == "done"


        def test_squares():
            assert squares(4) == [0, 1, 4, 9]


        def test_pipeline():
            assert pipeline(["a", "b"]) == ["A", "B"]
    """,
    "parametrized": """
        import asyncio

        import pytest


        @pytest.mark.parametrize("x, want", [(0, 0), (1, 2), (-3, -6)])
        def test_double(x, want):
            assert asyncio.run(double(x)) == want


        @pytest.mark.parametrize("xs", [[], [2], [2, 2, 2]])
        def test_run_doubles(xs):
            assert run_doubles(xs) == [2 * x for x in xs]
    """,
    "new_loop": """
        import asyncio


        def test_run_until_complete():
            loop = asyncio.new_event_loop()
            try:
                assert loop.run_until_complete(double(21)) == 42
            finally:
                loop.close()


        def test_a_fresh_loop_each_time():
            assert [asyncio.run(double(i)) for i in range(3)] == [0, 2, 4]
            assert squares(3) == [0, 1, 4]
    """,
}

PAIRS = family("async", ASYNC, ASYNC_TESTS)
