"""Super-stream hash routing reproduces the Java client's MurmurHash3 (x86 32-bit, seed
104729, unsigned), using the hash values from the Java client's test suite."""

from __future__ import annotations

import mmh3
import pytest

from streamwire.rabbitmq import hash_partition
from streamwire.rabbitmq.superstream import JAVA_HASH_SEED

JAVA_VECTORS = {"hello": 1321743225, "brave": 3825276426, "new": 2970740106, "world": 2453398188}


@pytest.mark.parametrize(("key", "expected"), sorted(JAVA_VECTORS.items()))
def test_java_hash_vectors(key: str, expected: int) -> None:
    assert mmh3.hash(key.encode(), JAVA_HASH_SEED, signed=False) == expected
    for partitions in (1, 2, 3, 7):
        assert hash_partition(key, partitions) == expected % partitions
        assert hash_partition(key.encode(), partitions) == expected % partitions


def test_seed_42_vector_from_the_java_suite() -> None:
    assert mmh3.hash(b"hello", 42, signed=False) == 3806057185


def test_non_ascii_keys_hash_their_utf8_bytes() -> None:
    assert hash_partition("café", 5) == hash_partition("café".encode(), 5)
    assert hash_partition("café", 5) == mmh3.hash("café".encode(), 104729, signed=False) % 5
