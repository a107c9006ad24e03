"""The operator console in a real browser (SPEC §20): Debian's headless Chromium, driven by
Selenium through chromedriver, against a real `serve` process and the dev engine.

Hostile content is stored through the REST API first (memory text, filenames, agent names,
conversation titles, resolution texts, tool-call prompts), then every page showing it is opened
and no script may have run. Screenshots of every page land in the test's folder, or in
`CONSOLE_SCREENSHOTS` when that names a folder (docs/ keeps the ones docs/operations.md shows).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.devjobs.png import gradient_png
from tests.processes import ROOT, GatewayProcess, dev_engine, gateway

pytestmark = pytest.mark.e2e

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1366,860", "--hide-scrollbars")
XSS = ('<script>window.__pwned=1;alert(1)</script>'
       '<img src=x onerror="window.__pwned=2;alert(2)">')
SVG = (b'<svg xmlns="http://www.w3.org/2000/svg" onload="window.__pwned=3">'
       b'<script>window.__pwned=4</script></svg>')
TS = 1_780_000_000_000


def _require_browser() -> None:
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(path)]
    if missing:
        raise RuntimeError(f"{', '.join(missing)} missing: run scripts/setup-services "
                           "(Debian's chromium and chromium-driver)")


@dataclass
class Stage:
    gw: GatewayProcess
    admin_key: str
    driver: Any  # selenium's WebDriver
    shots: Path
    ids: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.gw.url

    def shot(self, name: str, whole: bool = False) -> None:
        """A screenshot of the window (`whole`: of the page's full height)."""
        if not whole:
            self.driver.save_screenshot(str(self.shots / f"console-{name}.png"))
            return
        size = self.driver.get_window_size()
        height = self.driver.execute_script("return document.documentElement.scrollHeight")
        self.driver.set_window_size(size["width"], min(int(height) + 140, 2400))
        try:
            self.driver.save_screenshot(str(self.shots / f"console-{name}.png"))
        finally:
            self.driver.set_window_size(size["width"], size["height"])


def _cli_key(gw: GatewayProcess, *args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "gateway", "keys", "create", *args],
                         env=gw.env, cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def _seed(gw: GatewayProcess, ids: dict[str, str]) -> None:
    """alice's hostile data through the REST API, and zoe, who will be erased."""
    png = gradient_png("console")
    alice = httpx.Client(base_url=gw.url, timeout=30,
                         headers={"Authorization": f"Bearer {gw.key('alice')}"})
    with alice:
        agent = alice.post("/agents", json={"name": f"Helper {XSS}"}).json()["id"]
        conversation = alice.post(f"/agents/{agent}/conversations",
                                  json={"title": f"Holiday {XSS}"}).json()["id"]
        photo = alice.post("/resources", files={"file": ("sunset.png", png, "image/png")})
        assert photo.status_code == 201, photo.text
        hostile_name = alice.post("/resources", files={"file": (f"{XSS}.png", png, "image/png")})
        assert hostile_name.status_code == 201, hostile_name.text
        svg = alice.post("/resources", files={"file": ("logo.png", SVG, "image/png")})
        assert svg.status_code == 201, svg.text
        ids.update(photo=photo.json()["id"], svg=svg.json()["id"], conversation=conversation,
                   hostile_name=hostile_name.json()["name"])
        assert "<img src=x onerror=" in ids["hostile_name"]
        added = alice.post("/memories/add", json={
            "session_id": "holiday", "messages": [{
                "role": "user", "sender_id": "alice", "timestamp": TS, "content": [
                    {"type": "text", "text": f"the lighthouse at dusk {XSS} lighthouse.png"},
                    {"type": "image", "base64": base64.b64encode(png).decode(),
                     "name": "lighthouse.png", "ext": "png"}]}]})
        assert added.status_code == 200, added.text
        assert alice.post("/api/v2/memory/flush",
                          json={"session_id": "holiday"}).status_code == 200
        original = f"resource://{ids['photo']}"
        asset = alice.post("/assets", json={
            "chatId": conversation, "mediaType": "image", "sourceType": "upload",
            "originalUrl": original, "displayName": f"sunset {XSS}"})
        assert asset.status_code == 201, asset.text
        resolved = alice.post(f"/chats/{conversation}/resolve", json={
            "text": f"make it warmer {XSS}", "uploadedAssetIds": [asset.json()["id"]]})
        assert resolved.status_code == 200, resolved.text
        unclear = alice.post(f"/chats/{conversation}-other/resolve",
                             json={"text": f"the third one {XSS}"})
        assert unclear.status_code == 200, unclear.text
        proposed = alice.post(f"/conversations/{conversation}/tool-calls", json={
            "clientMessageId": "tc-1", "toolName": "edit_image", "args": {
                "image": "sha256:" + hashlib.sha256(original.encode()).hexdigest(),
                "prompt": f"warmer light {XSS}"}})
        assert proposed.status_code in (200, 201), proposed.text
    zoe = httpx.Client(base_url=gw.url, timeout=30,
                       headers={"Authorization": f"Bearer {gw.key('zoe')}"})
    with zoe:
        assert zoe.post("/agents", json={"name": "zoe's helper"}).status_code == 201


@pytest.fixture(scope="module")
def stage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stage]:
    _require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    tmp = tmp_path_factory.mktemp("console")
    shots = Path(os.environ.get("CONSOLE_SCREENSHOTS") or tmp / "shots")
    shots.mkdir(parents=True, exist_ok=True)
    with dev_engine(tmp) as engine_url, gateway(tmp, engine_url,
                                                log=tmp / "gateway.log") as gw:
        ids: dict[str, str] = {}
        _seed(gw, ids)
        admin_key = _cli_key(gw, "--admin", "--user", "ops")
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in FLAGS:
            options.add_argument(flag)
        profile = tmp / "chromium-profile"
        options.add_argument(f"--user-data-dir={profile}")
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        try:
            yield Stage(gw, admin_key, driver, shots, ids)
        finally:
            driver.quit()
            shutil.rmtree(profile, ignore_errors=True)


