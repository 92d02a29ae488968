"""The results page's FastAPI app, mounted on Airflow's api-server by ``dlperf_airflow/plugin.py``.

JSON under ``api/``, the results page at ``/`` (rendered by :mod:`dlperf_airflow.results_page`), one run's page
at ``runs/<dag_id>/<run_id>`` and its report files at ``reports/<dag_id>/<run_id>/<file>``
(:mod:`dlperf_airflow.run_page`), all read from the dlperf results database (:func:`dlperf_airflow.connections.results_db_url`) and the reports
folder through :mod:`dlperf_core.reporting`. Every route needs what Airflow's own API needs to read the
``dlperf_benchmark`` DAG runs: the api-server's JWT (``Authorization: Bearer`` or the UI's ``_token`` cookie),
resolved and authorized by Airflow's own ``get_user`` and ``requires_access_dag`` (no token: 401, bad token:
403, a user without access: 403). A browser without a session asking for a page (not ``api/``) is sent to the
UI's login page instead, which brings it back. Plugin apps are not authenticated by Airflow on their own, hence
the app-wide dependency.

Airflow's security module imports the core ORM, which scheduler and task processes (which also load
plugins) should not pay for, so it is imported when a request arrives, not when the plugin loads.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from html import escape
from typing import Literal

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from dlperf_airflow.connections import results_db_url
from dlperf_airflow.results_page import nodes_png, plotted_summary, render_page, speedup_png
from dlperf_airflow.run_page import link_bar, report_file, with_link_bar
from dlperf_core.reporting.data import (
    Section,
    load_history,
    load_mlperf,
    load_nodes,
    load_overview,
    load_regressions,
    load_results,
    load_runs,
    load_summary,
)
from dlperf_core.storage import ResultStore

URL_PREFIX = "/dlperf"
"""Where the api-server mounts this app."""

DAG_ID = "dlperf_benchmark"
"""The DAG whose runs' results are shown: reading them needs read access to its runs."""


async def require_dag_run_read(request: Request) -> None:
    """Authenticate like Airflow's API (Bearer token, else the UI's cookie) and authorize reading the
    runs of :data:`DAG_ID`, with the api-server's own dependencies."""
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user, requires_access_dag

    credentials = await bearer_scheme(request)
    try:
        user = await get_user(request, None, credentials)
    except HTTPException as exc:
        if exc.status_code == 401 and _wants_page(request):
            raise HTTPException(status_code=303, headers={"Location": _login_url(request)}) from exc
        raise
    authorize = requires_access_dag("GET", DagAccessEntity.RUN, param_dag_id=DAG_ID)
    await run_in_threadpool(authorize, request, user)  # looks up the DAG's team in the metadata DB


def _wants_page(request: Request) -> bool:
    """A browser asking for one of the HTML pages (not the JSON API, not a script)."""
    return (
        request.method == "GET"
        and not request.url.path.removeprefix(request.scope.get("root_path", "")).startswith("/api/")
        and "text/html" in request.headers.get("accept", "")
    )


def _login_url(request: Request) -> str:
    """The UI's login page, which sends the browser back to ``request``'s page once logged in."""
    from airflow.api_fastapi.app import get_auth_manager

    login = get_auth_manager().get_url_login(next_url=str(request.url))
    return login if "://" in login else _ui_base(request).rstrip("/") + "/" + login.lstrip("/")


@lru_cache(maxsize=4)
def _store(url: str) -> ResultStore:
    return ResultStore(url)


def results_store() -> ResultStore:
    """The results database (``$DLPERF_DB_URL``, else the connection ``dlperf_results``; one pooled engine per URL)."""
    return _store(results_db_url())


def _ui_base(request: Request) -> str:
    """Root path of Airflow's UI, from where this app is mounted (works under a base_url too)."""
    return request.scope.get("root_path", "").removesuffix(URL_PREFIX) or "/"


def _json(section: Section) -> dict:
    return {"source": section.source, "note": section.note, "rows": section.rows}


