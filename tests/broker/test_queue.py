"""The turn queue: at most `max_turns` turns at once, the rest wait in line inside their deadline."""

from __future__ import annotations

import trio

from broker._queue import TurnQueue, default_max_turns


async def test_a_free_place_is_taken_at_once(autojump_clock):
    """Below the limit a turn waits for nothing."""
    queue = TurnQueue(2)
    async with queue.slot(trio.current_time() + 0.1) as slot:
        assert slot.admitted
        assert slot.queued == 0.0


async def test_turns_beyond_the_limit_wait_for_a_place(autojump_clock):
    """The third of three turns at a limit of two starts when the first ends."""
    queue = TurnQueue(2)
    waits: list[float] = []

    async def turn() -> None:
        async with queue.slot(trio.current_time() + 1.0) as slot:
            assert slot.admitted
            waits.append(slot.queued)
            await trio.sleep(0.01)

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(turn)
    assert sorted(waits) == [0.0, 0.0, 0.01]
    assert trio.current_time() == 0.02


async def test_a_turn_gives_up_when_it_could_no_longer_be_served(autojump_clock):
    """A turn leaves the line at its deadline less what served turns recently took."""
    queue = TurnQueue(1)
    async with queue.slot(1.0):
        await trio.sleep(0.03)
    assert queue.service == 0.03
    start = trio.current_time()
    async with queue.slot(start + 1.0), trio.open_nursery() as nursery:

        async def late() -> None:
            async with queue.slot(start + 0.1) as slot:
                assert not slot.admitted
                assert slot.queued == 0.1 - 0.03
                assert trio.current_time() == start + 0.07

        nursery.start_soon(late)
        await trio.sleep(0.5)


async def test_the_service_estimate_follows_served_turns(autojump_clock):
    """The first served turn sets the estimate; later ones move it by a fifth of the gap."""
    queue = TurnQueue(1)
    for seconds in (0.05, 0.1):
        async with queue.slot(10.0):
            await trio.sleep(seconds)
    assert abs(queue.service - (0.05 + 0.2 * 0.05)) < 1e-9


async def test_a_caller_cancelled_in_line_holds_no_place(autojump_clock):
    """A turn cancelled while waiting leaves the line at once and takes no place with it."""
    queue = TurnQueue(1)
    async with queue.slot(1.0):
        with trio.move_on_after(0.02):
            async with queue.slot(1.0):
                raise AssertionError("never admitted")  # pragma: no cover
        assert trio.current_time() == 0.02
    async with queue.slot(trio.current_time() + 0.1) as slot:
        assert slot.admitted
        assert slot.queued == 0.0


async def test_no_limit_serves_every_turn_at_once(autojump_clock):
    """`max_turns=None` queues nothing."""
    queue = TurnQueue(None)
    async with queue.slot(0.1) as a, queue.slot(0.1) as b:
        assert a.admitted
        assert b.admitted


def test_the_default_follows_the_cpus_and_is_at_least_two():
    """The default limit follows the machine, never below two turns."""
    assert default_max_turns() >= 2
