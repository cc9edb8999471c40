from topogov.adapters.ec2 import Pacer


class FakeClock:
    def __init__(self):
        self.t = 100.0
        self.slept = []

    def now(self):
        return self.t

    def sleep(self, s):
        self.slept.append(s)
        self.t += s


def call(pacer, clock, duration):
    pacer.acquire()
    clock.t += duration  # the call itself
    pacer.release()


def test_the_next_call_starts_one_interval_after_the_previous_one_ended():
    clock = FakeClock()
    pacer = Pacer(1.0, clock=clock.now, sleep=clock.sleep)
    for _ in range(3):
        call(pacer, clock, 0.25)
    # the first call goes at once; each next one waits a full interval after the last ended
    assert clock.slept == [1.0, 1.0]


def test_idle_time_is_not_banked():
    clock = FakeClock()
    pacer = Pacer(2.0, clock=clock.now, sleep=clock.sleep)
    call(pacer, clock, 0.0)
    clock.t += 10  # idle
    call(pacer, clock, 0.0)
    call(pacer, clock, 0.0)
    assert clock.slept == [0.5]


def test_rate_must_be_positive():
    import pytest

    with pytest.raises(ValueError, match="rate_per_s"):
        Pacer(0)
