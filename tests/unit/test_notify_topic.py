"""Judging whether an ntfy topic is easy to guess (for doctor)."""

from __future__ import annotations

import random

import pytest

from reconciler.adapters.notify import MIN_RANDOM_BITS, guessable_topic, topic_random_bits


@pytest.mark.parametrize(
    "topic",
    [
        "tpu",
        "alerts",
        "tpu-alerts",
        "TpuAlerts",
        "my-tpus-2025",
        "tpu-alerts-for-alice-2024",
        "tpu_v6e64_notices",
        "tpu-8f3a9c1e",  # 32 random bits is still guessable by brute force
    ],
)
def test_word_like_or_short_topics_are_flagged(topic: str) -> None:
    reason = guessable_topic(topic)
    assert reason is not None and topic in reason and "random" in reason


@pytest.mark.parametrize(
    "topic",
    [
        "tpu-k7f3x9q2m1z8w4",
        "b1300459-e43b-46b8-8b90-c1c3118f8d37",  # a uuid4
        "7d38381b2a8dff9c",
        "qxzkvjwptmbrcl",
    ],
)
def test_topics_with_a_random_part_pass(topic: str) -> None:
    assert guessable_topic(topic) is None
    assert topic_random_bits(topic) >= MIN_RANDOM_BITS


def test_the_suggested_kind_of_topic_always_passes() -> None:
    rng = random.Random(20261130)  # deterministic: the suggestion is tpu-<24 random hex digits>
    for _ in range(500):
        topic = f"tpu-{rng.getrandbits(96):024x}"
        assert guessable_topic(topic) is None, topic


def test_empty_topic_means_disabled_not_weak() -> None:
    assert guessable_topic("") is None


def test_invalid_topic_is_reported() -> None:
    reason = guessable_topic("tpu alerts/x")
    assert reason is not None and "not a valid topic" in reason
