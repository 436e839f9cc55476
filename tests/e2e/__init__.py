"""tests/e2e: end-to-end tests against a real spaced and real VMs (see conftest.py, space.py)."""
