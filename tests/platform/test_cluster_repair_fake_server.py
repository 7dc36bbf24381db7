"""The loopback API server answers the real client the way the API server does."""

from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from robodata.cluster.kube import api_client, list_all
from robodata.cluster.patching import PatchError, apply_json_patch, apply_merge_patch
from robodata_testing.fake_apiserver import FakeApiServer

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "k8s"


@pytest.fixture
def core():
    with (
        FakeApiServer.from_fixtures(FIX / "nodelist.json", FIX / "podlist.json") as srv,
        api_client(host=srv.url) as api,
    ):
        yield client.CoreV1Api(api), srv


def test_reads_deserialize_into_client_models(core):
    api, _ = core
    node = api.read_node("gpu-node-02")
    assert isinstance(node, client.V1Node) and node.spec.unschedulable is True
    assert node.spec.taints[0].time_added is not None and node.status.allocatable["nvidia.com/gpu"] == "8"
    pods = api.list_pod_for_all_namespaces(field_selector="spec.nodeName=gpu-node-03,status.phase!=Failed")
    names = sorted(p.metadata.name for p in pods.items)
    assert len(names) == 2 and names[0] == "dagster-run-dead-worker-0-m3c8v"
    assert names[1].startswith("nvidia-device-plugin-daemonset-")  # the Failed launcher is filtered out
    labelled = api.list_namespaced_pod("training", label_selector="dagster/run-id=run-dead")
    assert len(labelled.items) == 2
    assert len(list_all(api.list_node, 3)) == 7


def test_errors_are_status_objects(core):
    api, _ = core
    with pytest.raises(ApiException) as exc:
        api.read_node("nope")
    assert exc.value.status == 404 and '"reason": "NotFound"' in exc.value.body


def test_merge_patch_with_stale_resource_version_conflicts(core):
    api, _ = core
    with pytest.raises(ApiException) as exc:
        api.patch_node("gpu-node-01", {"metadata": {"resourceVersion": "1", "labels": {"x": "y"}}})
    assert exc.value.status == 409
    rv = api.read_node("gpu-node-01").metadata.resource_version
    patched = api.patch_node("gpu-node-01", {"metadata": {"resourceVersion": rv, "labels": {"x": "y"}}})
    assert patched.metadata.labels["x"] == "y" and patched.metadata.resource_version != rv


def test_delete_with_finalizers_marks_then_patch_removes(core):
    api, srv = core
    name, ns = "dagster-run-live-worker-0-x7k2p", "training"
    uid = api.read_namespaced_pod(name, ns).metadata.uid
    with pytest.raises(ApiException) as exc:
        api.delete_namespaced_pod(name, ns, body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="x")))
    assert exc.value.status == 409
    api.delete_namespaced_pod(name, ns, body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid)))
    assert api.read_namespaced_pod(name, ns).metadata.deletion_timestamp is not None  # graceful: still there
    api.delete_namespaced_pod(name, ns, grace_period_seconds=0)
    with pytest.raises(ApiException):
        api.read_namespaced_pod(name, ns)


def test_patch_documents():
    doc = {"a": {"b/c": 1, "l": [1, 2]}}
    assert apply_json_patch(
        doc, [{"op": "remove", "path": "/a/b~1c"}, {"op": "add", "path": "/a/l/-", "value": 3}]
    ) == {"a": {"l": [1, 2, 3]}}
    with pytest.raises(PatchError) as exc:
        apply_json_patch(doc, [{"op": "test", "path": "/a/b~1c", "value": 2}])
    assert exc.value.code == 422
    assert apply_merge_patch(doc, {"a": {"b/c": None, "n": 1}}) == {"a": {"l": [1, 2], "n": 1}}
    assert doc == {"a": {"b/c": 1, "l": [1, 2]}}  # inputs untouched


def test_shift_times_moves_every_timestamp():
    from datetime import timedelta

    with FakeApiServer.from_fixtures(FIX / "leaselist.json") as srv:
        lease = srv.store.get("leases", "robodata", "robodata-alloc-gpu-node-03")
        assert lease["spec"]["renewTime"] == "2026-11-30T08:59:30.000000Z"
        srv.store.shift_times(timedelta(days=400, seconds=1))
        assert lease["spec"]["renewTime"] == "2028-01-04T08:59:31.000000Z"
        assert lease["metadata"]["creationTimestamp"] == "2027-12-07T14:31:08Z"
