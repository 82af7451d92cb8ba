"""``raybatch serve``: the console on the state database and the store, served by uvicorn.

Refuses (exit 2) an address other machines can reach unless a login is configured. The review
queue is the review ledger's (``connect_review``: ``raybatch.review``'s desk on the same database
and store, writing new versions through the writer as ``raybatch review`` does).
"""

from __future__ import annotations

import logging

from starlette.applications import Starlette

from raybatch.console.app import Console, build_app
from raybatch.console.auth import Logins
from raybatch.console.review_ledger import LedgerReviewPort
from raybatch.console.review_port import ReviewPort
from raybatch.console.security import check_reach
from raybatch.objects import ObjectStore, open_store
from raybatch.review.api import ReviewDesk
from raybatch.settings import (
    ConsoleSettings,
    Settings,
    StateSettings,
    StoreSettings,
    model_prices,
)
from raybatch.state import StateStore, open_state
from raybatch.work.writer import ResultWriter

log = logging.getLogger(__name__)


def connect_review(settings: Settings, state: StateStore, store: ObjectStore) -> ReviewPort:
    """The review ledger this console writes corrections to: a desk on its database and store."""
    writer = ResultWriter.of_settings(state, store, settings)
    return LedgerReviewPort(ReviewDesk(state, store, writer))


def console_app(settings: Settings, host: str) -> Starlette:
    """The console's app for ``settings``, checked for ``host`` (ConfigError when it may not serve there)."""
    state = open_state(settings.section(StateSettings))
    ours = settings.section(ConsoleSettings)
    logins = Logins(state, ours.console_token, has_users=bool(state.list_console_users()))
    check_reach(host, logins.required)
    store_settings = settings.section(StoreSettings)
    store = open_store(store_settings)
    console = Console(
        state=state,
        store=store,
        store_settings=store_settings,
        prices=model_prices(settings),
        review=connect_review(settings, state, store),
    )
    secret = ours.console_secret.get_secret_value() if ours.console_secret else None
    return build_app(console, logins, session_secret=secret)


def serve(settings: Settings, host: str, port: int) -> int:
    """Serve the console until interrupted."""
    import uvicorn

    app = console_app(settings, host)
    print(f"raybatch console on http://{'[' + host + ']' if ':' in host else host}:{port}/ (Ctrl-C stops it)")
    uvicorn.run(app, host=host, port=port, log_level="warning", server_header=False, proxy_headers=False)
    return 0
