"""Reading a broker's Prometheus endpoint in tests."""
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def scrape(url: str) -> dict:
    """``{(sample name, frozenset(labels)): value}`` from the endpoint."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)
