"""How every asset, asset check and op is declared: with its step kind, and with one ConfigError adapter.

    from robodata_dagster.lib import steps

    @steps.asset("encode", partitions_def=INGEST_BATCH, group_name="ingest")
    def episodes(context, ingest: IngestResource): ...

`kind` ("light" | "encode" | "train", lib/step_kinds.py) sets the op tags the k8s_job_executor reads
for the step's pod (`dagster-k8s/config`: requests/limits, node selector, tolerations), the
`robodata/step-kind` tag the executors' tag_concurrency_limits key on, and the Dagster `pool`
(instance-wide slots). A `robodata.errors.ConfigError` raised by the body (a bad spec, config or
setting: a user's mistake that no retry fixes) becomes a `dg.Failure` that is never retried, with
the error's message (it names the file and field): not by the step's RetryPolicy (`allow_retries=
False`), and not by the instance's run retries either: the run is tagged `dagster/max_retries: 0`
before it fails (run retries read the run's tags when it fails), and `robodata/failure: config`, which
the catalog automation reads (a partition whose last run failed on config waits for its file to
change). tests/platform/test_step_kinds.py walks the loaded definitions and fails on any asset,
check or op declared otherwise.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import dagster as dg

from robodata.errors import ConfigError
from robodata_dagster.lib.step_kinds import step_pool, step_resources

F = TypeVar("F", bound=Callable[..., Any])
ADAPTED = "__robodata_config_errors_fail__"


FAILURE_TAG = "robodata/failure"
CONFIG_FAILURE_TAGS = {"dagster/max_retries": "0", FAILURE_TAG: "config"}


def config_failure(exc: ConfigError) -> dg.Failure:
    """The non-retried failure a ConfigError becomes."""
    return dg.Failure(description=f"{type(exc).__name__}: {exc}", allow_retries=False)


def _no_run_retries(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Tag the run of the step's context (if any) so that run retries leave it failed."""
    contexts = (dg.AssetExecutionContext, dg.OpExecutionContext, dg.AssetCheckExecutionContext)
    context = next((a for a in (*args, *kwargs.values()) if isinstance(a, contexts)), None)
    if isinstance(context, (dg.AssetCheckExecutionContext, dg.AssetExecutionContext)):
        context = context.op_execution_context
    if context is not None and context.run_id:
        try:
            context.instance.add_run_tags(context.run_id, CONFIG_FAILURE_TAGS)
        except Exception as tag_exc:  # a test context without a stored run: the Failure still stands
            context.log.warning(f"could not tag the run as a config failure: {tag_exc}")


def config_errors_fail(fn: F) -> F:
    """`fn` with every ConfigError it raises turned into a non-retried dg.Failure (generators too)."""
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def gen(*args: Any, **kwargs: Any) -> Any:
            try:
                yield from fn(*args, **kwargs)
            except ConfigError as exc:
                _no_run_retries(args, kwargs)
                raise config_failure(exc) from exc

        wrapped: Any = gen
    else:

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except ConfigError as exc:
                _no_run_retries(args, kwargs)
                raise config_failure(exc) from exc

        wrapped = call
    setattr(wrapped, ADAPTED, True)
    return wrapped


def is_adapted(fn: Callable[..., Any]) -> bool:
    return bool(getattr(fn, ADAPTED, False))


def _tags(kind: str, extra: dict[str, Any] | None) -> dict[str, Any]:
    return {**step_resources(kind), **(extra or {})}


def asset(kind: str, *, op_tags: dict[str, Any] | None = None, **kwargs: Any) -> Callable[[Callable[..., Any]], Any]:
    """`dg.asset` for a step of `kind`."""

    def deco(fn: Callable[..., Any]) -> dg.AssetsDefinition:
        return dg.asset(op_tags=_tags(kind, op_tags), pool=step_pool(kind), **kwargs)(config_errors_fail(fn))

    return deco


def multi_asset_check(
    kind: str, *, op_tags: dict[str, Any] | None = None, **kwargs: Any
) -> Callable[[Callable[..., Any]], Any]:
    """`dg.multi_asset_check` for a step of `kind`."""

    def deco(fn: Callable[..., Any]) -> dg.AssetChecksDefinition:
        return dg.multi_asset_check(op_tags=_tags(kind, op_tags), pool=step_pool(kind), **kwargs)(
            config_errors_fail(fn)
        )

    return deco


def op(kind: str, *, tags: dict[str, Any] | None = None, **kwargs: Any) -> Callable[[Callable[..., Any]], Any]:
    """`dg.op` for a step of `kind` (ops of non-asset jobs)."""

    def deco(fn: Callable[..., Any]) -> dg.OpDefinition:
        return dg.op(tags=_tags(kind, tags), pool=step_pool(kind), **kwargs)(config_errors_fail(fn))

    return deco
