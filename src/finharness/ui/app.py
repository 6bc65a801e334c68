"""The rater web app (FastAPI, server-rendered Jinja2 HTML; no JavaScript at all).

Authentication: a rater signs in by posting their token once; the app then sets an HttpOnly,
SameSite=Strict session cookie (only a hash of the session id is stored). API clients may instead
send `Authorization: Bearer TOKEN` on any request. Every page that reads work or takes a verdict
needs one or the other; a rater only ever sees their own queue (another rater's item is a 404).

CSRF: the cookie is SameSite=Strict, every POST form carries the session's form token (checked
when the request is authenticated by cookie), and a POST whose Origin is another site is refused.

Blindness: pages, form fields, URLs and headers carry only the opaque work-item id until the
verdict is stored; then the reveal page names the models. All model output is autoescaped.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from fastapi import FastAPI, Form, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader

from .storage import CHOICES, RUBRIC_DIMENSIONS, SESSION_SECONDS, AlreadyJudged, Rater, RaterStore, WorkItem

HERE = Path(__file__).parent
SESSION_COOKIE = "finharness_session"

SECURITY_HEADERS = {
    # no scripts anywhere; styles only from our own stylesheet; forms only post back to us
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # no-referrer would make Chromium send `Origin: null` on our own forms
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}

SIDE_LABELS = ("Response 1", "Response 2")
CHOICE_TEXT = {"1": "Response 1 is better", "2": "Response 2 is better", "tie": "Tie: equally good"}
ROLE_LABELS = {"user": "User", "assistant": "Assistant", "system": "Instructions"}


@dataclass(frozen=True)
class Auth:
    """Who made the request, and how."""

    rater: Rater
    """The signed-in rater."""
    via: Literal["cookie", "bearer"]
    """A browser session, or a token in the Authorization header."""
    csrf: str | None
    """The session's form token (None for bearer requests: no ambient credential to forge)."""


def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True, trim_blocks=True,
                      lstrip_blocks=True)
    env.globals.update(role_labels=ROLE_LABELS, choice_text=CHOICE_TEXT, dimensions=RUBRIC_DIMENSIONS)
    return env


