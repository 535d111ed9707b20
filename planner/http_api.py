"""The planner as an HTTP service for notebooks, scripts and agents: `planner api --host 127.0.0.1 --port 8000`.

    POST /v1/estimate     body: a scenario (the command line's JSON)      -> `python -m engine estimate`'s document
    POST /v1/search       body: a scenario; ?top=&objective=&deadline_days=&gpu_hour_budget=&confidence=&allow_span_nodes=
                          &framework=
    POST /v1/compare      body: a scenario; ?deadline_days=&weights=time=0.4,cost=0.6&accelerators=h100,mi300x&efficiency=
                          &framework=
    POST /v1/plan         body: a scenario; ?deadline_days=|budget_usd=|gpu_hours=&max_gpus=&confidence=&vendor=&efficiency=
                          &batch_range=
                          &framework= (auto: the planner chooses the stack; a stack id keeps it; as the command line)
    POST /v1/import-hf    body: a Hugging Face config.json                 -> the scenario's model block
    GET  /healthz         the process answers, and how busy it is ({"work": {"slots", "running", "waiting"}});
                          GET /readyz: the catalog loads and the store file is there (else 503)
    GET  /openapi.json    the routes and their options

Thin on purpose: read the body (at most the command line's 1 MB, JSON as engine/json_input.py reads it), call the
same functions as `python -m engine` (engine/__main__.py's *_doc), so both answer with the same document, and
serialise. The question's options are the command line's options as query parameters, with the same names and
values. Bad input is a 4xx whose body names each field: {"error": ..., "problems": [{"field", "message"}]} - 422 for
what does not match the schema (the scenario's or an option's type, an unknown field, a value out of range), 400 for
what the engine cannot use (an unknown accelerator, a layout that breaks a rule, JSON that is not JSON), 413 for a
body over the limit, 429 with Retry-After when the work limit refuses a job (engine/work_limits.py: the app's rule
and APP_MAX_CONCURRENT_WORK slots, per requester: APP_IDENTITY_HEADER's value, else the client's address).

It lives on the presentation side, outside the engine (which imports no web framework): FastAPI and uvicorn are
imported only when this module is, by `planner api`.
"""
from __future__ import annotations

import argparse
import os
import sys
from functools import lru_cache
from typing import Literal

import anyio
from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from engine import __main__ as commands
from engine import json_input
from engine.hf_config import MAX_CONFIG_BYTES, import_hf
from engine.scenario import ScenarioError, SchemaError
from engine.work_limits import Busy, Requester, WorkLimiter
from planner import APP_DIR

MAX_BODY_BYTES = commands.MAX_SCENARIO_BYTES     # the command line's limit on a scenario file
Stack = Literal[commands.STACK_CHOICES]           # the command line's --framework values
RETRY_AFTER_S = 30                               # what a refused job is told to wait before trying again
JSON_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {"type": "object"}}}}}


class BodyTooLarge(Exception):
    pass


def settings():
    """The deployment's settings (ui/settings.py: APP_DB_PATH, APP_MAX_CONCURRENT_WORK, APP_IDENTITY_HEADER, ...).
    ui lies at the repository root in a checkout and in planner/app when installed, where the app's own start puts
    it on the path; the API does the same."""
    if str(APP_DIR) not in sys.path:
        sys.path.append(str(APP_DIR))
    from ui.settings import load_settings
    return load_settings()


@lru_cache(maxsize=1)
def limiter() -> WorkLimiter:
    """This process's limiter, sized as the app's (APP_MAX_CONCURRENT_WORK)."""
    return WorkLimiter(settings().max_concurrent_work)


def requester(request: Request) -> Requester:
    header = settings().identity_header
    who = (request.headers.get(header) or "").strip() if header else ""
    return Requester(None, who or (request.client.host if request.client else None))


def problems_response(status: int, error: str, problems: list[tuple[str, str]], headers: dict | None = None):
    return JSONResponse({"error": error, "problems": [{"field": f, "message": m} for f, m in problems]},
                        status_code=status, headers=headers)


