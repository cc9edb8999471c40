"""A transaction cancelled for a conflict (a burst on one counter) is retried; a failed condition is not."""

import pytest

from topogov.adapters.ledger import DynamoLedger


class Cancelled(Exception):
    def __init__(self, *codes):
        super().__init__("cancelled")
        self.response = {"CancellationReasons": [{"Code": c} for c in codes]}


class FakeDynamo:
    class exceptions:
        TransactionCanceledException = Cancelled

    def __init__(self, failures):
        self.failures = list(failures)
        self.calls = 0

    def transact_write_items(self, TransactItems):
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)


def test_conflicts_are_retried_until_the_transaction_goes_through():
    ddb = FakeDynamo([Cancelled("TransactionConflict", "None"), Cancelled("None", "TransactionConflict")])
    DynamoLedger(ddb, "l", "c")._transact([{}])
    assert ddb.calls == 3


def test_a_failed_condition_is_not_retried():
    ddb = FakeDynamo([Cancelled("ConditionalCheckFailed", "None")])
    with pytest.raises(Cancelled):
        DynamoLedger(ddb, "l", "c")._transact([{}])
    assert ddb.calls == 1


def test_conflicts_give_up_after_the_attempts():
    ddb = FakeDynamo([Cancelled("TransactionConflict")] * 10)
    with pytest.raises(Cancelled):
        DynamoLedger(ddb, "l", "c")._transact([{}], attempts=3)
    assert ddb.calls == 3
