"""`robodata health repair`: one pass of cordon and stale-allocation repair (the cluster's command,
mounted in the `health` group beside `check` and `show`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import typer

from robodata.errors import ConfigError


def register(app: typer.Typer) -> None:
    from robodata.health.commands import health_app

    health_app.command("repair")(repair)


def repair(
    audit: str = typer.Option(..., help="audit Delta table"),
    health: str | None = typer.Option(None, help="node-health Delta table (needed to restore cordoned nodes)"),
    apply: bool = typer.Option(False, "--apply", help="make changes (default: dry-run, report only)"),
    host: str | None = typer.Option(None, help="API server URL (no auth), e.g. a loopback test server"),
    kubeconfig: str | None = typer.Option(None, help="kubeconfig path (default: $KUBECONFIG / ~/.kube/config)"),
    context: str | None = typer.Option(None, help="kubeconfig context"),
    in_cluster: bool = typer.Option(False, help="use the pod's service account"),
    config: Path | None = typer.Option(None, help="RepairConfig YAML"),
    state: Path | None = typer.Option(None, help="JSON file keeping first-seen/reported state between runs"),
) -> None:
    """One pass of cordon and stale-allocation repair; every action goes to the audit table."""
    from robodata.cluster.config import RepairConfig
    from robodata.cluster.kube import api_client
    from robodata.cluster.repair import run_repair
    from robodata.cluster.state import RepairState
    from robodata.config import load_yaml

    try:
        cfg = load_yaml(RepairConfig, config) if config else RepairConfig()
        api = api_client(host=host, kubeconfig=kubeconfig, context=context, in_cluster=in_cluster)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc)) from None
    cfg = dataclasses.replace(cfg, dry_run=not apply)
    st = RepairState()
    if state and state.exists():
        st.load_state_dict(json.loads(state.read_text()))
    from kubernetes.client.rest import ApiException
    from urllib3.exceptions import HTTPError

    try:
        with api:
            report = run_repair(api, cfg, audit_uri=audit, health_uri=health, state=st)
    except (ApiException, HTTPError) as exc:
        typer.echo(f"error: Kubernetes API: {exc}", err=True)
        raise typer.Exit(2) from None
    if state:
        tmp = state.with_suffix(state.suffix + ".partial")
        tmp.write_text(json.dumps(st.state_dict()))
        tmp.replace(state)
    typer.echo(report.summary())