async def read_body(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The request's body, refused (BodyTooLarge) past `limit` bytes whether or not Content-Length says so."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge()
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise BodyTooLarge()
    return bytes(body)


async def scenario_body(request: Request) -> dict:
    """The scenario as the command line reads a file: JSON (json_input's bounds), an object."""
    try:
        data = json_input.loads(await read_body(request))
    except json_input.JsonInputError as err:
        raise ScenarioError([("(body)", str(err))]) from None
    if not isinstance(data, dict):
        raise ScenarioError([("(body)", "the scenario must be a JSON object with model, training, cluster (and layout)")])
    return data


async def run_limited(request: Request, what: str, work, *args, **kwargs) -> JSONResponse:
    """work(*args, **kwargs) in a worker thread, inside a slot of the work limit for this requester."""
    req = requester(request)

    def limited():
        with limiter().slot(what, req):
            return work(*args, **kwargs)

    return JSONResponse(await anyio.to_thread.run_sync(limited))


def store_problem() -> str | None:
    """None when the engine's catalog loads and the store answers, else why not. The API's answers come from the
    engine alone. A PostgreSQL store (APP_DB_URL) is queried (Store.health), as every replica shares it. The embedded
    DuckDB store is the web app's while it serves it (DuckDB: one process per file; the app's own health check asks
    it), and opening it here, even read-only for a moment, could stop the app from starting beside it, so readiness
    checks the file this process would read, not a query on it."""
    from benchmarks_db.store import SchemaVersionError, StoreConfigError, db_path, open_store
    from engine.catalog import load_catalog
    try:
        load_catalog()
    except Exception as err:                     # the engine cannot answer without its data files
        return f"catalog: {type(err).__name__}: {err}"
    deployment = settings()
    if deployment.db_url:
        try:
            return open_store(deployment.db_url, read_only=deployment.read_only).health()
        except (StoreConfigError, SchemaVersionError) as err:
            return str(err)
    path = db_path(deployment.db_path)
    if not path.is_file():
        return f"no store at {path}; create it with `planner store seed`"
    if not os.access(path, os.R_OK):
        return f"the store {path} cannot be read by this process"
    return None


def question(deadline_days: float | None = None, budget_usd: float | None = None, gpu_hours: float | None = None,
             max_gpus: int | None = None, efficiency: Literal["tuned", "typical"] = "tuned",
             batch_range: str | None = Query(None, max_length=40, examples=["512-4096"]),
             confidence: float | None = Query(None, examples=[0.9])) -> dict:
    """The plan's question as query options, as /v1/plan and /v1/compare both take it (the CLI's --deadline-days ...
    --batch-range; engine.__main__ checks it)."""
    return dict(deadline_days=deadline_days, budget_usd=budget_usd, gpu_hours=gpu_hours, max_gpus=max_gpus,
                efficiency=efficiency, batch_range=batch_range, confidence=confidence)


def create_app() -> FastAPI:
    # no /docs or /redoc: their pages load Swagger UI and ReDoc from a CDN, which a deployment inside a network
    # without the internet cannot reach; /openapi.json is the description
    app = FastAPI(title="LLM training capacity planner", version="1", docs_url=None, redoc_url=None,
                  description="The engine's commands over HTTP: each takes the command line's scenario JSON as its "
                              "body and the command's options as query parameters, and answers with the command "
                              "line's JSON document.")

    @app.exception_handler(SchemaError)
    async def schema_error(_request, err: SchemaError):
        return problems_response(422, "the scenario does not match the schema", err.problems)

    @app.exception_handler(ScenarioError)
    async def scenario_error(_request, err: ScenarioError):
        return problems_response(400, "the scenario cannot be used", err.problems)

    @app.exception_handler(RequestValidationError)
    async def option_error(_request, err: RequestValidationError):
        problems = [(".".join(str(p) for p in e["loc"]), e["msg"]) for e in err.errors()]
        return problems_response(422, "an option does not match its type", problems)

    @app.exception_handler(BodyTooLarge)
    async def too_large(_request, _err):
        return problems_response(413, "request body too large",
                                 [("(body)", f"larger than {MAX_BODY_BYTES} bytes; a scenario is a small JSON object")])

    @app.exception_handler(Busy)
    async def busy(_request, err: Busy):
        return problems_response(429, "busy", [("(request)", str(err))], headers={"Retry-After": str(RETRY_AFTER_S)})

    @app.post("/v1/estimate", openapi_extra=JSON_BODY,
              summary="memory, step time, MFU, days, cost, energy and CO2 of one scenario with its layout")
    async def estimate(request: Request):
        return await run_limited(request, "estimate", commands.estimate_doc, await scenario_body(request))

    @app.post("/v1/search", openapi_extra=JSON_BODY,
              summary="the best layouts for the scenario's cluster (its layout is ignored) and the Pareto front")
    async def search(request: Request, top: int = 10, objective: Literal["time", "cost", "energy"] = "time",
                     deadline_days: float | None = None, gpu_hour_budget: float | None = None,
                     allow_span_nodes: bool = False, framework: Stack | None = None,
                     confidence: float | None = Query(None, examples=[0.9])):
        return await run_limited(request, "layout search", commands.search_doc, await scenario_body(request),
                                 top=top, objective=objective, deadline_days=deadline_days,
                                 gpu_hour_budget=gpu_hour_budget, allow_span_nodes=allow_span_nodes,
                                 framework=framework, confidence=confidence)

    @app.post("/v1/compare", openapi_extra=JSON_BODY,
              summary="every accelerator on the scenario, each with its best layout, ranked")
    async def compare(request: Request,
                      weights: str | None = Query(None, max_length=500, examples=["time=0.4,cost=0.4,ecosystem=0.2"]),
                      accelerators: str | None = Query(None, max_length=2000, examples=["h100-sxm,mi300x"]),
                      framework: Stack | None = None, asked: dict = Depends(question)):
        return await run_limited(request, "vendor comparison", commands.compare_doc, await scenario_body(request),
                                 weights=weights, accelerators=accelerators, framework=framework, **asked)

    @app.post("/v1/plan", openapi_extra=JSON_BODY,
              summary="the answer for a deadline or budget: accelerator, cluster, days, cost, energy, CO2, ranges")
    async def plan(request: Request, vendor: str = Query("any", max_length=40), framework: Stack | None = None,
                   asked: dict = Depends(question)):
        return await run_limited(request, "plan", commands.plan_doc, await scenario_body(request), vendor=vendor,
                                 framework=framework, **asked)

    @app.post("/v1/import-hf", openapi_extra=JSON_BODY,
              summary="a Hugging Face config.json as the scenario's model block, with parameter counts")
    async def import_hf_config(request: Request):
        return JSONResponse(import_hf(await read_body(request, MAX_CONFIG_BYTES)))

    @app.get("/healthz", summary="the process answers, with its work limit's slots and the jobs running and waiting")
    async def healthz():
        return {"status": "ok", "work": limiter().state()}

    @app.get("/readyz", summary="the engine's catalog loads and the store is there (503 with the reason if not)")
    async def readyz():
        problem = await anyio.to_thread.run_sync(store_problem)
        if problem:
            return JSONResponse({"status": "unavailable", "store": problem}, status_code=503)
        return {"status": "ok"}

    return app


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="planner api", description="serve the engine's commands over HTTP "
                                                                  "(POST /v1/estimate, /v1/search, /v1/compare, "
                                                                  "/v1/plan, /v1/import-hf; /openapi.json)")
    ap.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    ap.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    args = ap.parse_args(argv)
    import uvicorn
    try:
        settings()                               # bad APP_* settings stop the start with their message
    except ValueError as err:                    # ui.settings.SettingsError
        print(f"planner api: {err}", file=sys.stderr)
        return 2
    uvicorn.run(create_app(), host=args.host, port=args.port, log_level="info",
                limit_concurrency=None, timeout_graceful_shutdown=10)
    return 0
