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


def test_pacer_spaces_calls_at_the_rate():
    clock = FakeClock()
    pacer = Pacer(1.0, clock=clock.now, sleep=clock.sleep)
    for _ in range(3):
        pacer.acquire()
    # the first call goes at once, the next two wait one second each
    assert clock.slept == [1.0, 1.0]


def test_pacer_does_not_bank_idle_time_beyond_one_token():
    clock = FakeClock()
    pacer = Pacer(2.0, clock=clock.now, sleep=clock.sleep)
    pacer.acquire()
    clock.t += 10  # idle
    pacer.acquire()
    pacer.acquire()
    assert clock.slept == [0.5]
