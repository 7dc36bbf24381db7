"""Test doubles and throwaway services for tests and benchmarks (never used by production code paths).

fake_apiserver  a Kubernetes API server double (nodes, pods, leases; patches, watches) on loopback
fake_nvml       an NVML double with real-shaped values and NVMLErrors (`robodata health check --nvml-backend fake`)
services        a private PostgreSQL cluster and a moto S3 server on loopback
browser         headless Chromium over the DevTools protocol (UI tests and screenshots)

Installed with robodata (`pip install -e .`); the Dagster-free core never imports it at module level.
"""
