"""``sodkit serve``: a real server process on 127.0.0.1, real HTTP, the tiny trained model.

One server (module fixture) answers the tests of what it returns and refuses; the SIGTERM test
starts its own, since it ends it. docs/reliability.md, section "sodkit serve", lists the
promises these prove.
"""

from __future__ import annotations

import asyncio
import base64
import getpass
import http.client
import json
import signal
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.cli import main
from sodkit.commands.predict_lean import OFF_ENV
from sodkit.inference.render import MODES
from tests import hostile_files, processes
from tests.browser import Browser, find_chromium
from tests.serve_helpers import Server, finish, form

TOKEN = "a-token-for-the-tests"
MAX_FILE_MB = 3  # the server's SODKIT_MAX_FILE_MB here: an oversized body is cheap to send
BACKGROUND = "white"  # the options case: ?save=cutout&background=white


@pytest.fixture(scope="module")
def checkpoint(trained) -> Path:
    return trained / "checkpoints" / "best.pt"


@pytest.fixture(scope="module")
def photos(data_root) -> list[Path]:
    return sorted((data_root / "DUTS-TE" / "DUTS-TE-Image").glob("*.jpg"))[:2]


@pytest.fixture(scope="module")
def predicted(checkpoint, photos, tmp_path_factory) -> dict[str, Path]:
    """``sodkit predict --save KIND`` of the photos (one image a forward pass, as a lone
    request's), a folder per kind, and ``cutout-white`` with ``--background white``."""
    root = tmp_path_factory.mktemp("predicted")
    runs = {kind: ["--save", kind] for kind in MODES}
    runs[f"cutout-{BACKGROUND}"] = ["--save", "cutout", "--background", BACKGROUND]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(OFF_ENV, "0")  # the full path, the server's (without torch: 1/255)
        for name, options in runs.items():
            assert main(["predict", *map(str, photos), "--checkpoint", str(checkpoint),
                         "--out", str(root / name), "--batch-size", "1", "--workers", "0",
                         *options]) == 0
    return {name: root / name for name in runs}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """The server's working folder and TMPDIR: it must stay empty."""
    return tmp_path_factory.mktemp("serve_scratch")


@pytest.fixture(scope="module")
def server(checkpoint, scratch):
    env = {"SODKIT_SERVE_TOKEN": TOKEN, "SODKIT_MAX_FILE_MB": str(MAX_FILE_MB),
           "TMPDIR": str(scratch)}
    running = Server(checkpoint, "--queue", "2", "--max-batch", "2", env=env, cwd=scratch,
                     token=TOKEN)
    yield running
    running.kill()


def one_line_error(status: int, headers: dict[str, str], body: bytes) -> str:
    """The reason of a refusal, checked to be one line of JSON."""
    assert headers["content-type"] == "application/json", (status, body)
    reason = json.loads(body)["error"]
    assert reason and "\n" not in reason, body
    return reason


def test_responses_are_predicts_files_byte_for_byte(server, photos, predicted):
    for photo in photos:
        data = photo.read_bytes()
        for kind in MODES:
            status, headers, body = server.post(data, query=f"?save={kind}")
            assert (status, headers["content-type"]) == (200, "image/png"), body[:200]
            assert body == (predicted[kind] / f"{photo.stem}.png").read_bytes(), (photo, kind)
        status, _, body = server.post(data, query=f"?save=cutout&background={BACKGROUND}")
        assert body == (predicted[f"cutout-{BACKGROUND}"] / f"{photo.stem}.png").read_bytes()
    data, stem = photos[0].read_bytes(), photos[0].stem
    # the raw body without options: the mask; a form (rembg's field name, options as fields)
    assert server.post(data)[2] == (predicted["mask"] / f"{stem}.png").read_bytes()
    body, content_type = form(data, {"save": "overlay"}, name="file")
    assert server.post(body, content_type)[2] == \
        (predicted["overlay"] / f"{stem}.png").read_bytes()
    # several kinds from one forward pass: JSON with each file in base64
    status, headers, body = server.post(data, query="?save=mask,cutout,soft")
    answer = json.loads(body)
    assert (status, headers["content-type"]) == (200, "application/json")
    for kind in ("mask", "cutout", "soft"):
        assert base64.b64decode(answer["outputs"][kind]) == \
            (predicted[kind] / f"{stem}.png").read_bytes()


