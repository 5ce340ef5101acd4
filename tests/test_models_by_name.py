"""Models by name (issue #36): the catalogue, and fetch -> verify -> convert -> cache over a real
HTTP server on 127.0.0.1 (:mod:`tests.file_server`), with ``SODKIT_MIRROR`` pointing at it.

The served files are BiRefNet releases in the authors' format with random weights: PVTv2-b0
in the original's tensor names (``birefnet_keys.json``), float16 as the Hugging Face files
are, a 32 MB ``model.safetensors``. ``import-weights`` reads the backbone from the shapes, so
one file stands in for any BiRefNet entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
import yaml
from safetensors.torch import save

import sodkit
from sodkit.cli import main
from sodkit.errors import UserError
from sodkit.model_file import read_model_file
from sodkit.published.catalogue import entries, mirrored
from sodkit.published.fetch import cache_paths, fetch_model
from tests.file_server import FileServer
from tests.processes import run_all

HERE = Path(__file__).parent
LITE = "/ZhengPeng7/BiRefNet_lite/resolve/main/model.safetensors"  # the built-in entry's path
TEAM = "/team/models/pvt.safetensors"


@pytest.fixture(scope="module")
def release() -> bytes:
    """A BiRefNet PVTv2-b0 release file: the original's names, float16, random weights."""
    keys = json.loads((HERE / "birefnet_keys.json").read_text())["pvt_v2_b0"]
    gen = torch.Generator().manual_seed(0)
    state = {}
    for key, shape in keys.items():
        if key.endswith("num_batches_tracked"):
            state[key] = torch.zeros(shape, dtype=torch.long)
        elif key.endswith("running_var"):
            state[key] = (torch.rand(shape, generator=gen) + 0.5).half()
        else:
            state[key] = (torch.rand(shape, generator=gen) * 0.2 - 0.1).half()
    return save(state)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("SODKIT_CACHE", str(folder))
    for name in ("SODKIT_MIRROR", "SODKIT_MODELS", "SODKIT_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    return folder


@pytest.fixture
def server(release, cache, monkeypatch):
    served = FileServer(files={LITE: release, TEAM: release})
    monkeypatch.setenv("SODKIT_MIRROR", served.url)
    yield served
    served.stop()


def team_catalogue(tmp_path: Path, monkeypatch, **fields) -> Path:
    """SODKIT_MODELS with one entry, ``team-pvt`` (fields replace the defaults)."""
    entry = {"name": "team-pvt", "title": "our BiRefNet", "task": "general",
             "format": "birefnet", "url": f"https://models.example.com{TEAM}", "licence": "MIT",
             "commercial": True, "inference": {"size": 64, "preprocess": "birefnet"}, **fields}
    path = tmp_path / "team.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "models": [entry]}))
    monkeypatch.setenv("SODKIT_MODELS", str(path))
    return path


def files_in(folder: Path) -> list[str]:
    """Every file under ``folder`` but the lock files."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if p.is_file() and p.parent.name != ".locks")


def photo_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "photos"
    folder.mkdir()
    rng = np.random.default_rng(0)
    cv2.imwrite(str(folder / "a.jpg"), rng.integers(0, 255, (40, 56, 3), dtype=np.uint8))
    return folder


def test_models_lists_every_entry_with_its_licence(cache, capsys):
    """The built-in catalogue: BiRefNet's variants, MINet and F3Net, each with a licence, a
    URL or page, and a sha256 or the reason it has none; none cached in a new cache."""
    assert main(["models"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["name", "task", "size", "licence", "commercial", "cached"]
    names = [line.split()[0] for line in table[1:-1]]
    for name in ("birefnet-general", "birefnet-general-lite", "birefnet-dis", "birefnet-hrsod",
                 "birefnet-cod", "birefnet-matting", "birefnet-hr", "birefnet-dynamic",
                 "minet-r50", "f3net-r50"):
        assert name in names
    assert main(["models", "--json"]) == 0
    items = json.loads(capsys.readouterr().out)
    for item in items:
        assert item["licence"] == "MIT" and item["commercial"] is True and not item["cached"]
        assert item["url"] or item["page"]
        assert item["sha256"] or item["sha256_note"], item["name"]
        assert item["paper"] and item["inference"]["size"] and item["inference"]["preprocess"]


def test_mirror_replaces_scheme_and_host_and_keeps_the_path(cache, monkeypatch):
    url = "https://drive.usercontent.google.com/download?id=X&export=download"
    assert mirrored(url, "http://127.0.0.1:9/") == "http://127.0.0.1:9/download?id=X&export=download"
    assert mirrored(url, "https://m.corp/google") == "https://m.corp/google/download?id=X&export=download"
    monkeypatch.setenv("SODKIT_MIRROR", "https://mirror.corp")
    lite = entries()["birefnet-general-lite"]
    assert lite.url == f"https://mirror.corp{LITE}"
    assert lite.original_url == f"https://huggingface.co{LITE}"
    monkeypatch.setenv("SODKIT_MIRROR", "file:///etc")
    with pytest.raises(UserError, match="SODKIT_MIRROR"):
        entries()


def test_first_use_downloads_and_converts_and_the_second_is_offline(server, release, cache,
                                                                      tmp_path, caplog,
                                                                      monkeypatch):
    """``predict --model NAME``: one download through the mirror, the hash recorded (no
    published one), the model converted and cached; with the server gone, predict and
    ``sodkit.load(NAME)`` read the cache and give the same masks."""
    monkeypatch.setenv("SODKIT_PROGRESS_S", "0")  # not a terminal: a progress line per block
    photos = photo_folder(tmp_path)
    argv = ["predict", "--model", "birefnet-general-lite", str(photos), "--size", "64",
            "--device", "cpu", "--workers", "0", "--out"]
    with caplog.at_level("INFO"):
        assert main([*argv, str(tmp_path / "m1")]) == 0
    assert [(s.status, s.sent) for s in server.gets(LITE)] == [(200, len(release))]
    paths = cache_paths(entries()["birefnet-general-lite"])
    record = json.loads(paths.record.read_text())
    assert record["source_sha256"] == hashlib.sha256(release).hexdigest()
    assert record["sha256_from"] == "first download"
    assert "trust on first use" in caplog.text and str(paths.record) in caplog.text
    assert f"birefnet-general-lite: {len(release) / 1e6:.1f}/{len(release) / 1e6:.1f} MB " \
           f"(100%)" in caplog.text  # the progress lines
    model = read_model_file(paths.model)
    assert model["provenance"]["model"] == "birefnet-general-lite"
    assert model["provenance"]["url"] == f"https://huggingface.co{LITE}"
    assert model["config"]["model"]["backbone"].startswith("pvt_v2_b0")
    assert files_in(cache) == ["models/birefnet-general-lite.json",
                               "models/birefnet-general-lite.safetensors"]  # download gone
    server.stop()
    assert main([*argv, str(tmp_path / "m2")]) == 0  # offline: the cache
    first = cv2.imread(str(tmp_path / "m1" / "a.png"), cv2.IMREAD_GRAYSCALE)
    assert np.array_equal(first, cv2.imread(str(tmp_path / "m2" / "a.png"), 0))
    api = sodkit.load("birefnet-general-lite", device="cpu", size=64)
    assert np.abs(api.predict(photos / "a.jpg") * 255 - first).max() <= 1.0
    assert len(server.log) == 1


def test_an_interrupted_download_resumes_where_it_stopped(server, release, cache, tmp_path,
                                                          monkeypatch):
    """The connection dropped half-way: the next request asks for the rest (Range), and the
    file is whole and verified; a ``.part`` left by a killed process is continued too."""
    digest = hashlib.sha256(release).hexdigest()
    team_catalogue(tmp_path, monkeypatch, sha256=digest, size=len(release))
    half = len(release) // 2
    server.drop_at[TEAM] = half
    assert main(["models", "--fetch", "team-pvt"]) == 0
    assert [(s.status, s.range_start, s.sent) for s in server.gets(TEAM)] == [
        (200, None, half), (206, half, len(release) - half)]
    paths = cache_paths(entries()["team-pvt"])
    assert json.loads(paths.record.read_text())["sha256_from"] == "catalogue"
    # a process killed mid-way left a third of the file: only the rest is fetched
    paths.model.unlink()
    paths.part.parent.mkdir(parents=True)
    paths.part.write_bytes(release[:len(release) // 3])
    server.log.clear()
    assert fetch_model("team-pvt") == paths.model
    assert [(s.status, s.range_start) for s in server.gets(TEAM)] == [(206, len(release) // 3)]


def test_a_wrong_sha256_is_refused_and_leaves_nothing(server, release, cache, tmp_path,
                                                      monkeypatch, capsys):
    team_catalogue(tmp_path, monkeypatch, sha256="0" * 64)
    assert main(["models", "--fetch", "team-pvt"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert hashlib.sha256(release).hexdigest() in err[0] and "0" * 64 in err[0]
    assert "deleted and not loaded" in err[0]
    assert files_in(cache) == []
    # a size that is not the served one: refused before the body is taken
    team_catalogue(tmp_path, monkeypatch, sha256=hashlib.sha256(release).hexdigest(),
                   size=len(release) + 1)
    assert main(["models", "--fetch", "team-pvt"]) == 2
    assert "the catalogue says" in capsys.readouterr().err and files_in(cache) == []
    # a file the server does not have: its answer, in one line
    team_catalogue(tmp_path, monkeypatch, sha256="0" * 64, url="https://x.example/nothing.pth")
    assert main(["models", "--fetch", "team-pvt"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "answered 404" in err[0] and files_in(cache) == [], err


def test_offline_says_which_url_to_fetch_and_where_to_put_it(server, release, cache, tmp_path,
                                                            monkeypatch, capsys):
    """SODKIT_OFFLINE=1, and a network that fails: one line naming the URL and the path; the
    file put there by hand is verified and converted without the network."""
    monkeypatch.setenv("SODKIT_OFFLINE", "1")
    paths = cache_paths(entries()["birefnet-general-lite"])
    url = f"{server.url}{LITE}"
    assert main(["models", "--fetch", "birefnet-general-lite"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and url in err[0] and str(paths.source) in err[0], err
    monkeypatch.delenv("SODKIT_OFFLINE")
    server.stop()  # the network fails
    assert main(["models", "--fetch", "birefnet-general-lite"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and url in err[0] and str(paths.source) in err[0], err
    assert "cannot reach" in err[0]
    paths.source.write_bytes(release)  # by hand
    assert fetch_model("birefnet-general-lite") == paths.model
    assert not server.log and not paths.source.exists()


@pytest.mark.multiprocess
def test_two_processes_at_once_download_once(server, release, cache, tmp_path, monkeypatch):
    """Two processes (torchrun's ranks, two jobs) ask for one model at once: one downloads,
    the other waits for it and uses its file."""
    team_catalogue(tmp_path, monkeypatch, sha256=hashlib.sha256(release).hexdigest())
    server.delay_s = 0.002  # about 1 s for the file: the two overlap
    env = dict(os.environ)
    cmd = [sys.executable, "-m", "sodkit", "models", "--fetch", "team-pvt"]
    results = run_all([cmd, cmd], env=env)
    for result in results:
        assert result.returncode == 0, result.stderr
    assert [s.status for s in server.gets(TEAM)] == [200]
    assert sum("another process is fetching it" in r.stderr for r in results) == 1
    path = cache_paths(entries()["team-pvt"]).model
    assert all(r.stdout.strip() == f"team-pvt: {path}" for r in results)


@pytest.mark.parametrize("change, words", [
    ({"name": "../x"}, "name '../x'"),
    ({"name": "birefnet-general"}, "is a built-in name"),
    ({"url": "file:///etc/passwd"}, "must be an http:// or https:// URL"),
    ({"url": "https://user:secret@models.example.com/x.safetensors"}, "user name or password"),
    ({"sha256": None}, "has no sha256"),
    ({"sha256": "abc"}, "64 hexadecimal digits"),
    ({"format": "pickle"}, "format 'pickle' is not one of"),
    ({"recipe": "../../etc/passwd"}, "recipe '../../etc/passwd' is not a file name"),
    ({"file": "a/b.pth"}, "is not a file name"),
    ({"title": "ok\x1b[2Jnot"}, "control character"),
    ({"size": -3}, "size must be a whole number"),
    ({"inference": {"size": 100000}}, "inference.size"),
    ({"urll": "x"}, "did you mean 'url'"),
])
def test_a_hostile_team_catalogue_is_one_line(cache, tmp_path, monkeypatch, capsys, change,
                                              words):
    team_catalogue(tmp_path, monkeypatch, **{"sha256": "a" * 64, **change})
    assert main(["models"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "SODKIT_MODELS" in err[0] and words in err[0], err
    assert not cache.exists()


def test_a_huge_or_unreadable_team_catalogue_is_one_line(cache, tmp_path, monkeypatch,
                                                         capsys):
    path = tmp_path / "team.yaml"
    with open(path, "wb") as fh:
        fh.truncate(8 << 30)  # sparse: claims 8 GiB
    monkeypatch.setenv("SODKIT_MODELS", str(path))
    assert main(["models"]) == 2
    assert "MiB a YAML file may have" in capsys.readouterr().err
    monkeypatch.setenv("SODKIT_MODELS", str(tmp_path / "missing.yaml"))
    assert main(["models"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_an_unknown_name_is_one_line_with_the_closest(cache, capsys):
    assert main(["models", "--fetch", "birefnet-genral"]) == 2
    assert "did you mean 'birefnet-general'" in capsys.readouterr().err
    with pytest.raises(UserError, match="no file 'birefnet-genral' here, and unknown"):
        sodkit.load("birefnet-genral")


def test_sodkit_models_imports_no_torch(cache):
    code = ("import sys; from sodkit.cli import main; main(['models']); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=dict(os.environ))
    assert result.returncode == 0, result.stderr


def test_test_and_train_take_a_model_name(server, release, cache, data_root, tmp_path, capsys,
                                          monkeypatch):
    """``sodkit test CONFIG --model NAME`` evaluates the cached model into
    ``eval/NAME/``; ``sodkit info --json NAME`` gives the fine-tuning recipe of its model file."""
    team_catalogue(tmp_path, monkeypatch, sha256=hashlib.sha256(release).hexdigest())
    out = tmp_path / "runs"
    assert main(["test", str(HERE.parent / "configs" / "demo.yaml"), "--model", "team-pvt",
                 f"data_root={data_root}", f"output_root={out}", "name=r",
                 "data.test=[{preset: duts-te}]", "data.size=64", "data.num_workers=0",
                 "data.test_batch_size=3"]) == 0
    assert (out / "r" / "eval" / "team-pvt" / "results.json").is_file()
    model = cache_paths(entries()["team-pvt"]).model
    capsys.readouterr()
    assert main(["info", "--json", "team-pvt", "data_root=/mine", "data.size=64"]) == 0
    config = json.loads(capsys.readouterr().out)["config"]
    assert config["model"]["init_from"] == str(model) and config["name"] == "finetune_team-pvt"
    assert config["model"]["name"] == "birefnet" and config["data_root"] == "/mine"
    assert [s.status for s in server.gets(TEAM)] == [200]  # fetched once
