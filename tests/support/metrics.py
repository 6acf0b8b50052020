"""Scraping and checking the controller's ``/metrics`` in tests: over real HTTP, parsed by
prometheus_client's own text parser."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import httpx
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from reconciler.core import metrics as m
from reconciler.runtime.backends import STATE_WORDS


def scrape(url: str) -> dict[str, Metric]:
    """Families by name (a counter's without ``_total``, as the parser names them)."""
    response = httpx.get(url, timeout=5.0)
    response.raise_for_status()
    assert response.headers["content-type"].startswith("text/plain")
    return {f.name: f for f in text_string_to_metric_families(response.text)}


def value(families: Mapping[str, Metric], name: str, suffix: str = "", **labels: str) -> float:
    """The sum of the samples of ``name`` + ``suffix`` (``_total``, ``_count``, ``_sum``)
    whose labels include ``labels``; 0 when there are none."""
    family = families.get(m.PREFIX + name)
    if family is None:
        return 0.0
    return sum(
        s.value
        for s in family.samples
        if s.name == family.name + suffix and labels.items() <= s.labels.items()
    )


def label_problems(families: Iterable[Metric], zones: Iterable[str] = ()) -> list[str]:
    """Every label value outside its documented set (docs/operations.md, "Metrics")."""
    allowed_zones = m.CATALOGUE_ZONES | set(zones) | {m.OTHER}
    problems = []
    for family in families:
        if not family.name.startswith(m.PREFIX):
            continue
        for sample in family.samples:
            for label, text in sample.labels.items():
                if label == "le":
                    continue
                if label == "zone":
                    ok = text in allowed_zones
                elif label == "accelerator":
                    ok = text == m.OTHER or m.accelerator_label(text, m.Known()) == text
                else:
                    short = family.name.removeprefix(m.PREFIX)
                    ok = text in m.allowed_values(short, label, STATE_WORDS)
                if not ok:
                    problems.append(f"{sample.name}{{{label}={text!r}}}")
    return problems
