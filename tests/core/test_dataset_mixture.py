"""Issue 37: the loader over a manifest that mixes corpora (robodata.dataset.mixture): padding and
masks, camera aliases and roles, per-corpus statistics, mixture weights, and the export per corpus."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.mixing_data import ALIASES, CORPORA, build
from robodata.catalog.table import Catalog
from robodata.container import EpisodeReader
from robodata.curate.manifest import read_manifest
from robodata.curate.run import curate
from robodata.curate.spec import spec_from_dict
from robodata.dataset import normstats
from robodata.dataset.mixpattern import MixPattern, bind
from robodata.dataset.mixture import MixedDataset
from robodata.errors import ConfigError

PATTERN = {
    "name": "mix",
    "hz": 10,
    "cameras": ALIASES,
    "camera": {"length": 2, "offset": -1},
    "state": {"length": 1},
    "action": {"length": 6},
    "resize": [32, 48],
    "anchor_stride_s": 0.5,
}


def _manifest(tmp, weights: dict | None = None, name: str = "mix"):
    rows = build(tmp / "eps", 2, 5.0)
    cat = Catalog(str(tmp / f"cat-{name}"))
    cat.backfill(rows)
    mix = {"by": "source_dataset", "weights": weights or {}}
    spec = spec_from_dict({"version": 1, "name": name, "mix": mix, "split": {"val_fraction": 0}})
    info, _ = curate(spec, cat, tmp / "m")
    return info.path, read_manifest(info.path)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    return _manifest(tmp_path_factory.mktemp("mix"))


def _stream(uri: str, stream: str) -> tuple[np.ndarray, np.ndarray, float]:
    r = EpisodeReader.open(uri)
    win = r.read_window(0.0, r.meta.duration_s + 1.0, [stream])
    rate = r.meta.streams[stream].rate_hz
    r.close()
    return win[stream].t, win[stream].data.reshape(len(win[stream].t), -1), rate


def test_padding_and_masks_hold_each_corpus_own_values(mixed):
    _, m = mixed
    ds = MixedDataset(m, MixPattern.from_dict(PATTERN))
    assert ds.unusable == {} and ds.corpora == sorted(c.name for c in CORPORA)
    assert ds.dims == {"state": 14, "action": 14}
    b = ds.batch(list(range(len(ds))))
    rows = m.to_pylist()
    for i in range(len(ds)):
        row = rows[int(b["episode_index"][i])]
        for role in ("state", "action"):
            t, data, rate = _stream(row["uri"], row[f"{role}_stream"])
            w = PATTERN[role]
            d = data.shape[1]
            assert b[f"{role}_mask"][i].tolist() == [True] * d + [False] * (14 - d)
            assert not b[f"{role}"][i, :, d:].any()  # padding is zeros
            anchor = float(b["t"][i])
            for k in range(w["length"]):
                target = anchor + round((w.get("offset", 0) + k) * rate / 10) / rate
                j = int(np.argmin(np.abs(t - target)))
                if bool(b[f"{role}_is_pad"][i, k]):
                    continue
                assert np.array_equal(b[role][i, k, :d].numpy(), data[j]), (row["episode_id"], role, k)
        cams = list(row["cameras"] or [])
        assert bool(b["front_present"][i]) == bool(cams)  # every camera corpus has a front by alias or role
        assert bool(b["wrist_present"][i]) == ("cam_left_wrist" in cams)
        if not b["wrist_present"][i]:
            assert not b["wrist"][i].any() and b["wrist_is_pad"][i].all()  # a missing camera: zeros, masked
        else:
            assert b["wrist"][i].any()


def test_aliases_and_catalog_roles_bind_cameras():
    pat = MixPattern.from_dict({**PATTERN, "cameras": {"front": ["image"], "wrist": []}})
    rates = json.dumps({"cam_high": 20, "cam_left_wrist": 20, "image_0": 5, "image": 10, "s": 10, "a": 10})
    aloha = bind(pat, ["cam_high", "cam_left_wrist"], ["front", "wrist"], "s", "a", rates)
    assert (aloha.stream("front"), aloha.stream("wrist")) == ("cam_high", "cam_left_wrist")  # by the catalog's roles
    assert bind(pat, ["image"], [""], "s", "a", rates).stream("front") == "image"  # by alias
    bridge = bind(pat, ["image_0"], [""], "s", "a", rates)
    assert bridge.stream("front") is None and bridge.why_unusable() is None  # neither: masked, not another camera
    assert bind(pat, [], [], "", "", rates).why_unusable() is not None
    with pytest.raises(ConfigError, match="resize"):
        MixPattern.from_dict({**PATTERN, "resize": None})


def test_per_corpus_stats_equal_a_numpy_pass_and_live_beside_the_manifest(mixed):
    path, m = mixed
    stats = normstats.load_or_compute(path, m)
    side = normstats.stats_path(path)
    doc = json.loads(Path(side).read_text())
    assert doc["manifest_hash"] == m.schema.metadata[b"robodata.manifest_hash"].decode()
    rows = m.to_pylist()
    for corpus in {r["source_dataset"] for r in rows}:
        for role in ("state", "action"):
            x = np.concatenate(
                [_stream(r["uri"], r[f"{role}_stream"])[1] for r in rows if r["source_dataset"] == corpus]
            ).astype(np.float64)
            s = stats[corpus][role]
            for key, want in (("mean", x.mean(0)), ("std", x.std(0)), ("min", x.min(0)), ("max", x.max(0))):
                np.testing.assert_allclose(s[key], want, rtol=1e-12, atol=1e-9)
    # a stats file of another manifest is not used: recomputed and replaced
    doc["manifest_hash"], doc["corpora"] = "0" * 64, {}
    Path(side).write_text(json.dumps(doc))
    assert normstats.load_or_compute(path, m) == stats
    ds = MixedDataset(m, MixPattern.from_dict(PATTERN), stats=stats, normalize=True)
    raw = MixedDataset(m, MixPattern.from_dict(PATTERN)).batch([0, 1])
    b = ds.batch([0, 1])
    c = ds.corpora[int(b["corpus"][0])]
    mean, std = (np.array(stats[c]["state"][k], np.float64) for k in ("mean", "std"))
    d = len(mean)
    want = (raw["state"][0, 0, :d].double().numpy() - mean) / std
    np.testing.assert_allclose(b["state"][0, 0, :d].numpy(), want, rtol=1e-5, atol=1e-5)


def test_a_mixture_weight_is_honoured_within_sampling_error(tmp_path):
    weights = {"aloha_sim": 4, "bridge": 1, "pusht": 1, "go2": 2}
    _, m = _manifest(tmp_path, weights, "weighted")
    ds = MixedDataset(m, MixPattern.from_dict(PATTERN))
    rng = np.random.default_rng(0)
    n = 4000
    picks = rng.integers(0, len(ds), n)
    corpus = np.array([ds.corpora.index(CORPORA_BY_GROUP[g]) for g in (ds.locate(int(i))[0] for i in picks)])
    total = sum(weights.values())
    for name, w in weights.items():
        p = w / total
        got = float((corpus == ds.corpora.index(name)).mean())
        assert abs(got - p) < 4 * np.sqrt(p * (1 - p) / n) + 1.0 / len(ds), (name, got, p)


CORPORA_BY_GROUP: dict[int, str] = {}


@pytest.fixture(autouse=True)
def _groups(monkeypatch):
    """Group -> corpus of the dataset under test (each synthetic corpus has one binding)."""
    real = MixedDataset._bind_groups

    def bind_groups(self, manifest, cache, sub):
        real(self, manifest, cache, sub)
        names = normstats.corpus_names(manifest)
        CORPORA_BY_GROUP.clear()
        CORPORA_BY_GROUP.update({g: names[int(grp.rows[0])] for g, grp in enumerate(self.groups)})

    monkeypatch.setattr(MixedDataset, "_bind_groups", bind_groups)


def test_export_per_corpus_writes_one_dataset_per_robot_type_or_refuses_naming_the_conflict(mixed, tmp_path):
    from robodata.export.per_corpus import export_per_corpus

    _, m = mixed
    rows = m.to_pylist()
    out = export_per_corpus(rows, tmp_path / "x")
    assert sorted(out) == ["aloha", "go2", "pusht", "widowx"] and all("dir" in v for v in out.values())
    info = json.loads((tmp_path / "x" / "widowx" / "meta" / "info.json").read_text())
    assert info["robot_type"] == "widowx"
    clash = [r | {"robot_type": "same"} for r in rows if r["source_dataset"] in ("bridge", "pusht")]
    refused = export_per_corpus(clash, tmp_path / "y")["same"]
    assert "refused" in refused and "episode" in refused["refused"]


def test_the_mixture_summary_names_each_corpus_and_its_roles(mixed):
    _, m = mixed
    summary = normstats.corpus_summary(m)
    assert sorted(summary) == sorted(c.name for c in CORPORA)
    aloha, bridge = summary["aloha_sim"], summary["bridge"]
    assert aloha["episodes"] == 2 and aloha["camera_roles"] == ["front", "wrist"] and aloha["formats"] == ["lerobot"]
    assert aloha["state_streams"] == ["observation_state"] and bridge["cameras_without_role"] == ["image_0"]
    assert abs(sum(s["hours"] for s in summary.values()) - 8 * 5.0 / 3600) < 1e-3
