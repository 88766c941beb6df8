"""End to end through the real Dagster UI in a real (headless) Chromium.

Starts ``dagster dev`` on the packaged workspace.yaml against a fixture corpus in tmp, then,
as a person would in the browser: checks the asset catalog lists the graph, opens eval_run's
page, goes to the ``reindex`` job (the whole chain), clicks "Materialize all…", picks the
index_version partition in the launch dialog, launches the run with the default (multiprocess)
executor, waits for it (GraphQL polling from the test), and reads the eval_run scorecard on
the asset page (opening its "[Show Markdown]" dialog). Screenshots go to tmp
(``INFRA_RAG_UI_SHOTS`` names a folder to copy them into).

Needs Debian's ``chromium`` + ``chromium-driver`` (``.ci/run`` installs them when missing) and
the ``selenium`` package (test extra); skips with the reason otherwise. About 2.5 minutes on
an idle 2-core machine (the run itself ~100 s); every wait has a timeout.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import load_factor, make_fixture_corpus, write_fixture_sources

from infra_rag_assets import settings
from infra_rag_assets.package_data import dagster_yaml_template, workspace_yaml

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ASSETS = [
    "source_pages",
    "documents",
    "chunks",
    "domain_model",
    "vectors",
    "lexical_index",
    "abstention_calibration",
    "page_ranker",
    "eval_run",
    "release",
]
CHROME_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1600,1000",
]
# Permissive critical gate measurable on the fixture corpus: no k8s-bench question is covered by
# the 5 fixture Kubernetes pages (its metrics are empty, so any gate on them fails), while
# own_labelled has covered and unanswerable questions.
GATES = """gates:
  - {name: ui-smoke-hit10, metric: hit@10, regime: serving, slice: own_labelled/overall,
     comparison: floor, threshold: 0.0, severity: critical}
"""
# Every limit below is for a quiet machine and is multiplied by the load per core
# (conftest.load_factor) when it starts. The UI's run is waited on through its own events,
# re-reading the load on every poll: it fails when the run logs nothing for RUN_IDLE_S (stuck,
# not slow), or runs past RUN_TIMEOUT_S (~100 s alone on 2 cores).
REGISTER_S = 180
SERVER_START_S = 120
RUN_IDLE_S = 180
RUN_TIMEOUT_S = 420
UI_WAIT_S = 45
MODAL_WAIT_S = 6  # the first-visit modal appears within this after a page opens


def _browser_prerequisites():
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            pytest.skip(f"{path} not installed (apt-get install chromium chromium-driver)")
    return pytest.importorskip("selenium", reason="selenium not installed (pip install -e '.[test]')")


def _bench_available() -> None:
    if not (settings.bench_dir() / "k8s-docs-rag-bench" / "qa_eval.jsonl").is_file():
        pytest.skip(f"k8s-docs-rag-bench not found in {settings.bench_dir()} (eval_run's default benchmark)")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _graphql(base: str, query: str, variables: dict | None = None, timeout: float = 15) -> dict:
    req = urllib.request.Request(
        f"{base}/graphql",
        data=json.dumps({"query": query, "variables": variables or {}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        body = json.load(resp)
    assert not body.get("errors"), body["errors"]
    return body["data"]


def _tail(path: Path, chars: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def _stop_group(proc: subprocess.Popen) -> None:
    """SIGINT (Ctrl-C, which a terminal sends to the whole foreground group) to dagster dev's
    process group, then SIGTERM, then SIGKILL."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    for sig, wait_s in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)  # also the code servers, daemon, webserver and run workers
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


