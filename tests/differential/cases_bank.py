"""A candidate class with state, a property, class and static methods and an exception
class with attributes, met by ``pytest.raises`` (``match``, ``excinfo.value`` attributes),
plain test functions, ``unittest.TestCase`` with ``setUpClass`` and ``assertRaises``, and a
test that catches ``Exception``."""

from __future__ import annotations

from .corpus import family

ACCOUNT = {
    "ok": """
        class InsufficientFunds(Exception):
            def __init__(self, balance, amount):
                super().__init__(f"cannot withdraw {amount}: balance is {balance}")
                self.balance = balance
                self.amount = amount


        class Account:
            interest_rate = 0.02
            count = 0

            def __init__(self, owner, balance=0):
                self.owner = owner
                self._balance = balance
                Account.count += 1

            @property
            def balance(self):
                return self._balance

            def deposit(self, amount):
                if amount <= 0:
                    raise ValueError("deposit must be positive")
                self._balance += amount
                return self._balance

            def withdraw(self, amount):
                if amount > self._balance:
                    raise InsufficientFunds(self._balance, amount)
                self._balance -= amount
                return self._balance

            @classmethod
            def joint(cls, a, b):
                return cls(f"{a} & {b}")

            @staticmethod
            def fee(amount):
                return round(amount * 0.01, 2)
    """,
    "overdraft": """
        class InsufficientFunds(Exception):
            pass


        class Account:
            interest_rate = 0.02
            count = 0

            def __init__(self, owner, balance=0):
                self.owner = owner
                self.balance = balance

            def deposit(self, amount):
                self.balance += amount
                return self.balance

            def withdraw(self, amount):
                self.balance -= amount
                return self.balance

            @classmethod
            def joint(cls, a, b):
                return cls(a + " & " + b)

            @staticmethod
            def fee(amount):
                return amount // 100
    """,
    "plain_error": """
        class InsufficientFunds(ValueError):
            pass


        class Account:
            interest_rate = 0.02
            count = 0

            def __init__(self, owner, balance=0):
                self.owner, self.balance = owner, balance
                type(self).count += 1

            def deposit(self, amount):
                if amount <= 0:
                    raise ValueError("deposit must be positive")
                self.balance += amount
                return self.balance

            def withdraw(self, amount):
                if amount > self.balance:
                    raise InsufficientFunds("insufficient funds")
                self.balance -= amount
                return self.balance

            @classmethod
            def joint(cls, a, b):
                return cls(f"{a} & {b}")

            @staticmethod
            def fee(amount):
                return round(amount * 0.01, 2)
    """,
}
ACCOUNT_TESTS = {
    "exception_attrs": """
        import pytest
        from solution import Account, InsufficientFunds


        def test_withdraw_too_much():
            acct = Account("ann", 50)
            with pytest.raises(InsufficientFunds, match="balance is 50") as exc:
                acct.withdraw(80)
            assert exc.value.amount == 80
            assert exc.value.balance == 50
            assert acct.balance == 50
    """,
    "methods": """
        def test_deposit_withdraw():
            acct = Account("bob")
            assert acct.deposit(100) == 100
            assert acct.withdraw(30) == 70
            assert acct.balance == 70
            assert acct.owner == "bob"

        def test_class_and_static():
            joint = Account.joint("a", "b")
            assert joint.owner == "a & b"
            assert isinstance(joint, Account)
            assert Account.fee(250) == 2.5
            assert Account.interest_rate == 0.02
    """,
    "unittest_raises": """
        import unittest


        class AccountTests(unittest.TestCase):
            @classmethod
            def setUpClass(cls):
                cls.before = Account.count

            def test_counts_instances(self):
                Account("x")
                Account("y")
                self.assertEqual(Account.count, self.before + 2)

            def test_bad_deposit(self):
                acct = Account("z", 5)
                with self.assertRaises(ValueError):
                    acct.deposit(-1)
                self.assertEqual(acct.balance, 5)

            def test_insufficient_is_exception(self):
                self.assertTrue(issubclass(InsufficientFunds, Exception))
                with self.assertRaises(InsufficientFunds):
                    Account("q", 1).withdraw(2)
    """,
    "catch_base": """
        def test_catch_by_base():
            acct = Account("c", 10)
            try:
                acct.withdraw(11)
            except Exception as err:
                assert type(err).__name__ == "InsufficientFunds"
                assert "11" in str(err)
            else:
                raise AssertionError("no exception")
    """,
}

PAIRS = family("account", ACCOUNT, ACCOUNT_TESTS)
