"""Slurm's single values (tools/slurm/values.py), the pieces both readers of its JSON share:
the RM client's lenient reader and the snapshot reader agree on them because they are one."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gangmaster.tools.slurm.slurm_json import read_nodes
from gangmaster.tools.slurm.values import (
    GresEntry, GresError, gpu_entries, split_gres, state_words, top_level_split, unwrap_number)
from gangmaster.tools.snapshots import SnapshotError, load_snapshot

ROOT = Path(__file__).resolve().parents[2]
CAPTURED = ROOT / "tests" / "fixtures" / "slurm"


@pytest.mark.parametrize("raw, unwrapped", [
    ({"set": True, "infinite": False, "number": 7}, 7), ({"set": False, "infinite": False, "number": 7}, None),
    ({"set": True, "infinite": True, "number": 0}, None), ({"number": 3}, 3), (5, 5), ("x", "x"),
    ({"set": True}, {"set": True}), (None, None)])
def test_wrapped_numbers_unwrap_and_anything_else_is_left_as_it_is(raw, unwrapped):
    assert unwrap_number(raw) == unwrapped


def test_state_words_keep_their_order_each_once():
    assert state_words("mixed", ["DRAIN", "mixed"]) == ("MIXED", "DRAIN")
    assert state_words("down*+drain", "idle~ planned") == ("DOWN", "DRAIN", "IDLE", "PLANNED")
    assert state_words(5, None, [3, "idle"]) == ("IDLE",)


@pytest.mark.parametrize("text, entry", [
    ("gpu:(null):0(IDX:N/A)", GresEntry("gpu", None, 0, ())),
    ("gpu:v100:2(IDX:0,2-3)", GresEntry("gpu", "v100", 2, (0, 2, 3))),
    ("gpu:4", GresEntry("gpu", None, 4, ())),
    ("mps:200", GresEntry("mps", None, 200, ())),
    ("gpu:v100:x", None), ("gpu:a:b:c", None), ("(null)", None), ("", None)])
def test_gres_entries_in_every_shape_seen(text, entry):
    assert GresEntry.parse(text) == entry


def test_a_gpu_entry_not_understood_is_skipped_or_refused():
    assert gpu_entries("gpu:v100:x,gpu:2,mps:x:y:z") == [GresEntry("gpu", None, 2)]
    with pytest.raises(GresError, match="gpu:v100:x"):
        gpu_entries("gpu:v100:x,gpu:2", strict=True)
    assert gpu_entries("mps:x:y:z", strict=True) == []          # not a GPU: not ours to judge


def test_top_level_commas_only():
    assert top_level_split(" gpu:a100:2(IDX:0,2) ,mps:1,,") == ["gpu:a100:2(IDX:0,2)", "mps:1"]
    assert top_level_split("dgx[01-02,07],cpu1") == ["dgx[01-02,07]", "cpu1"]
    assert split_gres(["gpu:1", "(null)", "N/A,gpu:2"]) == ["gpu:1", "gpu:2"]


GRES_TYPES = st.sampled_from([None, "v100", "a100", "V100_3"])


@settings(max_examples=40)
@given(st.lists(st.tuples(st.sampled_from(["gpu", "mps"]), GRES_TYPES, st.integers(0, 64),
                          st.lists(st.integers(0, 15), max_size=3)), max_size=4))
def test_gres_strings_read_back_as_written(entries):
    def written(name, gres_type, count, idx):
        suffix = f"(IDX:{','.join(map(str, idx))})" if idx else "(S:0-1)"
        return ":".join([name] + ([gres_type] if gres_type else []) + [str(count)]) + suffix
    text = ",".join(written(*entry) for entry in entries)
    assert gpu_entries(text, strict=True) == [GresEntry(name, gres_type, count, tuple(idx))
                                              for name, gres_type, count, idx in entries if name == "gpu"]


def test_both_readers_read_captured_slurm_22_05_alike():
    path = CAPTURED / "sinfo-22.05-busy.json"
    client = {n.name: n for n in read_nodes(path.read_text())}
    snapshot = load_snapshot([path], taken_at=0)
    for spec in snapshot.specs:
        assert (spec.gpus, spec.gpu_type, spec.vcores) == (client[spec.host].gpus, client[spec.host].gpu_type,
                                                           client[spec.host].cpus)
    used = {a.host: a.gpus for a in snapshot.running}
    assert used == {name: len(node.used_gpus) for name, node in client.items() if node.used_gpus}


def test_the_snapshot_reader_now_reads_sinfo_state_suffixes(tmp_path):
    doc = {"nodes": [{"name": "a", "state": "idle+drain"}, {"name": "b", "state": "down*"},
                     {"name": "c", "state": "mixed"}]}
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps(doc))
    assert load_snapshot([path], taken_at=0).unhealthy == {"a": "DRAIN", "b": "DOWN"}


def test_the_snapshot_reader_still_names_the_field_of_a_gres_it_refuses(tmp_path):
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps({"nodes": [{"name": "a", "state": "idle", "gres": "gpu:v100:x"}]}))
    with pytest.raises(SnapshotError) as caught:
        load_snapshot([path], taken_at=0)
    assert str(caught.value) == f'{path}: nodes[0].gres: expected GRES like "gpu:v100:8(S:0-1)" or "gpu:4", got "gpu:v100:x"'