@pytest.fixture
def dagster_ui(tmp_path: Path):
    """``dagster dev`` on the repo's workspace over a fixture corpus; yields (base url, version, log)."""
    _browser_prerequisites()  # skip before the slow set-up
    _bench_available()
    corpus = make_fixture_corpus(tmp_path / "corpus")
    sources = write_fixture_sources(tmp_path / "sources.yaml", corpus)
    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir()
    shutil.copyfile(dagster_yaml_template(), dagster_home / "dagster.yaml")
    gates = tmp_path / "gates.yaml"
    gates.write_text(GATES)
    env = {
        **os.environ,
        "INFRA_RAG_HOME": str(tmp_path / "home"),
        "INFRA_RAG_SOURCES": str(sources),
        "DAGSTER_HOME": str(dagster_home),
        "INFRA_RAG_GATES": str(gates),
        "INFRA_RAG_JUDGE_PAIRS": "120",  # the judge is trained and shown, but no gate here reads its scores
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }

    workdir = tmp_path / "cwd"  # empty: nothing in the cwd (first on sys.path) can shadow a module
    workdir.mkdir()

    # One index version (a dynamic partition) registered the way a user would: the CLI.
    made = subprocess.run(
        [sys.executable, "-m", "infra_rag_assets", "build", "--through", "source_pages"],
        env=env,
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=REGISTER_S * load_factor(),
    )
    assert made.returncode == 0, made.stderr[-3000:]
    version = made.stdout.strip().splitlines()[0].strip()

    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "dagster_dev.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dagster",
                "dev",
                "-w",
                str(workspace_yaml()),
                "-p",
                str(port),
                "-h",
                "127.0.0.1",
            ],
            env=env,
            cwd=workdir,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # own process group: killed whole in finally
    try:
        start_limit = SERVER_START_S * load_factor()
        deadline = time.monotonic() + start_limit
        while True:
            assert proc.poll() is None, f"dagster dev exited early:\n{_tail(log)}"
            try:
                with urllib.request.urlopen(f"{base}/server_info", timeout=5) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            assert time.monotonic() < deadline, f"dagster dev not serving after {start_limit:.0f}s:\n{_tail(log)}"
            time.sleep(1)
        yield base, version, log
    finally:
        stopping = time.monotonic()
        _stop_group(proc)
        print(f"\ndagster dev (process group {proc.pid}) stopped in {time.monotonic() - stopping:.1f}s")


@pytest.fixture
def browser():
    _browser_prerequisites()
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="infra-rag-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*CHROME_FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    try:
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    except WebDriverException as exc:
        shutil.rmtree(profile, ignore_errors=True)
        pytest.skip(f"chromium could not start here: {str(exc).splitlines()[0]}")
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


class Page:
    """Small helpers over the driver: explicit waits, the first-visit modal, screenshots."""

    def __init__(self, driver, base: str, shots: Path):
        from selenium.webdriver.support.ui import WebDriverWait

        self.d, self.base, self.shots = driver, base, shots
        self.wait = WebDriverWait(driver, UI_WAIT_S * load_factor(), poll_frequency=0.3)
        self.modal_dismissed = False

    def open(self, path: str) -> None:
        self.d.get(self.base + path)
        self.dismiss_community_modal()

    def dismiss_community_modal(self) -> None:
        """The "Join the Dagster community" dialog of a fresh browser profile: click Skip (once)."""
        from selenium.webdriver.common.by import By

        if self.modal_dismissed:
            return
        deadline = time.monotonic() + MODAL_WAIT_S * load_factor()
        while time.monotonic() < deadline:
            skip_xpath = "//div[@role='dialog']//button[normalize-space()='Skip']"
            skips = [b for b in self.d.find_elements(By.XPATH, skip_xpath) if b.is_displayed()]
            if skips:
                skips[0].click()
                self.modal_dismissed = True
                return
            time.sleep(0.3)

    def body_text(self) -> str:
        from selenium.webdriver.common.by import By

        return self.d.find_element(By.TAG_NAME, "body").text

    def until_text(self, *texts: str, what: str = "") -> None:
        self.wait.until(
            lambda _: all(t in self.body_text() for t in texts), f"{what or texts} not visible on {self.d.current_url}"
        )

    def element(self, xpath: str, root=None, clickable: bool = True):
        from selenium.webdriver.common.by import By

        def find(_):
            for el in (root or self.d).find_elements(By.XPATH, xpath):
                if el.is_displayed() and (not clickable or el.is_enabled()):
                    return el
            return False

        return self.wait.until(find, f"no visible element {xpath} on {self.d.current_url}")

    def shot(self, name: str) -> Path:
        path = self.shots / name
        self.d.save_screenshot(str(path))
        return path