def test_a_transparent_photos_cutout_is_predicts(server, checkpoint, photos, tmp_path,
                                                  monkeypatch):
    """An upload's alpha is read as predict reads a file's: its cut-out keeps what was
    transparent, byte for byte predict's (the server once dropped the alpha)."""
    monkeypatch.setenv(OFF_ENV, "0")  # predict's full path, the server's
    rgb = cv2.imread(str(photos[0]))
    alpha = np.full(rgb.shape[:2], 255, np.uint8)
    alpha[:, : rgb.shape[1] // 2] = 0
    path = tmp_path / "rgba.png"
    assert cv2.imwrite(str(path), np.dstack([rgb, alpha]))
    assert main(["predict", str(path), "--checkpoint", str(checkpoint), "--out",
                 str(tmp_path / "out"), "--save", "cutout", "--workers", "0"]) == 0
    status, _, body = server.post(path.read_bytes(), query="?save=cutout")
    assert (status, body) == (200, (tmp_path / "out" / "rgba.png").read_bytes())
    assert not cv2.imdecode(np.frombuffer(body, np.uint8), cv2.IMREAD_UNCHANGED)[:, :2, 3].any()


def test_a_large_upload_is_held_in_memory_only(server, scratch, photos, predicted):
    """2 MiB of form data (Starlette's own form parser would spool it to a temporary file past
    1 MiB): nothing appears in the server's working folder or TMPDIR."""
    noise = np.random.default_rng(0).integers(0, 256, (800, 900, 3), dtype=np.uint8)
    png = cv2.imencode(".png", noise)[1].tobytes()
    assert len(png) > 2 << 20
    body, content_type = form(png, {"save": "mask"})
    # what the libraries leave there as they load (onnxruntime's .ses) is not the upload's
    before = sorted(scratch.iterdir())
    assert all(p.name in (".ses", f"torchinductor_{getpass.getuser()}") for p in before), before
    status, headers, answer = server.post(body, content_type)
    assert status == 200, answer
    assert cv2.imdecode(np.frombuffer(answer, np.uint8), cv2.IMREAD_UNCHANGED).shape == (800, 900)
    assert sorted(scratch.iterdir()) == before


def _photo_half(photos: list[Path]) -> bytes:
    data = photos[0].read_bytes()
    return data[: len(data) // 2]


REFUSED = {  # name: (body, content type, query, status, words of the reason)
    "a PNG bomb": (lambda p: hostile_files.zero_png(30000, 30000, inflated=64), "image/png", "",
                   413, "30000x30000"),
    "a JPEG bomb": (lambda p: hostile_files.jpeg_claiming(30000, 30000), "image/jpeg", "", 413,
                    "30000x30000"),
    "2 GiB of pixels under a 4x4 header": (lambda p: hostile_files.zero_png(4, 4, 2 << 30),
                                           "image/png", "", 400, "more image data than"),
    "a truncated JPEG": (_photo_half, "image/jpeg", "", 400, "truncated"),
    "text as an image": (lambda p: b"hello", "image/png", "", 415, "no image"),
    "a wrong content type": (lambda p: p[0].read_bytes(), "text/plain", "", 415, "text/plain"),
    "curl's default content type": (lambda p: p[0].read_bytes(),
                                    "application/x-www-form-urlencoded", "", 415, "-F image=@"),
    "an empty body": (lambda p: b"", "image/jpeg", "", 400, "no body"),
    "a form without the image": (lambda p: form(b"x", name="photo"), None, "", 400,
                                 "no field 'image'"),
    "an unknown output": (lambda p: p[0].read_bytes(), "image/jpeg", "?save=png", 400, "save="),
    "an unknown option": (lambda p: p[0].read_bytes(), "image/jpeg", "?colour=red", 400,
                          "colour"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_bad_request_is_a_4xx_with_a_one_line_reason(server, photos, case):
    make, content_type, query, expected, words = REFUSED[case]
    body = make(photos)
    if content_type is None:  # a form: its body and its type with the boundary
        body, content_type = body
    status, headers, answer = server.post(body, content_type, query)
    assert status == expected, answer
    assert words in one_line_error(status, headers, answer)


def test_an_oversized_body_is_refused_from_its_length_before_it_is_sent(server):
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(f"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\n"
                     f"Authorization: Bearer {TOKEN}\r\n"
                     f"Content-Length: {(MAX_FILE_MB << 20) + 1}\r\n\r\n".encode())
        response = http.client.HTTPResponse(sock)
        response.begin()
        status, headers, body = response.status, dict(response.getheaders()), response.read()
    assert status == 413
    assert f"limit of {MAX_FILE_MB} MiB" in one_line_error(status, headers, body)


def test_a_full_server_answers_503_with_retry_after(server, photos, predicted):
    """The server takes 2 requests (``--queue 2``): with two held inside, a burst of six more is
    refused at once, bodies unread; the two held then finish normally."""
    data = photos[0].read_bytes()
    held = [server.hold(data) for _ in range(2)]
    server.wait_inside(2)
    with ThreadPoolExecutor(6) as pool:
        burst = list(pool.map(lambda _: server.post(data), range(6)))
    for status, headers, body in burst:
        assert (status, headers.get("retry-after")) == (503, "1"), body
        assert "busy" in one_line_error(status, headers, body)
    for sock in held:
        status, _, body = finish(sock, data)
        assert (status, body) == (200, (predicted["mask"] / f"{photos[0].stem}.png").read_bytes())
    server.wait_inside(0)


def test_the_token_guards_everything_but_the_page_and_health(server, photos):
    data = photos[0].read_bytes()
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        status, answer_headers, body = server.post(data, headers=headers, token=False)
        assert status == 401 and answer_headers["www-authenticate"].startswith("Bearer")
        assert "token" in one_line_error(status, answer_headers, body)
    assert server.request("GET", "/info", token=False)[0] == 401
    assert server.request("GET", "/health", token=False)[0] == 200
    assert server.request("GET", "/", token=False)[0] == 200
    info = json.loads(server.request("GET", "/info")[2])
    assert info["model"]["file"] == "best.pt" and info["runtime"]["device"] == "cpu"
    assert info["server"] == {"max_batch": 2, "max_wait_ms": 2.0, "queue": 2, "token": True}


def test_requests_that_arrive_together_share_one_forward_pass(checkpoint, photos):
    """The batching worker, in this process, on the real model: four requests submitted
    together run as one batch of four, and each gets its own image's scores."""
    from sodkit.serve.batching import Batcher
    from sodkit.serve.model import load_served

    served = load_served(str(checkpoint), False, "cpu")
    sizes: list[int] = []
    batcher = Batcher(lambda inputs: sizes.append(len(inputs)) or served.forward(inputs),
                      max_batch=4, max_wait_s=60.0)
    batcher.start()
    prepared = [served.prepare(p.read_bytes(), False) for p in photos * 2]

    async def together() -> list:
        return await asyncio.gather(*(batcher.submit(p.tensor) for p in prepared))

    scores = asyncio.run(together())
    batcher.stop()
    assert sizes == [4] and batcher.stats.as_dict()["mean_batch"] == 4.0
    alone = [served.forward([p.tensor])[0] for p in prepared]
    for batched, single in zip(scores, alone, strict=True):
        assert float((batched - single).abs().max()) < 1e-5


def test_info_gives_the_catalogue_licence_of_a_fetched_model_file(checkpoint, tmp_path):
    """A model file that records the catalogue name it was fetched under (as ``fetch_model``
    writes it) is served with that model's licence; a plain checkpoint with none."""
    from sodkit.model_file import from_checkpoint, write_model_file
    from sodkit.serve.model import load_served
    from sodkit.torchfile import load_checkpoint

    state = load_checkpoint(checkpoint)
    weights, provenance = from_checkpoint(state, checkpoint)
    named = write_model_file(tmp_path / "fetched.safetensors", weights, state["config"],
                             {**provenance, "model": "minet-r50"})
    info = load_served(str(named), False, "cpu").describe()
    assert (info["file"], info["licence"], info["catalogue"]["task"]) == \
        ("fetched.safetensors", "MIT", "SOD")
    assert info["provenance"]["model"] == "minet-r50"
    assert load_served(str(checkpoint), False, "cpu").describe()["licence"] is None


@pytest.mark.slow  # a server process of its own: about 5 s of start on a quiet machine
def test_sigterm_lets_the_request_in_flight_finish_then_exits_0(checkpoint, photos, predicted):
    running = Server(checkpoint)
    try:
        data = photos[0].read_bytes()
        sock = running.hold(data)
        running.wait_inside(1)
        running.proc.send_signal(signal.SIGTERM)
        dog = processes.Watchdog([running.proc], tail=running.lines)
        while True:  # no new connection is taken once the drain has begun
            try:
                socket.create_connection(("127.0.0.1", running.port)).close()
            except ConnectionRefusedError:
                break
            dog.check()
            time.sleep(0.05)
        status, _, body = finish(sock, data)
        assert (status, body) == (200, (predicted["mask"] / f"{photos[0].stem}.png").read_bytes())
        assert running.stop() == 0
    finally:
        running.kill()
    # sodkit's own lines only: no library's banner, access log or warning
    assert running.lines[0].startswith("serving best.pt on http://127.0.0.1:")
    assert [line.split(" ")[:2] for line in running.lines[1:]] == [
        ["POST", "/predict"], ["stopped", "after"], ["stopped", "on"]], running.lines


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    executable = find_chromium()
    if executable is None:
        pytest.skip("no Chromium on PATH (Debian: apt-get install chromium; or set "
                    "SODKIT_CHROMIUM); .ci/run installs it")
    page = Browser(executable, tmp_path_factory.mktemp("chromium-profile"))
    yield page
    page.close()


def test_the_page_uploads_a_photo_and_shows_its_cutout(server, photos, predicted, browser):
    page = f"http://127.0.0.1:{server.port}/"
    browser.open_url(page)
    form = "document.getElementById('token-form')"
    wait_for = processes.Watchdog([server.proc], tail=server.lines)
    while browser.evaluate(f"{form}.hidden"):  # the page asks for the token first
        wait_for.check()
        time.sleep(0.05)
    browser.evaluate(f"document.getElementById('token').value = {json.dumps(TOKEN)}; "
                     f"{form}.requestSubmit()")
    browser.set_files("#files", [photos[0]])
    state = "waiting"
    dog = processes.Watchdog([server.proc], tail=server.lines)
    while state in ("waiting", "running"):
        dog.check()
        time.sleep(0.1)
        state = browser.evaluate("document.querySelector('.result').dataset.state")
    assert state == "done", browser.evaluate("document.querySelector('.status').textContent")
    shown = browser.evaluate("(() => { const i = document.querySelector('img.cutout'); "
                             "return [i.naturalWidth, i.naturalHeight]; })()")
    height, width = cv2.imread(str(photos[0])).shape[:2]
    assert shown == [width, height]
    link = "document.querySelector('a.cutout-link')"
    assert browser.evaluate(f"{link}.download") == f"{photos[0].stem}.cutout.png"
    downloaded = browser.evaluate(
        f"fetch({link}.href).then(r => r.arrayBuffer()).then(b => "
        "btoa(String.fromCharCode(...new Uint8Array(b))))")
    assert base64.b64decode(downloaded) == \
        (predicted["cutout"] / f"{photos[0].stem}.png").read_bytes()
    assert browser.errors() == []
