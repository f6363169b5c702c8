"""The balanced assignment of due-index shards to live beats (``hbgw/state/beat_registry.py``).

Pure functions of the live names and the shard count: every replica must compute the same
owners, each beat owns ``S // n`` or ``S // n + 1`` shards, and a beat joining or leaving moves
a bounded number of shards.
"""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from hbgw.state.beat_registry import assign_shards, shard_balance, shards_of

SHARD_COUNTS = (1, 3, 7, 16, 64, 100)


def names(n: int, seed: int = 0) -> list[str]:
    # Names shaped like beat_name(): host, pid, random suffix.
    rng = random.Random(seed)
    return [f"host-{rng.randrange(1, 99999)}-{rng.getrandbits(24):06x}" for _ in range(n)]


def counts(beats: list[str], shards: int) -> list[int]:
    owners = Counter(assign_shards(beats, shards))
    return sorted(owners.get(beat, 0) for beat in beats)


@pytest.mark.parametrize("shards", SHARD_COUNTS)
@pytest.mark.parametrize("n", range(1, 9))
def test_each_beat_owns_the_floor_or_the_ceiling_of_its_share(n: int, shards: int) -> None:
    beats = names(n, seed=n * 1000 + shards)
    owned = counts(beats, shards)
    low, high = shards // n, math.ceil(shards / n)
    assert all(low <= c <= high for c in owned), owned
    assert sum(owned) == shards
    assert owned.count(high) == (shards % n or n)  # the remainder goes to exactly that many
    if shards < n:  # some own one shard, the rest none: nobody owns two while another has none
        assert owned == [0] * (n - shards) + [1] * shards
    assert shard_balance(owned) == (round(low / high, 3) if shards >= n else 1.0)


@pytest.mark.parametrize("shards", SHARD_COUNTS)
def test_every_shard_has_exactly_one_owner_among_the_live_beats(shards: int) -> None:
    for n in range(1, 9):
        beats = names(n, seed=n)
        owned = {beat: shards_of(beat, beats, shards) for beat in beats}
        assert sorted(s for mine in owned.values() for s in mine) == list(range(shards))
        for shard, owner in enumerate(assign_shards(beats, shards)):
            assert owner in beats and shard in owned[owner]
    assert shards_of("a", [], 8) == [] and assign_shards([], 8) == ()
    assert shards_of("not-live", ["a", "b"], 8) == []


def test_the_assignment_depends_on_the_set_of_names_only() -> None:
    beats = names(6, seed=7)
    expected = assign_shards(beats, 64)
    for seed in range(5):
        shuffled = beats[:]
        random.Random(seed).shuffle(shuffled)
        assert assign_shards(shuffled, 64) == expected
        assert assign_shards(shuffled + shuffled[:2], 64) == expected  # a name read twice
    assert assign_shards(tuple(reversed(beats)), 64) == expected


def moved(before: list[str], after: list[str], shards: int) -> int:
    old, new = assign_shards(before, shards), assign_shards(after, shards)
    return sum(1 for a, b in zip(old, new, strict=True) if a != b)


@pytest.mark.parametrize("shards", (16, 64, 100))
@pytest.mark.parametrize("n", range(1, 8))
def test_a_beat_joining_or_leaving_moves_a_bounded_number_of_shards(n: int, shards: int) -> None:
    """Bound: twice the share of the beat that joined or left, plus one shard per beat.

    The least any balanced scheme can move is that beat's share (what it takes or leaves); the
    shifted capacities push on a few more. Plain rendezvous moved exactly the share but was
    not balanced.
    """
    for seed in range(10):
        larger = names(n + 1, seed=seed * 100 + n)
        bound = 2 * math.ceil(shards / (n + 1)) + (n + 1)
        joiner = larger[-1]
        assert moved(larger[:-1], larger, shards) <= bound
        # The joiner's shards are all moved ones: the least that must move.
        assert len(shards_of(joiner, larger, shards)) <= moved(larger[:-1], larger, shards)
        leaver = larger[seed % (n + 1)]
        smaller = [b for b in larger if b != leaver]
        assert len(shards_of(leaver, larger, shards)) <= moved(larger, smaller, shards) <= bound


def test_balance_leaves_out_the_beats_that_must_own_none() -> None:
    assert shard_balance([4, 4, 4, 4]) == 1.0
    assert shard_balance([4, 5, 2, 5]) == 0.4  # main's rendezvous split of 16 over 4 beats
    assert shard_balance([1, 1, 1, 0, 0]) == 1.0  # 3 shards over 5 beats: as even as it gets
    assert shard_balance([2, 1, 0, 0, 0]) == 0.0  # one owns two while another owns none
    assert shard_balance([]) == 1.0


def test_a_shard_count_under_one_is_refused() -> None:
    with pytest.raises(ValueError, match="shards must be >= 1"):
        assign_shards(["a"], 0)
