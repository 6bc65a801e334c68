"""The rater app in a real browser: headless Debian chromium driven by selenium through /usr/bin/chromedriver.

Needs `apt-get install chromium chromium-driver` and selenium (the `test` extra; no browser download by any
tool); skips with the reason otherwise, fails instead under FINHARNESS_REQUIRE_BROWSER=1 or
FINHARNESS_REQUIRE_ALL=1 (CI). Set FINHARNESS_UI_SCREENS=DIR to also save screenshots and the agreement
figures there.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import uvicorn

from finharness.rating import Match, cohen_kappa, write_matches
from finharness.ui.app import create_app
from finharness.ui.exports import agreement, export_matches
from finharness.ui.queue import load_pairs, load_rubric
from finharness.ui.storage import RaterStore
from tests.conftest import requires

from ..unit.ui_fixtures import ITEMS, MODELS, QUALITY, quality_of, write_dialogue_run, write_qa_run

CHROMIUM = os.environ.get("FINHARNESS_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("FINHARNESS_CHROMEDRIVER", "/usr/bin/chromedriver")

try:
    from selenium import webdriver
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError as err:  # the test extra is not installed: the tests below skip (or fail) at set-up
    _SELENIUM = f"browser test needs selenium ({err}): pip install -e '.[test]'"
else:
    _SELENIUM = None


def _browser_problem() -> str | None:
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        return f"browser test needs {CHROMIUM} and {CHROMEDRIVER}: apt-get install chromium chromium-driver"
    return _SELENIUM


pytestmark = requires("BROWSER", _browser_problem())

PAIRS = ((0, 1), (1, 2), (0, 2))
# the constructed judge departs from the quality rule on these items (task/item, pair of model indices)
JUDGE_FLIPS = {("Analyst/1", (1, 2)): "tie", ("Credit_Risk_Evaluation/4", (0, 1)): "model_b"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(tmp_path):
    """The app on a real port over a store with 9 blind pairs and 1 rubric item for alice."""
    store = RaterStore(tmp_path / "store.sqlite")
    _, token, _ = store.add_rater("alice")
    store.add_rater("bob")
    runs = [write_dialogue_run(tmp_path, m) for m in MODELS]
    for a, b in PAIRS:
        load_pairs(store, runs[a], runs[b], raters="alice")
    load_rubric(store, write_qa_run(tmp_path, MODELS[0], {"q1": "Gross margin rose to 75% on data-centre demand."}),
                raters="alice")
    server = uvicorn.Server(uvicorn.Config(create_app(store), host="127.0.0.1", port=_free_port(),
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{server.config.port}", store, token
    server.should_exit = True
    thread.join(timeout=10)
    store.close()


@pytest.fixture
def browser(tmp_path):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=1440,1000", f"--user-data-dir={tmp_path / 'chromium'}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.implicitly_wait(10)  # element look-ups wait for the page a click or submit leads to
    yield driver
    driver.quit()


def _screens() -> Path | None:
    target = os.environ.get("FINHARNESS_UI_SCREENS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
    return Path(target) if target else None


def _shot(driver, name: str) -> None:
    if (target := _screens()) is not None:
        driver.save_screenshot(str(target / f"{name}.png"))


def _assert_blind(driver) -> None:
    page = driver.page_source
    leaked = [m for m in MODELS if m in page or m in driver.current_url]
    assert not leaked, f"model name(s) {leaked} in the page before the verdict"


def _navigate_by(driver, element) -> None:
    """Click and wait until the browser has left the page: a look-up right after a submit can
    otherwise find an element of the page being replaced (stale element, seen in CI)."""
    page = driver.find_element(By.TAG_NAME, "html")
    element.click()

    def left(_driver) -> bool:
        try:
            page.is_enabled()
        except WebDriverException:  # stale, or Chrome's "node does not belong to the document"
            return True
        return False

    WebDriverWait(driver, 20).until(left)


def _text_of(driver, css: str) -> str:
    return WebDriverWait(driver, 20, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda d: d.find_element(By.CSS_SELECTOR, css).text)


def _headers(base: str, path: str, session_cookie: str) -> str:
    request = urllib.request.Request(base + path, headers={"Cookie": f"finharness_session={session_cookie}"})
    with urllib.request.urlopen(request) as response:
        return str(dict(response.headers))


def test_rater_signs_in_judges_blind_and_verdicts_are_stored(served, browser, tmp_path):
    base, store, token = served
    started = time.perf_counter()

    # without a token: the queue is refused (401) and the browser lands on the sign-in form
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(base + "/queue")
    assert refused.value.code == 401
    with pytest.raises(urllib.error.HTTPError) as refused_api:
        urllib.request.urlopen(base + "/api/queue")
    assert refused_api.value.code == 401
    browser.get(base + "/queue")
    assert browser.find_element(By.NAME, "token") and "alice" not in browser.page_source
    browser.find_element(By.NAME, "token").send_keys("not-a-token")
    _navigate_by(browser, browser.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    assert "not valid" in _text_of(browser, ".alert")
    _shot(browser, "0_signin")

    browser.find_element(By.NAME, "token").send_keys(token)
    _navigate_by(browser, browser.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    assert browser.current_url == base + "/queue"
    assert "0 of 10 items judged" in browser.page_source
    _assert_blind(browser)
    _shot(browser, "1_queue")
    session = browser.get_cookie("finharness_session")
    assert session["httpOnly"] and session["sameSite"] == "Strict"

    choices: dict[str, str] = {}
    for n in range(9):  # every pairwise item, each through the "next" button
        link = browser.find_element(By.LINK_TEXT, "Start next item →") if n == 0 else \
            browser.find_element(By.LINK_TEXT, "Next item →")
        _navigate_by(browser, link)
        work_item_id = browser.current_url.rsplit("/", 1)[1]
        _assert_blind(browser)
        assert not any(m in _headers(base, f"/item/{work_item_id}", session["value"]) for m in MODELS)
        reloaded = browser.page_source
        browser.refresh()
        assert browser.page_source == reloaded  # the order shown is the same after a reload
        columns = browser.find_elements(By.CSS_SELECTOR, ".columns .column")
        first, second = (quality_of(c.text) for c in columns)
        choice = "tie" if first == second else ("1" if first > second else "2")
        if n == 0:
            _shot(browser, "2_pair")
            browser.find_element(By.NAME, "comment").send_keys("Response 1 backs its ratio with numbers.")
        _navigate_by(browser, browser.find_element(By.CSS_SELECTOR, f"button[name=choice][value='{choice}']"))
        choices[work_item_id] = choice
        reveal = _text_of(browser, ".reveal")
        assert "Your verdict" in reveal and sum(m in reveal for m in MODELS) == 2
        if n == 0:
            _shot(browser, "3_reveal")

    _navigate_by(browser, browser.find_element(By.LINK_TEXT, "Next item →"))  # the rubric item comes last
    _assert_blind(browser)
    _shot(browser, "4_rubric")
    for key, score in (("accuracy", 4), ("completeness", 3), ("relevance", 5), ("clarity", 4)):
        browser.find_element(By.CSS_SELECTOR, f"input[name={key}][value='{score}'] + span").click()
    _navigate_by(browser, browser.find_element(By.CSS_SELECTOR, "form.rubric button[type=submit]"))
    assert MODELS[0] in _text_of(browser, ".reveal")
    _shot(browser, "5_rubric_reveal")
    browser.get(base + "/queue")
    assert "10 of 10 items judged" in browser.page_source
    wall = time.perf_counter() - started

    # the stored verdicts: one per item, the winner is the side whose answer stated the higher quality
    alice = next(r for r in store.raters() if r.name == "alice")
    judged = {item.id: item for _, item in store.judged_pairs(["alice"])}
    assert set(judged) == set(choices)
    for wid, item in judged.items():
        assert item.verdict["choice"] == choices[wid]
        qa, qb = (quality_of(str(item.content[side])) for side in ("a", "b"))
        assert item.verdict["winner"] == ("tie" if qa == qb else "model_a" if qa > qb else "model_b")
    (_, rubric), = store.judged_rubrics()
    assert rubric.verdict["scores"] == {"accuracy": 4, "completeness": 3, "relevance": 5, "clarity": 4}
    assert store.queue(next(r for r in store.raters() if r.name == "bob")) == []
    assert all(w.done for w in store.queue(alice))

    # human–judge agreement against a judge that follows the same rule except on two items
    export_matches(store, tmp_path / "human.jsonl")
    judge = []
    for index, sid in enumerate(ITEMS):
        task, item_id = sid.split("/")
        for a, b in PAIRS:
            qa, qb = QUALITY[MODELS[a]][index], QUALITY[MODELS[b]][index]
            winner = JUDGE_FLIPS.get((sid, (a, b)), "tie" if qa == qb else "model_a" if qa > qb else "model_b")
            judge.append(Match(task, MODELS[a], MODELS[b], winner, item_id, "judge:constructed"))
    write_matches(judge, tmp_path / "judge.jsonl")
    report = agreement(tmp_path / "human.jsonl", tmp_path / "judge.jsonl")
    human_outcomes, judge_outcomes = [], []
    for m in judge:
        qa, qb = QUALITY[m.model_a][ITEMS.index(f"{m.task}/{m.item_id}")], QUALITY[m.model_b][
            ITEMS.index(f"{m.task}/{m.item_id}")]
        human_outcomes.append("tie" if qa == qb else m.model_a if qa > qb else m.model_b)
        judge_outcomes.append({"model_a": m.model_a, "model_b": m.model_b, "tie": "tie"}[m.winner])
    assert report.items_compared == 9 and report.human_only == 0
    assert report.exact_agreement == pytest.approx(7 / 9)
    assert report.kappa == pytest.approx(cohen_kappa(human_outcomes, judge_outcomes))
    assert report.ratings.n == 3
    if (target := _screens()) is not None:
        figures = {"browser_flow_wall_s": round(wall, 2), **report.to_json()}
        (target / "agreement.json").write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
        shutil.copy(tmp_path / "human.jsonl", target / "human.jsonl")
        shutil.copy(tmp_path / "judge.jsonl", target / "judge.jsonl")