def create_app(auth: Callable = require_dag_run_read) -> FastAPI:
    """The app; ``auth`` is the app-wide dependency every route runs first."""
    app = FastAPI(
        title="dlperf results",
        description="Benchmark results of dlperf_benchmark: latest summary, runs, repeats, history, regressions, "
        "the MLPerf comparison and the latest per-node sweep.",
        dependencies=[Depends(auth)],
    )

    @app.get("/", response_class=HTMLResponse, summary="The results page")
    def page(request: Request, run_id: str | None = None, store: ResultStore = Depends(results_store)) -> str:
        view = load_overview(store, run_id=run_id)
        return render_page(view, ui_base=_ui_base(request), db=store.engine.url.render_as_string(hide_password=True))

    @app.get("/runs/{dag_id}/{run_id}", response_class=HTMLResponse, summary="One DAG run's results and report")
    def run_page(request: Request, dag_id: str, run_id: str, store: ResultStore = Depends(results_store)) -> str:
        from dlperf_core.reporting import ReportError
        from dlperf_core.reporting.build import run_page_html
        from dlperf_core.reporting.paths import read_refusal

        refused = read_refusal(dag_id, run_id)  # planning refused it: no row, no report, but the reason
        try:
            page = run_page_html(store, run_id, dag_id=dag_id)
        except ReportError as exc:
            said = "" if refused is not None else f"<p>{escape(str(exc))}</p>"
            page = f"<!doctype html><html><body>{said}</body></html>"
        root = request.scope.get("root_path", "") + "/"
        return with_link_bar(page, link_bar(dag_id, run_id, root, refused))

    @app.get("/reports/{dag_id}/{run_id}/{name:path}", summary="A file of a run's report (HTML, md, JSON, plots)")
    def report(dag_id: str, run_id: str, name: str) -> FileResponse:
        path = report_file(dag_id, run_id, name)
        if path is None:
            raise HTTPException(status_code=404, detail=f"no report file {name!r} for run {run_id!r}")
        return FileResponse(path)

    @app.get("/api/summary", summary="Latest summary per configuration: of the latest nightly run, or of any run")
    def summary(
        of: Literal["nightly", "any"] = Query("nightly", description="nightly: the latest scheduled run; any: any run"),
        store: ResultStore = Depends(results_store),
    ) -> dict:
        return _json(load_summary(store, nightly=of == "nightly"))

    @app.get("/api/runs", summary="Recent benchmark runs, newest first")
    def runs(limit: int = Query(20, ge=1, le=500), store: ResultStore = Depends(results_store)) -> dict:
        return _json(load_runs(store, limit))

    @app.get("/api/results", summary="Every repeat of one run (default: the latest)")
    def results(run_id: str | None = None, store: ResultStore = Depends(results_store)) -> dict:
        section = load_results(store, run_id)
        if run_id is not None and not section.rows:
            raise HTTPException(status_code=404, detail=f"no results for run_id {run_id!r}")
        return _json(section)

    @app.get("/api/history", summary="Nightly history")
    def history(store: ResultStore = Depends(results_store)) -> dict:
        return _json(load_history(store))

    @app.get("/api/regressions", summary="Open regressions")
    def regressions(store: ResultStore = Depends(results_store)) -> dict:
        return _json(load_regressions(store))

    @app.get("/api/mlperf", summary="The latest summary's ResNet-50 configurations beside the imported MLPerf systems")
    def mlperf(store: ResultStore = Depends(results_store)) -> dict:
        return _json(load_mlperf(store))

    @app.get("/api/nodes", summary="The latest per-node sweep, node by node: each node against its peers")
    def nodes(store: ResultStore = Depends(results_store)) -> dict:
        return _json(load_nodes(store))

    @app.get(
        "/api/plots/nodes.png",
        summary="Node x metric heat map of the latest per-node sweep, the nodes named slow outlined",
        response_class=Response,
    )
    def nodes_plot(store: ResultStore = Depends(results_store)) -> Response:
        png = nodes_png(store)
        if png is None:
            raise HTTPException(status_code=404, detail="no per-node sweep yet")
        return Response(content=png, media_type="image/png")

    @app.get(
        "/api/plots/speedup.png",
        summary="Speedup against devices, latest nightly summary (latest of any run before the first night)",
        response_class=Response,
    )
    def speedup_plot(store: ResultStore = Depends(results_store)) -> Response:
        png = speedup_png(plotted_summary(load_summary(store), load_summary(store, nightly=False)).rows)
        if png is None:
            raise HTTPException(status_code=404, detail="no case with a speedup yet")
        return Response(content=png, media_type="image/png")

    return app


app = create_app()
"""The app the plugin mounts at :data:`URL_PREFIX`."""

__all__ = ["DAG_ID", "URL_PREFIX", "app", "create_app", "require_dag_run_read", "results_store"]
