"""The rater app over HTTP (FastAPI's TestClient): tokens, own queue only, CSRF, blindness, escaping."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient  # fastapi and python-multipart are core dependencies: never skipped

from finharness.ui.app import SESSION_COOKIE, create_app
from finharness.ui.queue import load_pairs, load_rubric  # noqa: E402
from finharness.ui.storage import RaterStore  # noqa: E402

from .ui_fixtures import MODELS, quality_of, write_dialogue_run, write_qa_run  # noqa: E402

BASE = "http://127.0.0.1:8765"


@pytest.fixture
def setup(tmp_path):
    store = RaterStore(tmp_path / "store.sqlite")
    _, alice_token, _ = store.add_rater("alice")
    _, bob_token, _ = store.add_rater("bob")
    load_pairs(store, *(write_dialogue_run(tmp_path, m) for m in MODELS[:2]))
    load_rubric(store, write_qa_run(tmp_path, MODELS[2], {"q1": "Gross margin rose on data-centre demand."}),
                raters="alice")
    yield store, alice_token, bob_token
    store.close()


def signed_in(store: RaterStore, token: str) -> TestClient:
    client = TestClient(create_app(store), base_url=BASE)
    response = client.post("/signin", data={"token": token}, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/queue"
    return client


def item_ids(html: str) -> list[str]:
    return list(dict.fromkeys(re.findall(r'href="/item/([^"]+)"', html)))


def csrf_of(html: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', html).group(1)


def test_requests_without_a_valid_token_are_refused(setup):
    store, alice_token, _ = setup
    client = TestClient(create_app(store), base_url=BASE)
    wid = store.queue(store.raters()[0])[0].id
    for path in ("/queue", f"/item/{wid}"):
        response = client.get(path)
        assert response.status_code == 401 and "Sign in" in response.text
    assert client.post(f"/item/{wid}/verdict", data={"choice": "1"}).status_code == 401
    assert client.get("/api/queue").status_code == 401
    assert client.get("/api/queue", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert client.post("/signin", data={"token": "nope"}).status_code == 401
    client.cookies.set(SESSION_COOKIE, "forged")
    assert client.get("/queue").status_code == 401
    assert store.judged_pairs() == []


def test_sign_in_sets_a_strict_httponly_cookie_and_sign_out_ends_it(setup):
    store, alice_token, _ = setup
    client = TestClient(create_app(store), base_url=BASE)
    response = client.post("/signin", data={"token": alice_token}, follow_redirects=False)
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie and "samesite=strict" in cookie.lower()
    queue = client.get("/queue")
    assert queue.status_code == 200 and "alice" in queue.text
    session_id = client.cookies[SESSION_COOKIE]
    client.post("/signout", data={"csrf": csrf_of(queue.text)})
    client.cookies.set(SESSION_COOKIE, session_id)
    assert client.get("/queue").status_code == 401


def test_a_rater_sees_only_their_own_queue(setup):
    store, alice_token, bob_token = setup
    alice, bob = signed_in(store, alice_token), signed_in(store, bob_token)
    alice_ids, bob_ids = item_ids(alice.get("/queue").text), item_ids(bob.get("/queue").text)
    assert len(alice_ids) == 4 and len(bob_ids) == 3 and not set(alice_ids) & set(bob_ids)
    assert alice.get(f"/item/{bob_ids[0]}").status_code == 404
    bob_csrf = csrf_of(bob.get("/queue").text)
    assert bob.post(f"/item/{alice_ids[0]}/verdict", data={"choice": "1", "csrf": bob_csrf}).status_code == 404
    api = TestClient(create_app(store), base_url=BASE).get("/api/queue",
                                                           headers={"Authorization": f"Bearer {bob_token}"})
    assert api.json()["rater"] == "bob" and [i["id"] for i in api.json()["items"]] == bob_ids


def test_pair_page_is_blind_escaped_stable_and_reveals_after_the_verdict(setup):
    store, alice_token, _ = setup
    client = signed_in(store, alice_token)
    pair_id = next(w.id for w in store.queue(store.raters()[0]) if w.kind == "pair")
    page = client.get(f"/item/{pair_id}")
    visible = page.text + str(dict(page.headers)) + str(page.url)
    assert not any(m in visible for m in MODELS)
    assert "<script>alert" not in page.text and "&lt;script&gt;alert" in page.text
    assert client.get(f"/item/{pair_id}").text == page.text  # a reload shows the same order
    qualities = [quality_of(t) for t in re.findall(r"Quality: \d+/9", page.text)]
    choice = "tie" if qualities[0] == qualities[1] else ("1" if qualities[0] > qualities[1] else "2")
    saved = client.post(f"/item/{pair_id}/verdict", data={"choice": choice, "comment": "<b>bold</b>",
                                                            "csrf": csrf_of(page.text)})
    assert saved.status_code == 200 and all(m in saved.text for m in MODELS[:2])
    assert "&lt;b&gt;bold&lt;/b&gt;" in saved.text
    item = store.work_item(store.raters()[0], pair_id)
    winner = item.verdict["winner"]
    if choice != "tie":  # the side whose answer stated the higher quality is stored as the winner
        won, lost = (winner[-1], "b" if winner == "model_a" else "a")
        assert quality_of(str(item.content[won])) > quality_of(str(item.content[lost]))
    again = client.post(f"/item/{pair_id}/verdict", data={"choice": "1", "csrf": csrf_of(page.text)})
    assert again.status_code == 409 and store.work_item(store.raters()[0], pair_id).verdict["winner"] == winner


def test_posts_need_the_form_token_or_a_bearer_and_the_same_origin(setup):
    store, alice_token, _ = setup
    client = signed_in(store, alice_token)
    ids = [w.id for w in store.queue(store.raters()[0]) if w.kind == "pair"]
    csrf = csrf_of(client.get("/queue").text)
    assert client.post(f"/item/{ids[0]}/verdict", data={"choice": "1"}).status_code == 403
    assert client.post(f"/item/{ids[0]}/verdict", data={"choice": "1", "csrf": "x" + csrf}).status_code == 403
    assert client.post(f"/item/{ids[0]}/verdict", data={"choice": "1", "csrf": csrf},
                       headers={"Origin": "http://evil.example"}).status_code == 403
    assert client.post(f"/item/{ids[0]}/verdict", data={"choice": "3", "csrf": csrf}).status_code == 400
    assert store.judged_pairs() == []
    api = TestClient(create_app(store), base_url=BASE)
    response = api.post(f"/item/{ids[1]}/verdict", data={"choice": "tie"},
                        headers={"Authorization": f"Bearer {alice_token}"}, follow_redirects=False)
    assert response.status_code == 303
    assert [item.id for _, item in store.judged_pairs()] == [ids[1]]


def test_rubric_page_scores_four_dimensions(setup):
    store, alice_token, _ = setup
    client = signed_in(store, alice_token)
    rubric_id = next(w.id for w in store.queue(store.raters()[0]) if w.kind == "rubric")
    page = client.get(f"/item/{rubric_id}")
    assert MODELS[2] not in page.text and "Factual and numerical accuracy" in page.text
    assert "Question q1" in page.text and "Gross margin rose" in page.text
    form = {"accuracy": "4", "completeness": "3", "relevance": "5", "csrf": csrf_of(page.text)}
    assert client.post(f"/item/{rubric_id}/rubric", data=form).status_code == 400  # clarity missing
    saved = client.post(f"/item/{rubric_id}/rubric", data={**form, "clarity": "2"})
    assert saved.status_code == 200 and MODELS[2] in saved.text
    (_, item), = store.judged_rubrics()
    assert item.verdict["scores"] == {"accuracy": 4, "completeness": 3, "relevance": 5, "clarity": 2}