def create_app(store: RaterStore | str | Path, *, secure_cookie: bool = False) -> FastAPI:
    """The app over a run store. `secure_cookie`: mark the session cookie Secure (serve behind HTTPS)."""
    store = store if isinstance(store, RaterStore) else RaterStore(store)
    env = _environment()
    app = FastAPI(title="finharness raters", docs_url=None, redoc_url=None, openapi_url=None)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")

    @app.middleware("http")
    async def security_headers(request: Request, call_next):
        response = await call_next(request)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    def page(name: str, status: int = 200, auth: Auth | None = None, **context: Any) -> HTMLResponse:
        html = env.get_template(name).render(auth=auth, **context)
        return HTMLResponse(html, status_code=status)

    def authenticate(request: Request) -> Auth | None:
        header = request.headers.get("authorization", "")
        if header:
            scheme, _, token = header.partition(" ")
            rater = store.rater_by_token(token.strip()) if scheme.lower() == "bearer" and token.strip() else None
            return Auth(rater, "bearer", None) if rater else None
        session_id = request.cookies.get(SESSION_COOKIE)
        session = store.session(session_id) if session_id else None
        return Auth(session.rater, "cookie", session.csrf) if session else None

    def refused(message: str = "Sign in with your rater token to see your queue.") -> HTMLResponse:
        return page("signin.html", status=401, error=message)

    def same_origin(request: Request) -> bool:
        origin = request.headers.get("origin")
        return origin is None or urlsplit(origin).netloc == request.headers.get("host")

    def forbidden_post(request: Request, auth: Auth, csrf: str) -> HTMLResponse | None:
        """A POST that must not be acted on: from another site, or a cookie request without the form token."""
        if not same_origin(request):
            return page("error.html", 403, auth, title="Refused", message="This form was sent from another site.")
        if auth.via == "cookie" and not hmac.compare_digest(csrf.encode(), (auth.csrf or "").encode()):
            return page("error.html", 403, auth, title="Refused",
                        message="The form has expired or was not sent by this app. Go back, reload and try again.")
        return None

    def not_found(auth: Auth) -> HTMLResponse:
        return page("error.html", 404, auth, title="Not found", message="There is no such item in your queue.")

    def next_pending(queue: list[WorkItem], after: int = 0) -> WorkItem | None:
        pending = [w for w in queue if not w.done]
        return next((w for w in pending if w.position > after), pending[0] if pending else None)

    # -- sign in / out -------------------------------------------------------------------
    @app.get("/", response_class=HTMLResponse)
    def home(request: Request) -> Response:
        if authenticate(request):
            return RedirectResponse("/queue", status_code=303)
        return page("signin.html")

    @app.get("/signin", response_class=HTMLResponse)
    def signin_form() -> HTMLResponse:
        return page("signin.html")

    @app.post("/signin")
    def signin(request: Request, token: str = Form("")) -> Response:
        if not same_origin(request):
            return page("error.html", 403, title="Refused", message="This form was sent from another site.")
        rater = store.rater_by_token(token.strip()) if token.strip() else None
        if rater is None:
            return page("signin.html", status=401, error="That token is not valid. Ask for a new one if it was lost.")
        session_id, _ = store.open_session(rater)
        response = RedirectResponse("/queue", status_code=303)
        response.set_cookie(SESSION_COOKIE, session_id, max_age=SESSION_SECONDS, httponly=True, samesite="strict",
                            secure=secure_cookie, path="/")
        return response

    @app.post("/signout")
    def signout(request: Request, csrf: str = Form("")) -> Response:
        auth = authenticate(request)
        if auth is None:
            return RedirectResponse("/signin", status_code=303)
        if (refusal := forbidden_post(request, auth, csrf)) is not None:
            return refusal
        if auth.via == "cookie":
            store.close_session(request.cookies[SESSION_COOKIE])
        response = RedirectResponse("/signin", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
        return response

    # -- the queue ------------------------------------------------------------------------
    @app.get("/queue", response_class=HTMLResponse)
    def queue_page(request: Request) -> HTMLResponse:
        auth = authenticate(request)
        if auth is None:
            return refused()
        queue = store.queue(auth.rater)
        return page("queue.html", auth=auth, queue=queue, done=sum(w.done for w in queue),
                    next_item=next_pending(queue))

    @app.get("/api/queue")
    def queue_api(request: Request) -> JSONResponse:
        auth = authenticate(request)
        if auth is None:
            return JSONResponse({"error": "a valid token is needed (Authorization: Bearer TOKEN)"}, status_code=401,
                                headers={"WWW-Authenticate": "Bearer"})
        return JSONResponse({"rater": auth.rater.name,
                             "items": [{"id": w.id, "kind": w.kind, "task": w.task, "item_id": w.item_id,
                                        "position": w.position, "done": w.done} for w in store.queue(auth.rater)]})

    # -- one item ---------------------------------------------------------------------------
    def sides(item: WorkItem) -> list[dict[str, Any]]:
        """What the page shows per column, in the order shown; model names only once judged."""
        return [{"label": SIDE_LABELS[i] if item.kind == "pair" else "Answer", "turns": item.content[side],
                 "side": side, "model": item.model_of(side) if item.done else None}
                for i, side in enumerate(item.shown_order)]

    @app.get("/item/{work_item_id}", response_class=HTMLResponse)
    def item_page(request: Request, work_item_id: str) -> HTMLResponse:
        auth = authenticate(request)
        if auth is None:
            return refused()
        item = store.work_item(auth.rater, work_item_id)
        if item is None:
            return not_found(auth)
        queue = store.queue(auth.rater)
        context = dict(auth=auth, item=item, sides=sides(item), total=len(queue),
                       next_item=next_pending(queue, item.position))
        if item.done:
            return page("reveal.html", **context)
        return page("pair.html" if item.kind == "pair" else "rubric.html", **context)

    def judged_or_refused(request: Request, work_item_id: str, csrf: str) -> tuple[Auth, WorkItem] | Response:
        auth = authenticate(request)
        if auth is None:
            return refused()
        if (refusal := forbidden_post(request, auth, csrf)) is not None:
            return refusal
        item = store.work_item(auth.rater, work_item_id)
        return not_found(auth) if item is None else (auth, item)

    def already(auth: Auth, item: WorkItem) -> HTMLResponse:
        return page("error.html", 409, auth, title="Already judged", link=f"/item/{item.id}",
                    message="Your verdict on this item is stored already; verdicts are final.")

    @app.post("/item/{work_item_id}/verdict")
    def verdict(request: Request, work_item_id: str, choice: str = Form(""), comment: str = Form(""),
                csrf: str = Form("")) -> Response:
        found = judged_or_refused(request, work_item_id, csrf)
        if isinstance(found, Response):
            return found
        auth, item = found
        if item.kind != "pair" or choice not in CHOICES:
            return page("error.html", 400, auth, title="Not saved", link=f"/item/{item.id}",
                        message="Choose Response 1, Response 2 or Tie.")
        try:
            store.put_verdict(item, choice, comment.strip())  # type: ignore[arg-type]
        except AlreadyJudged:
            return already(auth, item)
        return RedirectResponse(f"/item/{item.id}", status_code=303)

    @app.post("/item/{work_item_id}/rubric")
    async def rubric(request: Request, work_item_id: str) -> Response:
        # async to read the form by the rubric's own keys (one list of dimensions, in storage.py)
        form = await request.form()
        found = judged_or_refused(request, work_item_id, str(form.get("csrf", "")))
        if isinstance(found, Response):
            return found
        auth, item = found
        given = {key: str(form.get(key, "")) for key, _, _ in RUBRIC_DIMENSIONS}
        if item.kind != "rubric" or not all(v in ("1", "2", "3", "4", "5") for v in given.values()):
            return page("error.html", 400, auth, title="Not saved", link=f"/item/{item.id}",
                        message="Give every dimension a score from 1 to 5.")
        try:
            store.put_rubric(item, {k: int(v) for k, v in given.items()}, str(form.get("comment", "")).strip())
        except AlreadyJudged:
            return already(auth, item)
        return RedirectResponse(f"/item/{item.id}", status_code=303)

    app.state.store = store
    return app
