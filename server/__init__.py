"""The kbq web surface: a Flask app factory.

In: config (KBQ_RULES: a rules directory watched for edits, or None for the shipped rules;
KBQ_EMBED_ORIGINS: origins that may frame /embed). Out: a WSGI app with the page (`pages`),
the knowledge pages (`browse`), the JSON API (`api`) and security headers on every response.
`kbq serve` runs it under waitress.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, render_template, request
from werkzeug.exceptions import HTTPException

from kb.render import duration, num


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    app = Flask(__name__)
    app.config.from_mapping(
        DEBUG=False,
        KBQ_RULES=None,
        KBQ_EMBED_ORIGINS=[],
        KBQ_RELOAD_SECONDS=1.0,
        MAX_CONTENT_LENGTH=64 * 1024,
    )
    if test_config:
        app.config.from_mapping(test_config)
    app.debug = False

    from server import api, browse, pages, security
    from server.live import LiveKnowledge, NoKnowledge

    app.extensions["kbq"] = LiveKnowledge(app.config["KBQ_RULES"], app.config["KBQ_RELOAD_SECONDS"])
    app.json = api.SafeJSON(app)
    app.jinja_env.filters.update(num=num, duration=duration)
    app.jinja_env.trim_blocks = app.jinja_env.lstrip_blocks = True
    security.init_app(app)
    app.register_blueprint(pages.bp)
    app.register_blueprint(browse.bp)
    app.register_blueprint(api.bp)

    @app.errorhandler(HTTPException)
    def http_error(err: HTTPException) -> Any:
        if request.path.startswith("/api/") or request.path == "/api":
            return api.error(err.description or err.name, err.code or 500)
        return render_template("pages/error.html", title=f"{err.code} {err.name}",
                               message=err.description), err.code

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