def _open(stage: Stage, path: str) -> str:
    """Open a console page (signing in first when it asks) and return its visible text."""
    from selenium.webdriver.common.by import By

    driver = stage.driver
    driver.get(stage.url + path)
    if driver.current_url.endswith("/console/login") and not path.endswith("/login"):
        _sign_in(stage)
        driver.get(stage.url + path)
    _assert_no_script_ran(stage)
    return str(driver.find_element(By.TAG_NAME, "body").text)


def _sign_in(stage: Stage) -> None:
    from selenium.webdriver.common.by import By

    driver = stage.driver
    driver.get(stage.url + "/console/login")
    field_ = _by_label(stage, "Admin key")
    assert field_.get_attribute("type") == "password"
    field_.send_keys(stage.admin_key)
    _navigate(stage, driver.find_element(By.XPATH, "//button[text()='Sign in']"))
    assert driver.current_url == stage.url + "/console"


def _navigate(stage: Stage, element: Any) -> None:
    """Click a link or a form's button and wait until the page it leads to has loaded."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    old = stage.driver.find_element(By.TAG_NAME, "html")
    element.click()
    wait = WebDriverWait(stage.driver, 20)
    wait.until(expected_conditions.staleness_of(old))
    wait.until(lambda driver: driver.execute_script("return document.readyState") == "complete")


def _by_label(stage: Stage, label: str) -> Any:
    from selenium.webdriver.common.by import By

    found = stage.driver.find_element(By.XPATH, f"//label[normalize-space(text())='{label}']")
    target = found.get_attribute("for")
    return stage.driver.find_element(By.ID, target)


def _assert_no_script_ran(stage: Stage) -> None:
    from selenium.common.exceptions import NoAlertPresentException

    driver = stage.driver
    try:
        alert = driver.switch_to.alert
    except NoAlertPresentException:
        alert = None
    assert alert is None, f"a script ran an alert: {alert.text}"
    assert driver.execute_script("return window.__pwned === undefined")


def _audit(stage: Stage, action: str) -> list[str]:
    """The targets of the audit page's entries for `action` (the page's own filter)."""
    from selenium.webdriver.common.by import By

    _open(stage, f"/console/audit?action={action}")
    rows = stage.driver.find_elements(By.CSS_SELECTOR, "tbody tr")
    found = []
    for row in rows:
        cells = [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
        if len(cells) == 5:
            assert cells[3] == action
            found.append(cells[4])
    return found


def test_sign_in_create_and_revoke_a_key(stage: Stage) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    driver = stage.driver
    driver.get(stage.url + "/console")
    assert driver.current_url == stage.url + "/console/login"
    stage.shot("login")
    _sign_in(stage)
    text = _open(stage, "/console")
    assert "ready" in text and "Erasures in progress" in text
    stage.shot("overview")
    _open(stage, "/console/keys")
    _by_label(stage, "User").send_keys("bob")
    Select(_by_label(stage, "Kind")).select_by_visible_text("user")
    _by_label(stage, "Name").send_keys("bob's laptop")
    write = driver.find_element(By.CSS_SELECTOR, "input[name=scopes][value=write]")
    write.click()  # read only
    _by_label(stage, "Users (glob)")  # present, for service keys
    _navigate(stage, driver.find_element(By.XPATH, "//button[text()='Create key']"))
    token = driver.find_element(By.ID, "new-token").text
    assert token.startswith("mgw_")
    stage.shot("keys")
    with httpx.Client(base_url=stage.url, headers={"Authorization": f"Bearer {token}"}) as bob:
        assert bob.get("/agents").status_code == 200
        assert bob.post("/agents", json={"name": "x"}).status_code == 403
        key_id = token.split("_")[1]
        row = driver.find_element(
            By.XPATH, f"//tr[td/code[text()='{key_id}']]")
        assert "bob's laptop" in row.text and "read" in row.text
        _navigate(stage, row.find_element(By.XPATH, ".//button[text()='Revoke']"))
        _assert_no_script_ran(stage)
        row = driver.find_element(By.XPATH, f"//tr[td/code[text()='{key_id}']]")
        assert "revoked" in row.text
        assert bob.get("/agents").status_code == 401
    assert key_id in _audit(stage, "console.key_create")
    assert key_id in _audit(stage, "console.key_revoke")


def test_a_user_page_shows_the_thumbnail_and_the_svg_only_as_a_download(stage: Stage) -> None:
    from selenium.webdriver.common.by import By

    driver = stage.driver
    text = _open(stage, "/console/users")
    assert "alice" in text and "zoe" in text
    stage.shot("users")
    _navigate(stage, driver.find_element(By.LINK_TEXT, "alice"))
    _assert_no_script_ran(stage)
    text = driver.find_element(By.TAG_NAME, "body").text
    for shown in (f"Holiday {XSS}", f"Helper {XSS}", stage.ids["hostile_name"]):
        assert shown in text, (shown, text)
    assert "lighthouse.png" in text and "sunset.png" in text
    images = driver.find_elements(By.CSS_SELECTOR, "img.thumb")
    assert images
    for image in images:
        assert driver.execute_script(
            "return arguments[0].complete && arguments[0].naturalWidth > 0", image)
        assert stage.ids["svg"] not in (image.get_attribute("src") or "")
    download = driver.find_element(
        By.CSS_SELECTOR, f"a[href*='/files/resource/{stage.ids['svg']}']")
    assert download.get_attribute("download") is not None
    stage.shot("user", whole=True)
    # the file route answers an attachment for the SVG, whatever the browser is asked
    cookie = driver.get_cookie("mgw_console")
    with httpx.Client(base_url=stage.url,
                      cookies={"mgw_console": cookie["value"]}) as browser_like:
        svg = browser_like.get(f"/console/users/alice/files/resource/{stage.ids['svg']}")
        assert svg.headers["content-disposition"] == "attachment"
        assert svg.headers["content-type"] == "application/octet-stream"
    with httpx.Client(base_url=stage.url) as anonymous:  # no session: no file
        png = anonymous.get(f"/console/users/alice/files/resource/{stage.ids['photo']}")
        assert png.status_code == 303


def test_stored_payloads_run_no_script_on_any_page_that_shows_user_content(
    stage: Stage,
) -> None:
    from selenium.webdriver.common.by import By

    text = _open(stage, "/console/search?user=alice&query=lighthouse&session=holiday")
    assert XSS in text and "lighthouse.png" in stage.driver.page_source
    stage.driver.find_element(By.TAG_NAME, "summary").click()
    stage.shot("search")
    text = _open(stage, "/console/resolutions?user=alice")
    assert f"make it warmer {XSS}" in text and f"the third one {XSS}" in text
    assert "current_upload" in text and "clarification" in text
    assert stage.driver.find_elements(By.CSS_SELECTOR, "img.thumb")
    stage.shot("resolutions")
    text = _open(stage, "/console/tool-calls?state=pending")
    assert "edit_image" in text and "Edit image" in text
    stage.driver.find_element(By.TAG_NAME, "summary").click()
    assert "warmer light" in stage.driver.find_element(By.TAG_NAME, "body").text
    _assert_no_script_ran(stage)
    stage.shot("tool-calls")
    for path in ("/console/users/alice", "/console/keys?user=alice", "/console/audit"):
        _open(stage, path)


class _Attacker(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return None


def test_csrf_and_foreign_origin_posts_are_refused(stage: Stage, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    driver = stage.driver
    page = _open(stage, "/console/keys")
    assert "Create key" in page
    token = driver.find_element(By.NAME, "csrf_token").get_attribute("value")
    # Same origin, but no token (a script that got in could not read one from elsewhere).
    status = driver.execute_script(
        "return fetch('/console/keys', {method: 'POST', body: new URLSearchParams("
        "{user: 'mallory', kind: 'user', scopes: 'read'})}).then(r => r.status)")
    assert status == 403
    # Another origin on the same host (same site, so the Strict cookie goes along) posting the
    # real token: refused for its origin alone.
    (tmp_path / "attack.html").write_text(
        f'<form method="post" action="{stage.url}/console/keys">'
        f'<input name="csrf_token" value="{token}"><input name="user" value="mallory">'
        '<input name="kind" value="user"><input name="scopes" value="read">'
        '<button id="go">go</button></form>')
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Attacker, directory=str(tmp_path)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        driver.get(f"http://127.0.0.1:{server.server_address[1]}/attack.html")
        _navigate(stage, driver.find_element(By.ID, "go"))
        body = driver.find_element(By.TAG_NAME, "body").text
        assert "did not come from the console" in body
    finally:
        server.shutdown()
        server.server_close()
    text = _open(stage, "/console/keys?user=mallory")
    assert "No keys." in text


def test_erase_with_confirmation_then_the_audit_shows_it(stage: Stage) -> None:
    from selenium.webdriver.common.by import By

    driver = stage.driver
    _open(stage, "/console/users/zoe")
    _navigate(stage, driver.find_element(By.LINK_TEXT, "Erase…"))
    stage.shot("erase")
    _by_label(stage, "User id").send_keys("zo")
    _navigate(stage, driver.find_element(By.XPATH, "//button[text()='Erase']"))
    assert "Type the user id exactly" in driver.find_element(By.TAG_NAME, "body").text
    _by_label(stage, "User id").send_keys("zoe")
    _navigate(stage, driver.find_element(By.XPATH, "//button[text()='Erase']"))
    text = driver.find_element(By.TAG_NAME, "body").text
    assert re.search(r"User zoe: erased", text), text
    assert "zoe" in _audit(stage, "console.user_erase")
    assert "zoe" in _audit(stage, "users.erase")
    _open(stage, "/console/audit")
    stage.shot("audit")


def test_sign_out_ends_the_session(stage: Stage) -> None:
    from selenium.webdriver.common.by import By

    driver = stage.driver
    _open(stage, "/console")
    cookie = driver.get_cookie("mgw_console")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/console"
    _navigate(stage, driver.find_element(By.XPATH, "//button[text()='Sign out']"))
    assert driver.current_url == stage.url + "/console/login"
    driver.get(stage.url + "/console/keys")
    assert driver.current_url == stage.url + "/console/login"
    with httpx.Client(base_url=stage.url, cookies={"mgw_console": cookie["value"]}) as replay:
        assert replay.get("/console").status_code == 303  # the old cookie opens nothing
    assert stage.admin_key.split("_")[1] in _signed_out_targets(stage)


def _signed_out_targets(stage: Stage) -> list[str]:
    _sign_in(stage)
    return _audit(stage, "console.sign_out")