def _wait_for_run(base: str, run_id: str, log: Path) -> str:
    """The run's final status, waiting while it keeps logging events (see RUN_IDLE_S)."""
    query = """query($id: ID!, $after: String) { runOrError(runId: $id) { __typename ... on Run { status } }
        logsForRun(runId: $id, afterCursor: $after, limit: 1000) { ... on EventConnection { cursor
        events { __typename ... on MessageEvent { stepKey } } } } }"""
    started = last_event = time.monotonic()
    cursor, status, step, events_seen = None, "", "", 0
    while True:
        data = _graphql(base, query, {"id": run_id, "after": cursor})
        status = data["runOrError"].get("status", "")
        if status in ("SUCCESS", "FAILURE", "CANCELED"):
            return status
        events = data["logsForRun"].get("events", [])
        now, scale = time.monotonic(), load_factor()
        if events:
            last_event, cursor, events_seen = now, data["logsForRun"]["cursor"], events_seen + len(events)
            step = next((e["stepKey"] for e in reversed(events) if e.get("stepKey")), step)
        idle, took = now - last_event, now - started
        if idle > RUN_IDLE_S * scale or took > RUN_TIMEOUT_S * scale:
            raise AssertionError(
                f"run {run_id} still {status} after {took:.0f}s, {idle:.0f}s since its last event "
                f"({events_seen} events, last step {step or 'none'}, load factor {scale:.1f}):\n{_tail(log)}"
            )
        time.sleep(3)


def _failure_details(base: str, run_id: str) -> str:
    query = """query($id: ID!) { logsForRun(runId: $id, limit: 5000) { ... on EventConnection { events {
        __typename ... on MessageEvent { message stepKey }
        ... on ExecutionStepFailureEvent { error { message } } } } } }"""
    events = _graphql(base, query, {"id": run_id})["logsForRun"].get("events", [])
    return "\n".join(
        f"{e.get('stepKey')}: {e.get('message')} {(e.get('error') or {}).get('message', '')}"
        for e in events
        if "Failure" in e["__typename"] or "did not pass" in (e.get("message") or "")
    )


def _ui_run_id(base: str, version: str) -> str:
    """The run the UI launched for ``version`` (not an automatic retry of it)."""
    query = """query($tags: [ExecutionTag!]) { runsOrError(filter: {tags: $tags}, limit: 10) {
        ... on Runs { results { runId tags { key value } } } } }"""
    tags = [{"key": "dagster/from_ui", "value": "true"}, {"key": "dagster/partition", "value": version}]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for run in _graphql(base, query, {"tags": tags})["runsOrError"].get("results", []):
            if not any(t["key"] == "dagster/parent_run_id" for t in run["tags"]):
                return run["runId"]
        time.sleep(1)
    raise AssertionError(f"no run launched from the UI for partition {version}")


def _markdown_dialog(page, key: str):
    """Open the Markdown metadata entry ``key`` of the materialization shown, return its dialog."""
    row = page.element(f"//tr[td[normalize-space()='{key}']]", clickable=False)
    page.element(".//a[contains(normalize-space(), 'Show Markdown')]", root=row).click()
    return page.element(f"//div[@role='dialog'][.//*[normalize-space()='{key}']]", clickable=False)


