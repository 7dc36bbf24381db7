"""Kubernetes client construction and paged listing (the client dagster-k8s uses)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes import client, config

from robodata.errors import ConfigError


def api_client(
    host: str | None = None, kubeconfig: str | None = None, context: str | None = None, in_cluster: bool = False
) -> client.ApiClient:
    """An ApiClient from an explicit host URL, a kubeconfig, or the in-cluster service account."""
    if host:
        cfg = client.Configuration()
        cfg.host = host
        return client.ApiClient(cfg)
    try:
        if in_cluster:
            config.load_incluster_config()
            return client.ApiClient()
        return config.new_client_from_config(config_file=kubeconfig, context=context)
    except (config.ConfigException, FileNotFoundError) as exc:
        raise ConfigError(f"cannot configure the Kubernetes client: {exc}") from exc


def list_all(fn: Callable[..., Any], page_size: int, **kwargs: Any) -> list[Any]:
    """Every item of a list call, following `continue` tokens page by page."""
    items: list[Any] = []
    token = None
    while True:
        page = fn(limit=page_size, _continue=token, **kwargs) if token else fn(limit=page_size, **kwargs)
        items.extend(page.items)
        token = page.metadata._continue
        if not token:
            return items


def to_json(api: client.ApiClient, obj: Any) -> Any:
    """A client model as the plain JSON the API server speaks (camelCase keys)."""
    return api.sanitize_for_serialization(obj)
