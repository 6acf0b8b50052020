import pytest

from reconciler.model.addresses import is_documentation_address


@pytest.mark.parametrize("ip", ["192.0.2.1", "198.51.100.250", "203.0.113.2", "2001:db8::1"])
def test_documentation_ranges_answer_nothing(ip: str) -> None:
    assert is_documentation_address(ip)


@pytest.mark.parametrize("ip", ["127.0.0.2", "10.0.0.1", "8.8.8.8", "203.0.114.1", "host", ""])
def test_other_addresses_are_real(ip: str) -> None:
    assert not is_documentation_address(ip)