def test_materialize_chain_from_ui_and_read_scorecard(browser, dagster_ui, tmp_path):
    from selenium.webdriver.common.keys import Keys

    base, version, log = dagster_ui
    started = time.monotonic()
    phases: dict[str, float] = {}
    page = Page(browser, base, tmp_path)
    try:
        # The code location loaded without error (what the UI's Deployment page shows).
        entries = _graphql(
            base,
            """{ workspaceOrError { ... on Workspace { locationEntries { name
            locationOrLoadError { __typename ... on PythonError { message } } } } } }""",
        )
        locations = {e["name"]: e["locationOrLoadError"] for e in entries["workspaceOrError"]["locationEntries"]}
        assert locations["infra_rag_assets"]["__typename"] == "RepositoryLocation", locations

        # 1. The asset catalog lists the whole graph; eval_run's page opens from it.
        page.open("/assets")
        page.until_text(*ASSETS, what="every asset of the graph in the catalog")
        page.element("//a[@href='/assets/eval_run']").click()
        page.until_text("eval_run", "Materialize", "Scores dense, lexical", what="eval_run's asset page")
        assert "/assets/eval_run" in browser.current_url, browser.current_url

        # 2. Jobs → reindex (the whole index-version chain, domain_model included) → "Materialize all…"
        #    → pick the partition → launch.
        page.element("//a[@href='/jobs'][contains(., 'Jobs')]").click()
        page.element("//a[contains(@href, '/jobs/reindex')][contains(., 'reindex')]").click()
        page.until_text("Build, evaluate and (if the gates pass) release", what="the reindex job page")
        page.element("//button[contains(normalize-space(), 'Materialize all')]").click()
        dialog = page.element("//div[@role='dialog'][contains(., 'Launch runs to materialize')]", clickable=False)
        page.element(".//*[normalize-space()='Select a partition or create one']", root=dialog).click()
        picker = page.element("//*[@data-radix-popper-content-wrapper]", clickable=False)
        page.element(f".//*[@role='menuitem'][contains(normalize-space(), '{version}')]", root=picker).click()
        browser.switch_to.active_element.send_keys(Keys.ESCAPE)  # close the picker, keep the dialog
        launch = page.element("//div[@role='dialog']//button[normalize-space()='Launch 1 run']")
        assert "1 partition" in dialog.text, dialog.text
        page.shot("01_launch_dialog.png")
        launch.click()
        page.until_text("Launched run", what="the 'Launched run' toast")
        phases["launch"] = time.monotonic() - started

        # 3. Wait for the run (GraphQL), showing its run page meanwhile.
        run_id = _ui_run_id(base, version)
        page.open(f"/runs/{run_id}")
        status = _wait_for_run(base, run_id, log)
        assert status == "SUCCESS", f"run {run_id} {status}:\n{_failure_details(base, run_id)}"
        phases["run"] = time.monotonic() - started - phases["launch"]
        page.shot("02_run.png")

        # 4. eval_run's asset page: the scorecard metadata and its Markdown dialog.
        page.open(f"/assets/eval_run?partition={version}")
        page.until_text(
            "Metadata",
            "scorecard",
            "serving_config",
            "hybrid-weighted",
            version,
            what="eval_run's latest materialization metadata",
        )
        row = page.element("//tr[td[normalize-space()='scorecard']]", clickable=False)
        page.shot("03_eval_run.png")
        page.element(".//a[contains(normalize-space(), 'Show Markdown')]", root=row).click()
        card = page.element("//div[@role='dialog'][.//*[normalize-space()='scorecard']]", clickable=False)
        page.wait.until(lambda _: "hybrid-weighted" in card.text, "scorecard dialog never rendered")
        text = card.text
        for expected in ("k8s_bench_eval", "own_labelled", "hybrid-weighted", "hybrid-rrf", "serving", "mrr@10"):
            assert expected in text, f"{expected!r} missing from the scorecard dialog:\n{text}"
        shot = page.shot("04_scorecard.png")
        assert shot.stat().st_size > 10_000
        browser.switch_to.active_element.send_keys(Keys.ESCAPE)

        # 5. From a score to the bytes: the upstream table lists every upstream asset with
        #    relative links; a cited page in `questions` opens source_pages at this version.
        upstream = _markdown_dialog(page, "upstream")
        for asset in ("source_pages", "domain_model", "support_judge", "vectors"):
            assert asset in upstream.text, f"{asset} missing from the upstream table:\n{upstream.text}"
        hrefs = [a.get_attribute("href") for a in upstream.find_elements("xpath", ".//a")]
        assert hrefs and all(h.startswith(base) for h in hrefs), hrefs  # relative: resolved on this UI's port
        browser.switch_to.active_element.send_keys(Keys.ESCAPE)
        questions = _markdown_dialog(page, "questions")
        page.shot("05_questions.png")
        upstream_url = page.element(".//a[starts-with(@href, 'http')]", root=questions).get_attribute("href")
        assert not upstream_url.startswith(base), upstream_url  # a cited page's own upstream URL
        browser.switch_to.active_element.send_keys(Keys.ESCAPE)
        cited_pages = _markdown_dialog(page, "cited_pages")
        cited = page.element(".//a[contains(@href, '/assets/source_pages')]", root=cited_pages)
        href = cited.get_attribute("href")
        assert href.startswith(base) and f"partition={version}" in href, href
        browser.get(href)  # the link's own target (a click may open a new tab)
        page.until_text("source_pages", version, what="the cited page's source_pages materialization")
        assert "/assets/source_pages" in browser.current_url, browser.current_url
        page.shot("06_source_pages.png")
        print(
            f"\nUI e2e: version {version}, run {run_id}; browser {time.monotonic() - started:.0f}s "
            f"(to launch {phases['launch']:.0f}s, run {phases['run']:.0f}s); screenshots in {tmp_path}"
        )
    except Exception:
        try:
            page.shot("failure.png")
            (tmp_path / "failure.html").write_text(browser.page_source)
        except Exception:  # noqa: BLE001 - best effort: keep the original failure
            pass
        print(f"dagster dev log tail:\n{_tail(log)}\nscreenshots/page source in {tmp_path}")
        raise
    finally:
        target = os.environ.get("INFRA_RAG_UI_SHOTS")
        if target:
            Path(target).mkdir(parents=True, exist_ok=True)
            for png in tmp_path.glob("*.png"):
                shutil.copyfile(png, Path(target) / png.name)
