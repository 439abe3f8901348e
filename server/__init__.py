"""The kbq web surface: a Flask app factory.

In: config (KBQ_RULES: a rules directory watched for edits, or None for the shipped rules;
KBQ_EMBED_ORIGINS: origins that may frame /embed). Out: a WSGI app with the page (`pages`),
the knowledge pages (`browse`), the JSON API (`api`) and security headers on every response.
`kbq serve` runs it in several processes (server/serving.py).
"""

from __future__ import annotations

from typing import Any

from flask import Flask, render_template, request
from werkzeug.exceptions import HTTPException

from kb.knowledge.data import readable_template
from kb.figures import duration, num
from kb.links import web_address
from server import api, browse, pages, security
from server.fairness import ClientGone, Gate
from server.live import LiveKnowledge, NoKnowledge


def unit(text: Any) -> str:
    """A unit for people: dimensionless ('1') and truth values ('bool') print as nothing."""
    return "" if text in (None, "", "1", "bool") else str(text)


def quantity(value: Any, unit_text: Any = "", digits: int = 3) -> str:
    """'35 GB', or just '1.2' for a dimensionless figure."""
    u = unit(unit_text)
    return f"{num(value, digits)} {u}" if u else num(value, digits)


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    app = Flask(__name__)
    app.config.from_mapping(
        DEBUG=False,
        KBQ_RULES=None,
        KBQ_EMBED_ORIGINS=[],
        KBQ_RELOAD_SECONDS=1.0,
        KBQ_CACHE_MB=0,             # answers kept per process (server.answer_cache); kbq serve sets it
        MAX_CONTENT_LENGTH=64 * 1024,
        KBQ_ANSWER_SLOTS=2,         # answers computed at once per process (server.fairness)
        KBQ_CLIENT_SLOTS=1,         # of which one address may hold this many
        KBQ_ANSWER_BUDGET_S=0,      # CPU seconds for an answer's costliest searches (kb.engine.search.budget); 0: none
        KBQ_SEARCH_PROBES=0,        # probes an answer's capacity searches may make (kb.engine.search.budget); 0: no limit
    )
    if test_config:
        app.config.from_mapping(test_config)
    app.debug = False

    from server import compress
    from server.fairness import ClientGone
    from server.live import NoKnowledge

    gate = Gate(app.config["KBQ_ANSWER_SLOTS"], app.config["KBQ_CLIENT_SLOTS"],
                app.config["KBQ_ANSWER_BUDGET_S"], app.config["KBQ_SEARCH_PROBES"])
    app.extensions["kbq"] = LiveKnowledge(app.config["KBQ_RULES"], app.config["KBQ_RELOAD_SECONDS"],
                                           int(app.config["KBQ_CACHE_MB"] * 1024 * 1024), gate)
    app.json = api.SafeJSON(app)
    app.jinja_env.filters.update(num=num, duration=duration, unit=unit, quantity=quantity,
                                 readable=readable_template, web_address=web_address)
    app.jinja_env.trim_blocks = app.jinja_env.lstrip_blocks = True
    security.init_app(app)
    compress.init_app(app)

    @app.context_processor
    def rule_banner() -> dict[str, Any]:
        live = app.extensions["kbq"]
        return {"rule_banner": live.degraded(), "rules_loaded_at": live.loaded_at}

    app.register_blueprint(pages.bp)
    app.register_blueprint(browse.bp)
    app.register_blueprint(api.bp)
    # the path monitors and load balancers try first (Kubernetes, Docker health checks): the same
    # check as /api/health
    app.add_url_rule("/health", "health", api.health)

    @app.errorhandler(HTTPException)
    def http_error(err: HTTPException) -> Any:
        message = err.description or err.name
        if err.code == 413:
            message = f"the request body is larger than {app.config['MAX_CONTENT_LENGTH'] // 1024} KiB"
        # keep the exception's own headers (a 405's Allow, RFC 9110)
        headers = {k: v for k, v in err.get_headers() if k.lower() != "content-type"}
        if request.path.startswith("/api/") or request.path == "/api":
            body: Any = api.error(message, err.code or 500)
        else:
            body = (render_template("pages/error.html", title=f"{err.code} {err.name}", message=message),
                    err.code)
        response = app.make_response(body)
        response.headers.update(headers)
        return response

    @app.errorhandler(ClientGone)
    def client_gone(err: ClientGone) -> Any:
        return "", 499            # no one reads it: nothing rendered (server.fairness)

    @app.errorhandler(NoKnowledge)
    def no_knowledge(err: NoKnowledge) -> Any:
        if request.path.startswith("/api/"):
            return api.error("the rule files do not validate; see /api/health", 503, rules=err.errors)
        return render_template("pages/error.html", title="503 The rules do not validate",
                               message="The rule files have errors, and no earlier version loaded.",
                               rule_errors=err.errors), 503

    @app.errorhandler(Exception)
    def internal_error(err: Exception) -> Any:
        app.logger.exception("unhandled error")
        if request.path.startswith("/api/"):
            return api.error("internal error", 500)
        return render_template("pages/error.html", title="500 Internal Server Error",
                               message="Something went wrong while answering."), 500

    return app
